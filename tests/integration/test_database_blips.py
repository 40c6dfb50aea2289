"""The export center's database is allowed to blink.

* A blip of a few seconds during running exports (single stream, one shard, day shards):
  every export ends SUCCEEDED with exactly its rows, none spends an attempt, none changes
  its dispatch version, nobody recovers a lease.
* An outage longer than the lease: each attempt hands its task back the moment the
  database answers (audit ``hand_back``), the attempt not counted, without waiting for
  the reconciler; the next attempt succeeds.
* The watchdog renews through a blip and stops the attempt (``WorkerInterrupted``) only
  once the lease may have run out by its own clock.
* A claim that meets a blip is tried again and wins.
* The loops log an outage once, and its end once, with no traceback per pass.
* Lease recoveries are counted apart from attempts, with their own limit.

The outage is :class:`export_center.testing.DatabaseOutage` on the export center's engine
(every statement refused with MariaDB's "can't connect"); the sample providers read their
own database, so only the export center's writes are hit. A real MariaDB restart runs in
``tests/acceptance/test_database_restart.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from sqlalchemy import update

from export_center import repository
from export_center.attempt.watchdog import Watchdog
from export_center.db import db_now_plus
from export_center.errors import WorkerInterrupted
from export_center.models import ExportTask
from export_center.testing import DatabaseOutage, DeadlockVictim, FaultInjectingRun
from tests.conftest import SAMPLE_SCALE
from tests.support.helpers import (
    ORDERS_PERMISSION,
    create,
    download,
    read_csv,
    read_xlsx,
    wait_state,
)

T = ExportTask.__table__
CUSTOMERS_PERMISSION = "export:customers:create"
ORDERS = int(SAMPLE_SCALE * 1_500_000)
CUSTOMERS = int(SAMPLE_SCALE * 150_000)


def _slowly(seconds: float, hold: threading.Event | None = None) -> Any:
    """A fault that makes every written batch take ``seconds`` longer, and, with
    ``hold``, keeps each attempt's writes waiting until it is set (the exports are all
    running when the outage comes)."""

    def fault(point: str) -> None:
        if point == "render":
            if hold is not None:
                hold.wait(120)
            time.sleep(seconds)

    return FaultInjectingRun.with_fault(fault)


def _wait_started(stack: Any, task_ids: list[str], timeout: float = 120) -> None:
    """Until every task is RUNNING (its first batch fetched, its writes held)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_task(stack, t).status == "RUNNING" for t in task_ids):
            return
        time.sleep(0.05)
    raise AssertionError("not all started")


def _task(stack: Any, task_id: str) -> repository.Task:
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
    assert task is not None
    return task


def _audit(stack: Any, task: repository.Task) -> list[tuple[str, str]]:
    with stack.runtime.engine.connect() as conn:
        return [(e.action, e.outcome) for e in repository.audit_entries(conn, task_id=task.id)]


def _order_keys(data: bytes) -> list[int]:
    return [int(row[0]) for row in read_csv(data)[1:]]


def test_a_blip_during_running_exports_costs_no_attempt(make_stack):
    stack = make_stack(
        task={"lease_seconds": 20, "heartbeat_seconds": 0.5},
        consumer={"concurrency": 3},
    )
    hold = threading.Event()
    stack.runtime.consumer.run_factory = _slowly(0.05, hold)
    client = stack.client(perms=[ORDERS_PERMISSION, CUSTOMERS_PERMISSION])
    ids = [
        create(client, "csv", parameters={}).json()["taskId"],  # one shard, all orders
        create(client, "xlsx", parameters={"from": "1995-01-01", "to": "1995-12-31"}).json()[
            "taskId"
        ],  # day shards
        create(client, "csv", exportType="CUSTOMERS").json()["taskId"],  # single stream
    ]
    _wait_started(stack, ids)
    outage = DatabaseOutage(stack.runtime.engine)
    with outage.lasting(2.5):
        hold.set()  # the exports write into the outage
    assert outage.refused > 0, "the outage did not meet the running exports"
    details = [wait_state(client, t, timeout=300) for t in ids]
    assert [d["state"] for d in details] == ["succeeded"] * 3, details
    keys = _order_keys(download(client, details[0]))
    assert len(keys) == ORDERS and len(set(keys)) == ORDERS
    rows = read_xlsx(download(client, details[1]))[1:]
    assert len({r[0] for r in rows}) == len(rows) == details[1]["total"]
    customers = read_csv(download(client, details[2]))[1:]
    assert len({r[0] for r in customers}) == len(customers) == CUSTOMERS
    for task_id in ids:
        task = _task(stack, task_id)
        # No attempt spent, no new dispatch version, nobody took a lease or handed back.
        assert (task.attempt_count, task.dispatch_version, task.lease_recoveries) == (1, 1, 0)
        assert not [a for a in _audit(stack, task) if a[0] in ("lease_recovery", "hand_back")]


