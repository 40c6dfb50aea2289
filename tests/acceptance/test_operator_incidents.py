"""Injected faults followed from the alert to the recovery with only the runbook
(docs/operations.md), on MariaDB, the real RocketMQ broker and a real Prometheus that
evaluates deploy/prometheus/alerts.yml against the running service:

- a poison command: ExportDeadLetter fires, ``dlq list`` shows it, the cause goes,
  ``tasks retry`` runs the task to success, and both steps are in the audit trail;
- the broker stopped for 3 minutes: ExportOutboxBacklog fires, ``outbox list --stuck``
  shows the waiting commands, the broker comes back and the backlog drains to 0 with
  no command typed;
- a provider answering 503 until it is fixed: ExportFailureRate fires, the tasks are
  retried after the fix and succeed.

The rules' ``for:`` durations are shortened to 2 s in the copy Prometheus loads
(tests/support/prometheus.py); expressions and thresholds are the production ones.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from sqlalchemy import update

from export_center import repository
from export_center.models import ExportOutbox
from tests.integration.test_rocketmq_broker import rocketmq_endpoint
from tests.integration.test_rocketmq_transport import _broker, mq_settings
from tests.integration.test_runbook import sections
from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import Stack, create, wait_state
from tests.support.operator_seed import cli_env, run_cli
from tests.support.prometheus import Prometheus

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.mariadb,
    pytest.mark.rocketmq,
    pytest.mark.timeout(900),
]

O = ExportOutbox.__table__  # noqa: E741
SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}


@pytest.fixture
def db_url(mariadb_db_url: str) -> str:
    """These incidents are played on MariaDB only (a fresh database)."""
    return mariadb_db_url


class Operator:
    """Someone on call with the runbook and a shell on the service's host."""

    def __init__(self, stack: Stack) -> None:
        self.env = cli_env(
            stack.settings,
            EXPORT_CENTER_TRANSPORT="rocketmq",
            EXPORT_CENTER_TOPIC_PREFIX=stack.settings.topic_prefix,
            EXPORT_CENTER_ROCKETMQ__ENDPOINT=stack.settings.rocketmq.endpoint,
        )
        self.ran: list[tuple[str, int]] = []

    def run(self, line: str) -> subprocess.CompletedProcess[str]:
        """One command line as written in the runbook (``export-center ...``)."""
        args = shlex.split(line)
        assert args[0] == "export-center", line
        result = run_cli(args[1:], self.env)
        self.ran.append((line, result.returncode))
        return result

    def json(self, line: str) -> object:
        result = self.run(f"{line} --json")
        assert result.returncode == 0, (line, result.stderr)
        return json.loads(result.stdout)

    def first_commands(self, alert: str, **ids: str) -> dict[str, subprocess.CompletedProcess]:
        """The runbook's first three commands for ``alert`` (placeholders from ``ids``)."""
        return {line: self.run(line) for line in self.runbook(alert, **ids)[:3]}

    @staticmethod
    def action(alert: str, verb: str, **ids: str) -> str:
        """The runbook's one ``tasks <verb>`` command for ``alert``."""
        (line,) = [c for c in Operator.runbook(alert, **ids) if f" tasks {verb} " in c]
        return line

    @staticmethod
    def runbook(alert: str, **ids: str) -> list[str]:
        lines = []
        for line in sections()[alert]:
            for name, value in ids.items():
                line = line.replace(f"<{name.replace('_', '-')}>", value)
            lines.append(line)
        return lines


def _scrape(prom_dir: Path, stack: Stack) -> Prometheus:
    return Prometheus(prom_dir, [stack.url.removeprefix("http://")])


def test_a_poison_command_from_the_alert_to_a_succeeded_retry(make_stack, tmp_path):
    endpoint = rocketmq_endpoint()
    # A new API release wrote commands of a schema the running workers cannot read: its
    # process takes exports but sends nothing itself.
    release = make_stack(
        **mq_settings(
            endpoint,
            publisher={"enabled": False},
            consumer={"enabled": False},
            reconciler={"enabled": False},
        )
    )
    alice = release.client("alice")
    task_id = create(alice, "csv", parameters=SEPTEMBER).json()["taskId"]
    with release.runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, task_id)
        row = repository.outbox_rows(conn, task.id)[0]
        payload = {**orjson.loads(row.payload_json), "schemaVersion": 99}
        conn.execute(
            update(O).where(O.c.id == row.id).values(payload_json=orjson.dumps(payload).decode())
        )
    # The service (publisher, workers, dead-letter handler) sends it; no worker reads it.
    service = make_stack(**mq_settings(endpoint))
    operator = Operator(service)
    with _scrape(tmp_path / "prometheus", service) as prom:
        prom.wait_for_targets()
        firing = prom.wait_for_alert("ExportDeadLetter", timeout=300)
        assert firing[0]["annotations"]["runbook_url"] == "docs/operations.md#exportdeadletter"

        letters = operator.json("export-center dlq list")
        (letter,) = [d for d in letters if d["command"]["taskId"] == task_id]
        event_id = letter["command"]["eventId"]
        assert letter["taskState"] == "failed" and "dead-lettered" in letter["reason"]
        answers = operator.first_commands(
            "ExportDeadLetter", event_id=event_id, quarantined_task_id=task_id
        )
        assert all(r.returncode == 0 for r in answers.values()), answers
        assert "system:dlq-handler" in answers[f"export-center dlq show {event_id}"].stdout
        (entry,) = operator.json(f"export-center dlq show {event_id}")["audit"]
        assert entry["details"]["properties"]["schemaVersion"] == "99"  # the cause, shown

        # The cause goes (the release is rolled back); then the runbook's recovery.
        retry = Operator.action("ExportDeadLetter", "retry", quarantined_task_id=task_id)
        done = operator.run(retry)
        assert done.returncode == 0 and "queued (dispatch version 2)" in done.stdout, done
        detail = wait_state(service.client("alice"), task_id, timeout=180)
        assert detail["state"] == "succeeded", detail
        report = operator.json(f"export-center tasks show {task_id}")
        assert [(a["action"], a["actor"].split(":")[0]) for a in report["audit"]] == [
            ("manual_retry", "operator"),
            ("dead_letter", "system"),
        ]
        assert [(c["dispatchVersion"], c["status"]) for c in report["commands"]] == [
            (1, "quarantined"),
            (2, "sent"),
        ]


