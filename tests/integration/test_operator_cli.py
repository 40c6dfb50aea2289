"""The operator CLI in a subprocess against a seeded database (SQLite and MariaDB):
``tasks list|show|retry|cancel``, ``outbox list``, ``dlq list|show``, with tables or
``--json``, and errors as one line with a code and a non-zero exit."""

from __future__ import annotations

import getpass
import json

from tests.support.fault_provider import FLAKY
from tests.support.helpers import wait_state
from tests.support.operator_seed import cli_env, last_line, run_cli


def _json(result):
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_tasks_list_filters_and_bounds(seeded):
    everything = _json(seeded.cli("tasks", "list", "--json"))
    states = {t["taskId"]: t["state"] for t in everything}
    assert states == {
        seeded.succeeded: "succeeded",
        seeded.failed: "failed",
        seeded.quarantined: "failed",
        seeded.stuck: "queued",
    }
    failed = _json(seeded.cli("tasks", "list", "--state", "failed", "--json"))
    assert {t["taskId"] for t in failed} == {seeded.failed, seeded.quarantined}
    both = seeded.cli("tasks", "list", "--state", "failed", "--state", "queued", "--json")
    assert len(_json(both)) == 3
    assert [
        t["taskId"] for t in _json(seeded.cli("tasks", "list", "--type", "FLAKY", "--json"))
    ] == [seeded.failed]
    by_user = _json(seeded.cli("tasks", "list", "--user", "alice", "--json"))
    assert [t["owner"] for t in by_user] == ["alice"]
    assert len(_json(seeded.cli("tasks", "list", "--since", "1h", "--json"))) == 4
    assert _json(seeded.cli("tasks", "list", "--since", "2099-01-01", "--json")) == []
    assert _json(seeded.cli("tasks", "list", "--tenant", "t2", "--json")) == []
    assert len(_json(seeded.cli("tasks", "list", "--limit", "2", "--json"))) == 2
    table = seeded.cli("tasks", "list")
    assert table.returncode == 0 and "tasks (4)" in table.stdout
    assert "provider answered 503" in table.stdout and seeded.failed in table.stdout
    assert "September for bob" in table.stdout  # the name users report an export by

    unknown = seeded.cli("tasks", "list", "--state", "broken")
    assert unknown.returncode == 1 and last_line(unknown).startswith("INVALID_STATE: ")
    bad_since = seeded.cli("tasks", "list", "--since", "yesterday")
    assert bad_since.returncode == 2 and "--since" in bad_since.stderr
    too_many = seeded.cli("tasks", "list", "--limit", "5000")
    assert too_many.returncode == 2


def test_tasks_show_prints_the_task_its_commands_audit_and_trace_id(seeded):
    report = _json(seeded.cli("tasks", "show", seeded.failed, "--json"))
    task = report["task"]
    assert task["state"] == "failed" and task["errorCode"] == "PROVIDER_UNAVAILABLE"
    assert [(c["dispatchVersion"], c["status"]) for c in report["commands"]] == [(1, "sent")]
    assert report["audit"] == []
    table = seeded.cli("tasks", "show", seeded.failed)
    assert table.returncode == 0
    assert "trace id" in table.stdout and task["traceId"] in table.stdout
    assert "PROVIDER_UNAVAILABLE: fetch: batch 1: provider answered 503" in table.stdout
    missing = seeded.cli("tasks", "show", "exp_01M8QZKN3RQRYV1AQSV6Q4X3RZ")
    assert missing.returncode == 1 and last_line(missing).startswith("TASK_NOT_FOUND: ")


def test_outbox_list_shows_the_stuck_command(seeded):
    rows = _json(seeded.cli("outbox", "list", "--stuck", "--json"))
    assert [(r["taskId"], r["eventId"], r["status"]) for r in rows] == [
        (seeded.stuck, seeded.stuck_event, "pending")
    ]
    assert rows[0]["ageSeconds"] >= 599 and rows[0]["sends"] == 0
    later = seeded.cli("outbox", "list", "--stuck", "--stuck-seconds", "3600", "--json")
    assert _json(later) == []
    table = seeded.cli("outbox", "list", "--stuck")
    assert "unsent commands (1, stuck)" in table.stdout and seeded.stuck_event in table.stdout