def test_an_outage_longer_than_the_lease_hands_back_at_once(make_stack):
    # No reconciler: only the attempt itself can give the task back.
    stack = make_stack(
        task={"lease_seconds": 3, "heartbeat_seconds": 0.5},
        reconciler={"enabled": False},
    )
    hold = threading.Event()
    stack.runtime.consumer.run_factory = _slowly(0.1, hold)
    client = stack.client(perms=[ORDERS_PERMISSION, CUSTOMERS_PERMISSION])
    task_id = create(client, "xlsx", exportType="CUSTOMERS").json()["taskId"]
    _wait_started(stack, [task_id])
    with DatabaseOutage(stack.runtime.engine).lasting(6.0):
        hold.set()
    stack.runtime.consumer.run_factory = FaultInjectingRun  # full speed from now on
    detail = wait_state(client, task_id, timeout=300)
    assert detail["state"] == "succeeded", detail
    rows = read_xlsx(download(client, detail))[1:]
    assert len({r[0] for r in rows}) == len(rows) == CUSTOMERS
    task = _task(stack, task_id)
    # The interrupted attempt was handed back (version 2) and not counted.
    assert (task.dispatch_version, task.attempt_count, task.lease_recoveries) == (2, 1, 0)
    audit = _audit(stack, task)
    assert ("hand_back", "released") in audit, audit
    assert not [a for a in audit if a[0] == "lease_recovery"]
    with stack.runtime.engine.connect() as conn:
        (entry,) = [
            e for e in repository.audit_entries(conn, task_id=task.id) if e.action == "hand_back"
        ]
    assert entry.actor == "system:worker" and entry.dispatch_version == 1
    assert "database did not answer" in (entry.reason or ""), entry.reason
    # Only the committed file is stored: the interrupted attempt's partial file is gone.
    assert [o.key for o in stack.runtime.storage.list()] == [task.object_key]


def _claimed(stack: Any, client: Any) -> tuple[repository.Task, str]:
    """A CUSTOMERS task claimed by hand (no consumer runs), with its lease owner."""
    task_id = create(client, "csv", exportType="CUSTOMERS").json()["taskId"]
    engine = stack.runtime.engine
    with engine.begin() as conn:
        task = repository.read_task_by_no(conn, task_id)
        assert task is not None
        assert repository.claim_task(
            conn, task.id, 1, "probe/1", lease_seconds=4, max_duration_seconds=600
        )
    return task, "probe/1"


def _watchdog(engine: Any, task: Any, owner: str, *, heartbeat_seconds: float) -> Watchdog:
    """A watchdog of the claimed task's first dispatch, with a 4 s lease."""
    return Watchdog(
        engine,
        task_id=task.id,
        version=1,
        owner=owner,
        lease_seconds=4,
        heartbeat_seconds=heartbeat_seconds,
        name=task.task_no,
    )


def test_the_watchdog_renews_through_a_blip_and_stops_when_the_lease_may_be_gone(make_stack):
    stack = make_stack(consumer={"enabled": False}, reconciler={"enabled": False})
    client = stack.client(perms=[CUSTOMERS_PERMISSION])
    task, owner = _claimed(stack, client)
    engine = stack.runtime.engine
    dog = _watchdog(engine, task, owner, heartbeat_seconds=0.5)
    dog.start()
    outage = DatabaseOutage(engine)
    try:
        with DatabaseOutage(engine).lasting(2.0):
            pass
        time.sleep(1.0)  # a renewal after the blip
        dog.check()  # the attempt may go on
        assert not dog.aborted and dog.lease_left() > 2.5
        renewed = dog.renewals
        assert renewed > 0
        outage.start(6.0)  # longer than the lease: 4 s less the margin
        deadline = time.monotonic() + 10
        while not dog.aborted and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(WorkerInterrupted, match="database did not answer"):
            dog.check()
        assert dog.renewals == renewed
    finally:
        outage.close()
        dog.stop()


@pytest.mark.parametrize("code", [1213, 1205])
def test_a_renewal_chosen_as_a_deadlock_victim_is_tried_again(make_stack, code):
    stack = make_stack(consumer={"enabled": False}, reconciler={"enabled": False})
    client = stack.client(perms=[CUSTOMERS_PERMISSION])
    task, owner = _claimed(stack, client)
    engine = stack.runtime.engine
    victim = DeadlockVictim(engine, "SET lease_until", times=3, code=code)
    dog = _watchdog(engine, task, owner, heartbeat_seconds=0.3)
    dog.start()
    try:
        deadline = time.monotonic() + 10
        while dog.renewals < 2 and not dog.aborted and time.monotonic() < deadline:
            time.sleep(0.05)
        dog.check()  # not a lost lease: the attempt goes on
        assert victim.failed == 3 and dog.renewals >= 2 and not dog.aborted
        assert dog.lease_left() > 3
    finally:
        victim.close()
        dog.stop()
    with engine.connect() as conn:
        state = repository.attempt_state(conn, task.id)
    assert state is not None and state.lease_owner == owner and state.dispatch_version == 1