def test_the_broker_stopped_for_three_minutes_drains_by_itself(make_stack, tmp_path):
    endpoint = rocketmq_endpoint()
    service = make_stack(**mq_settings(endpoint))
    operator = Operator(service)
    users = ["ann", "ben", "cai"]
    with _scrape(tmp_path / "prometheus", service) as prom:
        prom.wait_for_targets()
        warm = create(service.client("warm"), "csv", parameters=SEPTEMBER).json()["taskId"]
        assert wait_state(service.client("warm"), warm, timeout=120)["state"] == "succeeded"
        stopped = time.monotonic()
        _broker("stop")
        try:
            tasks = [
                create(service.client(u), "csv", parameters=SEPTEMBER).json()["taskId"]
                for u in users
            ]
            firing = prom.wait_for_alert("ExportOutboxBacklog", timeout=240)
            assert float(firing[0]["value"]) > 120
            answers = operator.first_commands("ExportOutboxBacklog")
            stuck = answers["export-center outbox list --stuck"]
            assert stuck.returncode == 0 and all(t in stuck.stdout for t in tasks), stuck.stdout
            doctor = answers["export-center doctor"]
            assert doctor.returncode == 1 and "FAIL broker" in doctor.stdout, doctor.stdout
            queued = answers["export-center tasks list --state queued"]
            assert all(t in queued.stdout for t in tasks)
            time.sleep(max(0.0, stopped + 180 - time.monotonic()))
        finally:
            _broker("start")
        back = time.monotonic()
        # No command typed: the publisher sends the backlog by itself, as soon as the
        # broker answers (not at each row's next try, which is 5 minutes away by now).
        prom.wait_until(
            "the backlog drained",
            lambda: operator.json("export-center outbox list") == [],
            timeout=180,
        )
        drained = time.monotonic() - back
        print(f"backlog of {len(tasks)} commands drained {drained:.1f} s after the broker was back")
        assert drained < 60
        for user, task_id in zip(users, tasks, strict=True):
            assert wait_state(service.client(user), task_id, timeout=180)["state"] == "succeeded"
        prom.wait_until(
            "ExportOutboxBacklog resolved",
            lambda: prom.rule("ExportOutboxBacklog")["state"] == "inactive",
            timeout=60,
        )
        assert prom.value("max(export_outbox_pending)") == 0
    assert [line for line, _ in operator.ran if " retry " in line or " cancel " in line] == []


def test_a_provider_answering_503_until_fixed_then_retried(flaky_stack, faulty, tmp_path):
    endpoint = rocketmq_endpoint()
    service = flaky_stack(max_attempts=1, **mq_settings(endpoint))
    faulty.reset(rows=2500, always_fail=True)
    operator = Operator(service)
    users = ["dan", "eve", "fay"]
    with _scrape(tmp_path / "prometheus", service) as prom:
        prom.wait_for_targets()
        prom.wait_for_evaluations("ExportFailureRate")
        tasks = [flaky(service.client(u, perms=FLAKY)).json()["taskId"] for u in users]
        for user, task_id in zip(users, tasks, strict=True):
            client = service.client(user, perms=FLAKY)
            assert wait_state(client, task_id, timeout=120)["state"] == "failed"
        firing = prom.wait_for_alert("ExportFailureRate", timeout=60)
        assert float(firing[0]["value"]) == pytest.approx(1.0)

        answers = operator.first_commands("ExportFailureRate", failed_task_id=tasks[0])
        listed = answers["export-center tasks list --state failed --since 1h"]
        assert all(t in listed.stdout for t in tasks) and "provider answered 503" in listed.stdout
        shown = answers[f"export-center tasks show {tasks[0]}"]
        assert "PROVIDER_UNAVAILABLE" in shown.stdout
        assert answers["export-center doctor"].returncode == 0  # the host answers; 503 is theirs

        faulty.reset(rows=2500)  # the provider team deploys a fix
        for task_id in tasks:
            retry = Operator.action("ExportFailureRate", "retry", failed_task_id=task_id)
            assert operator.run(retry).returncode == 0
        for user, task_id in zip(users, tasks, strict=True):
            client = service.client(user, perms=FLAKY)
            assert wait_state(client, task_id, timeout=120)["state"] == "succeeded"
            audit = operator.json(f"export-center tasks show {task_id}")["audit"]
            assert [a["action"] for a in audit] == ["manual_retry"]
