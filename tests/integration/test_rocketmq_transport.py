"""The export center on a real RocketMQ 5.x broker (issue: RocketMQ transport).

The stack runs with ``EXPORT_CENTER_TRANSPORT=rocketmq`` against the broker of
``scripts/rocketmq.sh`` (topic ``test-export-center-command-v1``, worker group with
``retryMaxTimes`` 2, DLQ handler group). Commands left in the shared group by earlier
runs reach these stacks too; their tasks do not exist here, so they are acknowledged as
``task_missing`` and change nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import update

from export_center import repository
from export_center.db import db_now_plus
from export_center.models import ExportOutbox
from export_center.publisher import message_for_row
from export_center.testing import Publisher
from export_center.transport import OutgoingMessage
from export_center.transport.rocketmq import RocketMQTransport
from tests.conftest import SAMPLE_SCALE
from tests.integration.test_rocketmq_broker import rocketmq_endpoint
from tests.support.helpers import create, download, read_csv, wait_state

pytestmark = [pytest.mark.rocketmq, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
ORDERS = int(SAMPLE_SCALE * 1_500_000)
O = ExportOutbox.__table__  # noqa: E741


def mq_settings(endpoint: str, **extra):
    return {
        "transport": "rocketmq",
        "topic_prefix": "test-",
        "rocketmq": {"endpoint": endpoint, "invisible_seconds": 10, "await_seconds": 5},
        **extra,
    }


@pytest.fixture
def endpoint() -> str:
    return rocketmq_endpoint()


def outbox_of(stack, task_id: str):
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
        return task, repository.outbox_rows(conn, task.id)


def test_export_through_rocketmq(make_stack, endpoint):
    stack = make_stack(**mq_settings(endpoint))
    client = stack.client()
    detail = wait_state(client, create(client, "csv").json()["taskId"], timeout=120)
    assert detail["state"] == "succeeded", detail
    ids = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert len(ids) == ORDERS == len(set(ids))
    task, rows = outbox_of(stack, detail["taskId"])
    assert [(r.status, r.dispatch_version) for r in rows] == [("SENT", 1)]
    assert task.dispatch_version == 1 and task.attempt_count == 1


def test_publisher_crash_after_send_makes_a_duplicate_but_one_execution(make_stack, endpoint):
    stack = make_stack(**mq_settings(endpoint, publisher={"enabled": False}))
    runtime = stack.runtime
    client = stack.client()
    task_id = create(client, "csv", parameters={"from": "1995-01-01", "to": "1995-06-30"}).json()[
        "taskId"
    ]
    crashed = Publisher(runtime.engine, runtime.transport, owner="dead", lease_seconds=30)
    crashed.crash_after_send = True
    with pytest.raises(SystemExit):
        crashed.run_once()
    task, rows = outbox_of(stack, task_id)
    assert rows[0].status == "CLAIMED"
    with runtime.engine.begin() as conn:  # the dead publisher's lease runs out
        conn.execute(update(O).where(O.c.id == rows[0].id).values(lease_until=db_now_plus(-1)))
    runtime.reconciler.run_once()
    assert runtime.reconciler.last["outbox_release"] == 1
    assert Publisher(runtime.engine, runtime.transport, owner="alive").run_once() == 1
    detail = wait_state(client, task_id, timeout=120)
    assert detail["state"] == "succeeded"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        mine = [o for t, o in runtime.consumer.handled if t == task_id]
        if len(mine) >= 2:
            break
        time.sleep(0.5)
    assert sorted(mine) in (["executed", "running_live_lease"], ["executed", "terminal"]), mine
    task, rows = outbox_of(stack, task_id)
    assert task.dispatch_version == 1 and task.attempt_count == 1
    assert rows[0].status == "SENT" and rows[0].attempt_count == 2
    assert len(list(runtime.storage.list())) == 1


def test_poison_message_is_quarantined_and_never_loops(make_stack, endpoint):
    stack = make_stack(
        **mq_settings(
            endpoint,
            publisher={"enabled": False},
            reconciler={"enabled": False, "sent_stale_seconds": 5, "redispatch_grace_seconds": 0},
        )
    )
    runtime = stack.runtime
    client = stack.client()
    task_id = create(client, "csv").json()["taskId"]
    task, rows = outbox_of(stack, task_id)
    with runtime.engine.begin() as conn:  # as if the publisher had sent the real command
        conn.execute(
            update(O).where(O.c.id == rows[0].id).values(status="SENT", sent_at=db_now_plus(0))
        )
    good = message_for_row(rows[0])
    sender = RocketMQTransport(endpoint, good.topic, "unused", consume=False)
    try:
        sender.send(
            OutgoingMessage(good.topic, good.tag, good.key, b"\x00 not json", good.properties)
        )
    finally:
        sender.close()
    detail = wait_state(client, task_id, {"failed", "succeeded"}, timeout=180)
    assert detail["state"] == "failed"
    assert detail["error"] == {
        "code": "COMMAND_CORRUPTED",
        "message": "command message corrupted; create the export again",
    }
    task, rows = outbox_of(stack, task_id)
    assert rows[0].status == "QUARANTINED" and task.dispatch_version == 1
    deadline = time.monotonic() + 30  # the outcome is recorded after the commit and the ack
    while time.monotonic() < deadline:
        mine = [o for _, o, t in runtime.dlq_handler.outcomes if t == task_id]
        if mine:
            break
        time.sleep(0.2)
    assert mine == ["quarantined"], runtime.dlq_handler.outcomes
    # Twice the stale window later: the reconciler sent nothing again, no new dead letter.
    with runtime.engine.begin() as conn:
        conn.execute(update(O).where(O.c.id == rows[0].id).values(sent_at=db_now_plus(-3600)))
    for _ in range(10):
        runtime.reconciler.run_once()
        time.sleep(1)
    task, rows = outbox_of(stack, task_id)
    assert rows[0].status == "QUARANTINED" and len(rows) == 1 and task.status == "FAILED"
    assert [o for _, o, t in runtime.dlq_handler.outcomes if t == task_id] == mine


def _worker(stack, endpoint: str, name: str) -> subprocess.Popen:
    s = stack.settings
    env = {
        **os.environ,
        "EXPORT_CENTER_ENVIRONMENT": "test",
        "EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS": "true",
        "EXPORT_CENTER_DATA_DIR": str(s.data_dir),
        "EXPORT_CENTER_DATABASE_URL": s.resolved_database_url,
        "EXPORT_CENTER_API__PUBLIC_BASE_URL": stack.url,
        "EXPORT_CENTER_INSTANCE_ID": name,
        "EXPORT_CENTER_TRANSPORT": "rocketmq",
        "EXPORT_CENTER_TOPIC_PREFIX": "test-",
        "EXPORT_CENTER_ROCKETMQ__ENDPOINT": endpoint,
        "EXPORT_CENTER_ROCKETMQ__INVISIBLE_SECONDS": "10",
        "EXPORT_CENTER_PUBLISHER__ENABLED": "false",
        "EXPORT_CENTER_RECONCILER__ENABLED": "false",
        "EXPORT_CENTER_ROCKETMQ__DLQ_ENABLED": "false",
        "EXPORT_CENTER_CONSUMER__CONCURRENCY": "2",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.fault_worker"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_consumer_processes_execute_each_task_once(make_stack, endpoint):
    stack = make_stack(**mq_settings(endpoint, consumer={"enabled": False}))
    workers = [_worker(stack, endpoint, f"worker-{i}") for i in (1, 2)]
    try:
        for w in workers:
            assert "worker ready" in w.stdout.readline()
        clients = [stack.client(f"user{i}") for i in range(20)]
        task_ids = [
            create(c, "csv", parameters={"from": "1995-01-01", "to": "1995-03-31"}).json()["taskId"]
            for c in clients
        ]
        details = [wait_state(c, t, timeout=300) for c, t in zip(clients, task_ids, strict=True)]
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=60)
            except subprocess.TimeoutExpired:
                w.kill()
    assert [d["state"] for d in details] == ["succeeded"] * 20
    assert all(d["attempts"] == 1 for d in details)
    assert len(list(stack.runtime.storage.list())) == 20
    executed: dict[str, list[str]] = {}
    for path in (Path(stack.settings.data_dir) / "logs").glob("worker-*.log"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry["message"].startswith("export succeeded"):
                executed.setdefault(entry["taskId"], []).append(path.name)
    assert sorted(executed) == sorted(task_ids)
    assert all(len(v) == 1 for v in executed.values())
    assert len({v[0] for v in executed.values()}) == 2  # both processes did work


def _broker(action: str) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "rocketmq.sh"), action],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.mariadb
@pytest.mark.parametrize("db_url", ["mariadb"], indirect=True)  # once, on the production database
def test_broker_down_for_60_seconds_delays_but_never_loses_a_task(make_stack, endpoint, db_url):
    stack = make_stack(**mq_settings(endpoint, publisher={"backoff_seconds": [2, 5, 10]}))
    client = stack.client()
    _broker("stop")
    stopped = time.monotonic()
    try:
        task_id = create(
            client, "csv", parameters={"from": "1995-01-01", "to": "1995-03-31"}
        ).json()["taskId"]
        time.sleep(max(0.0, 60 - (time.monotonic() - stopped)))
        task, rows = outbox_of(stack, task_id)
        assert task.status == "PENDING" and rows[0].status == "PENDING"
        assert rows[0].attempt_count >= 2 and "send failed" in rows[0].last_error
    finally:
        _broker("start")
    detail = wait_state(client, task_id, timeout=300)
    assert detail["state"] == "succeeded"
    task, rows = outbox_of(stack, task_id)
    assert task.dispatch_version == 1 and task.attempt_count == 1
    assert rows[0].status == "SENT" and rows[0].attempt_count >= 3