def test_a_claim_that_meets_a_blip_is_tried_again(make_stack):
    stack = make_stack(consumer={"enabled": False})  # the test hands the command over
    client = stack.client(perms=[CUSTOMERS_PERMISSION])
    consumer = stack.runtime.consumer
    outage = DatabaseOutage(stack.runtime.engine)
    task_id = create(client, "csv", exportType="CUSTOMERS").json()["taskId"]
    with stack.runtime.engine.connect() as conn:
        (row,) = repository.outbox_rows(conn, _task(stack, task_id).id)
    from export_center.commands import decode

    command = decode(row.payload_json.encode())
    outage.start(1.5)
    try:
        assert consumer.handle(command) == "executed"
    finally:
        outage.close()
    assert outage.refused > 0
    task = _task(stack, task_id)
    assert (task.status, task.attempt_count, task.dispatch_version) == ("SUCCEEDED", 1, 1)


def test_the_loops_log_an_outage_once_and_its_end_once(make_stack, caplog):
    stack = make_stack(publisher={"loop_seconds": 0.05}, reconciler={"loop_seconds": 0.1})
    caplog.set_level(logging.INFO, logger="export_center")
    with DatabaseOutage(stack.runtime.engine).lasting(3.0):
        pass
    time.sleep(1.5)  # each loop's first pass after the back-off
    lines = [r for r in caplog.records if r.name == "export_center.loops"]
    for loop in ("publisher", "reconciler"):
        down = [r for r in lines if r.getMessage().startswith(f"loop {loop}: the database does")]
        back = [r for r in lines if f"loop {loop}: the database answers again" in r.getMessage()]
        assert len(down) == 1 and len(back) == 1, [r.getMessage() for r in lines]
        assert down[0].levelno == logging.WARNING and back[0].levelno == logging.INFO
    assert not [r for r in caplog.records if "pass failed" in r.getMessage()]
    assert not [r for r in caplog.records if r.exc_info and r.name.startswith("export_center")]


def test_lease_recoveries_are_counted_apart_from_attempts(make_stack):
    stack = make_stack(consumer={"enabled": False}, reconciler={"enabled": False})
    client = stack.client(perms=[CUSTOMERS_PERMISSION])
    task_id = create(client, "csv", exportType="CUSTOMERS").json()["taskId"]
    engine = stack.runtime.engine
    reconciler = stack.runtime.reconciler
    limit = stack.settings.task.max_lease_recoveries
    for n in range(1, limit + 2):
        task = _task(stack, task_id)
        with engine.begin() as conn:
            assert repository.claim_task(
                conn,
                task.id,
                task.dispatch_version,
                f"dead/{n}",
                lease_seconds=30,
                max_duration_seconds=600,
            )
            conn.execute(  # the worker died: its lease runs out
                update(T).where(T.c.id == task.id).values(lease_until=db_now_plus(-1))
            )
        reconciler.run_once()
        after = _task(stack, task_id)
        if n <= limit:
            # Not one of the type's 3 attempts: the export did not fail.
            assert (after.status, after.attempt_count, after.lease_recoveries) == (
                "PENDING",
                0,
                n,
            )
            assert f"lease recovery {n} of {limit}" in (after.failure_message or "")
        else:
            assert (after.status, after.failure_code) == ("FAILED", "WORKER_LOST")
            assert f"lease recoveries ({limit}) are used" in (after.failure_message or "")
    detail = client.get(f"/api/v1/exports/{task_id}").json()
    assert detail["state"] == "failed" and detail["error"]["code"] == "WORKER_LOST"


def test_a_settle_write_that_committed_but_lost_its_answer_counts_as_done(make_stack):
    """The commit's first try committed, then the answer was lost: trying it again
    finds the task SUCCEEDED with this attempt's file and does not delete the file."""
    stack = make_stack(consumer={"enabled": False}, reconciler={"enabled": False})
    client = stack.client(perms=[CUSTOMERS_PERMISSION])
    task, owner = _claimed(stack, client)
    engine = stack.runtime.engine
    from export_center.attempt.writes import AttemptWrites

    dog = Watchdog(
        engine, task_id=task.id, version=1, owner=owner, lease_seconds=4, heartbeat_seconds=1
    )
    writes = AttemptWrites(
        engine,
        task=task,
        version=1,
        owner=owner,
        watchdog=dog,
        settings=stack.settings.task,
        topic=stack.settings.command_topic,
        stopping=threading.Event(),
    )
    stored = repository.StoredFile(
        object_key="exports/t1/2026/12/" + task.task_no + "/" + "0" * 32 + ".csv",
        file_name="c.csv",
        content_type="text/csv",
        size_bytes=3,
        row_count=1,
        warning=None,
    )
    with engine.begin() as conn:  # what the first, unanswered try did
        assert repository.commit_success(conn, task.id, 1, owner, stored, retention_seconds=60)
    writes.commit(stored, retention_seconds=60)  # no LeaseLost: it was this attempt's
    assert _task(stack, task.task_no).status == "SUCCEEDED"