def test_dlq_list_and_show_explain_the_quarantined_command(seeded):
    letters = _json(seeded.cli("dlq", "list", "--json"))
    assert len(letters) == 1
    letter = letters[0]
    assert letter["command"]["eventId"] == seeded.quarantined_event
    assert letter["command"]["taskId"] == seeded.quarantined and letter["taskState"] == "failed"
    assert "dead-lettered" in letter["reason"]
    shown = _json(seeded.cli("dlq", "show", seeded.quarantined_event, "--json"))
    (entry,) = shown["audit"]
    assert (entry["actor"], entry["action"], entry["outcome"]) == (
        "system:dlq-handler",
        "dead_letter",
        "quarantined",
    )
    assert entry["details"]["messageId"] and entry["details"]["properties"]["taskId"] == (
        seeded.quarantined
    )
    table = seeded.cli("dlq", "show", seeded.quarantined_event)
    assert "system:dlq-handler" in table.stdout and "payload" in table.stdout
    missing = seeded.cli("dlq", "show", "no-such-event")
    assert missing.returncode == 1 and last_line(missing).startswith("EVENT_NOT_FOUND: ")


def test_retry_and_cancel_follow_the_api_rules_and_are_audited(seeded):
    operator = f"operator:{getpass.getuser()}"
    no_reason = seeded.cli("tasks", "retry", seeded.failed)
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    short = seeded.cli("tasks", "retry", seeded.failed, "--reason", " x ")
    assert short.returncode == 2 and "3 to 500 characters" in short.stderr
    other_tenant = seeded.cli(
        "tasks", "retry", seeded.failed, "--reason", "fixed", "--tenant", "t2"
    )
    assert other_tenant.returncode == 1 and last_line(other_tenant).startswith("TASK_NOT_FOUND: ")
    cancelled = seeded.cli("tasks", "cancel", seeded.stuck, "--reason", "asked twice")
    assert (
        cancelled.returncode == 0 and f"{seeded.stuck} (Dave waits): cancelled" in cancelled.stdout
    )
    audit = _json(seeded.cli("tasks", "show", seeded.stuck, "--json"))["audit"]
    assert [(a["action"], a["outcome"], a["reason"]) for a in audit] == [
        ("manual_cancel", "cancelled", "asked twice")
    ]
    twice = seeded.cli("tasks", "cancel", seeded.stuck, "--reason", "asked twice")
    assert twice.returncode == 1 and last_line(twice).startswith("NOT_CANCELLABLE: ")
    done = seeded.cli("tasks", "retry", seeded.failed, "--reason", "provider redeployed")
    assert done.returncode == 0, done.stderr
    assert (
        f"{seeded.failed} (September for bob): queued (dispatch version 2)" in done.stdout
        and operator in done.stdout
    )
    # The retried command, and the cancelled task's command (acknowledged unexecuted).
    assert seeded.publish() == 2
    client = seeded.stack.client("bob", perms=["export:flaky:create"])
    assert wait_state(client, seeded.failed)["state"] == "succeeded"
    report = _json(seeded.cli("tasks", "show", seeded.failed, "--json"))
    assert [(a["actor"], a["action"], a["reason"]) for a in report["audit"]] == [
        (operator, "manual_retry", "provider redeployed")
    ]
    again = seeded.cli("tasks", "retry", seeded.failed, "--reason", "once more")
    assert again.returncode == 1 and last_line(again).startswith("NOT_RETRYABLE: ")

    finished = seeded.cli("tasks", "retry", seeded.succeeded, "--reason", "why not")
    assert finished.returncode == 1 and last_line(finished).startswith("NOT_RETRYABLE: ")
    assert _json(seeded.cli("outbox", "list", "--json")) == []


def test_a_database_that_does_not_answer_is_one_line_that_points_to_doctor(seeded):
    env = cli_env(
        seeded.stack.settings,
        EXPORT_CENTER_DATABASE_URL="mysql+pymysql://nobody:secret@127.0.0.1:1/none",
    )
    for args in (["tasks", "list"], ["outbox", "list"], ["dlq", "list"]):
        result = run_cli(args, env)
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert lines[-1].startswith("database error on mysql+pymysql://nobody:***@127.0.0.1:1/")
        assert "export-center doctor" in lines[-1]
        assert "Traceback" not in result.stderr and "secret" not in result.stderr


def test_tasks_show_prints_the_signed_manifest_of_a_succeeded_export(seeded):
    api = seeded.stack.client("alice", perms=FLAKY).get(
        f"/api/v1/exports/{seeded.succeeded}/manifest"
    )
    assert api.status_code == 200, api.text
    manifest = api.json()
    report = _json(seeded.cli("tasks", "show", seeded.succeeded, "--json"))
    # The operator sees the same signed document the API answers.
    assert report["manifest"] == manifest
    table = seeded.cli("tasks", "show", seeded.succeeded)
    assert table.returncode == 0, table.stderr
    (entry,) = manifest["files"]
    assert entry["sha256"] in table.stdout
    assert f"{manifest['controlTotals']['rowCount']:,} rows" in table.stdout
    assert "HMAC-SHA256" in table.stdout
    assert "columns: all; options:" in table.stdout
    # A failed export has none.
    assert _json(seeded.cli("tasks", "show", seeded.failed, "--json"))["manifest"] is None
