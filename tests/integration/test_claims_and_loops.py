"""Claim branches, publisher and reconciler on a real database.

Each test drives ``run_once()`` / ``handle()`` directly; times are set with the
database clock so the tests run the same on SQLite and MariaDB.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from sqlalchemy import select, update

from export_center import repository
from export_center.consumer import ClaimBranch, Command, Consumer
from export_center.db import db_now, db_now_plus, make_engine
from export_center.models import ExportOutbox, ExportTask
from export_center.reconciler import Reconciler
from export_center.runtime import upgrade_database
from export_center.settings import ReconcilerSettings
from export_center.storage.keys import new_object_key
from export_center.storage.local import LocalStorage
from export_center.testing import MemoryTransport, Publisher
from tests.support.helpers import stack_settings

T, O = ExportTask.__table__, ExportOutbox.__table__  # noqa: E741
TOPIC = "test-export-center-command-v1"


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    upgrade_database(eng)
    yield eng
    eng.dispose()


def new_task(engine, user: str = "u1", export_type: str = "ORDERS", **params: Any):
    new = repository.NewTask(
        export_type=export_type,
        format="CSV",
        task_name="t",
        parameters=params or {"n": user},
        tenant_id="t1",
        app_code="PLATFORM",
        requested_by=user,
        max_attempts=3,
    )
    with engine.begin() as conn:
        return repository.create_task(
            conn, new, topic=TOPIC, tag="EXPORT_TASK", limits=repository.CreateLimits(0, 100, 100)
        ).task


def set_task(engine, task_id: int, **values: Any) -> None:
    with engine.begin() as conn:
        conn.execute(update(T).where(T.c.id == task_id).values(**values))


def task(engine, task_id: int):
    with engine.connect() as conn:
        return repository.read_task(conn, task_id)


def outbox(engine, task_id: int):
    with engine.connect() as conn:
        return repository.outbox_rows(conn, task_id)


def seconds_until(engine, column, task_id: int, table=T) -> float:
    """(column - db now) in seconds, computed by the database."""
    with engine.connect() as conn:
        value, now = conn.execute(select(column, db_now()).where(table.c.id == task_id)).one()
    if isinstance(now, str):
        from datetime import datetime

        now = datetime.fromisoformat(now)
    return (value - now).total_seconds()


class _NoRun:
    """A RunContext stand-in: the claim-branch tests must never reach execution."""

    def __init__(self) -> None:
        self.settings = stack_settings()


def consumer_for(engine) -> Consumer:
    return Consumer(engine, MemoryTransport(), _NoRun(), owner="consumer-a")  # type: ignore[arg-type]


def command_for(row, version: int | None = None) -> Command:
    return Command("evt", row.task_no, version or row.dispatch_version, 1)


def snapshot(engine, task_id: int) -> dict:
    row = dataclasses.asdict(task(engine, task_id))
    row.pop("updated_at")
    return row


# ------------------------------------------------------------------ claim branches


def test_branch_task_missing(engine):
    c = consumer_for(engine)
    assert c.handle(Command("evt", "exp_" + "0" * 26, 1, 1)) == ClaimBranch.TASK_MISSING


def test_branch_older_version(engine):
    t = new_task(engine)
    set_task(engine, t.id, dispatch_version=2)
    before = snapshot(engine, t.id)
    assert consumer_for(engine).handle(command_for(t, version=1)) == ClaimBranch.OLDER_VERSION
    assert snapshot(engine, t.id) == before


@pytest.mark.parametrize("status", ["SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"])
def test_branch_terminal(engine, status):
    t = new_task(engine)
    set_task(engine, t.id, status=status)
    before = snapshot(engine, t.id)
    assert consumer_for(engine).handle(command_for(t)) == ClaimBranch.TERMINAL
    assert snapshot(engine, t.id) == before


@pytest.mark.parametrize(
    ("lease_seconds", "branch"),
    [
        (60, ClaimBranch.RUNNING_LIVE_LEASE),
        # An expired lease is left to the reconciler, which recovers it with a new version.
        (-5, ClaimBranch.RUNNING_EXPIRED_LEASE),
    ],
)
def test_branch_running(engine, lease_seconds, branch):
    t = new_task(engine)
    set_task(
        engine,
        t.id,
        status="RUNNING",
        lease_owner="other/1",
        lease_until=db_now_plus(lease_seconds),
        attempt_count=1,
    )
    before = snapshot(engine, t.id)
    assert consumer_for(engine).handle(command_for(t)) == branch
    assert snapshot(engine, t.id) == before


def test_branch_pending_in_backoff(engine):
    t = new_task(engine)
    set_task(engine, t.id, next_retry_at=db_now_plus(900))
    before = snapshot(engine, t.id)
    assert consumer_for(engine).handle(command_for(t)) == ClaimBranch.PENDING_BACKOFF
    assert snapshot(engine, t.id) == before


def test_branch_pending_lost_the_race(engine, monkeypatch):
    t = new_task(engine)
    before = snapshot(engine, t.id)
    # The competing claim is simulated: this consumer's UPDATE touches no row although
    # the task is still a due PENDING one when it reads it again.
    monkeypatch.setattr(repository, "claim_task", lambda *a, **k: False)
    assert consumer_for(engine).handle(command_for(t)) == ClaimBranch.LOST_RACE
    assert snapshot(engine, t.id) == before


def test_every_branch_acknowledges_and_bad_bodies_are_released(engine):
    transport = MemoryTransport(max_deliveries=3)
    c = Consumer(engine, transport, _NoRun(), owner="c")  # type: ignore[arg-type]
    t = new_task(engine)
    set_task(engine, t.id, status="SUCCEEDED")
    from export_center.transport import OutgoingMessage

    good = orjson.dumps(
        {"schemaVersion": 1, "eventId": "e", "taskId": t.task_no, "dispatchVersion": 1}
    )
    transport.send(OutgoingMessage(TOPIC, "EXPORT_TASK", t.task_no, good))
    delivery = transport.receive(1)
    assert c.handle_delivery(delivery) == ClaimBranch.TERMINAL and delivery.settled
    assert transport.pending() == 0
    for body in (
        b"{broken",
        orjson.dumps({"schemaVersion": 99, "eventId": "e", "taskId": "x", "dispatchVersion": 1}),
    ):
        transport.send(OutgoingMessage(TOPIC, "EXPORT_TASK", "k", body))
        for attempt in (1, 2, 3):
            d = transport.receive(1)
            assert d.delivery_attempt == attempt
            assert c.handle_delivery(d) == "invalid"
    assert len(transport.dead_letters) == 2 and transport.pending() == 0


# ------------------------------------------------------------------ publisher


def test_publisher_sends_due_rows_once_and_marks_them_sent(engine):
    transport = MemoryTransport()
    t1, t2 = new_task(engine, "a"), new_task(engine, "b")
    with engine.begin() as conn:
        conn.execute(update(O).where(O.c.task_id == t2.id).values(next_retry_at=db_now_plus(60)))
    pub = Publisher(engine, transport, owner="p1")
    assert pub.run_once() == 1 and pub.run_once() == 0
    assert [m.key for m in transport.sent] == [t1.task_no]
    msg = transport.sent[0]
    row = outbox(engine, t1.id)[0]
    assert row.status == "SENT" and row.sent_at is not None and row.lease_owner is None
    assert msg.properties == {
        "eventId": row.event_id,
        "taskId": t1.task_no,
        "dispatchVersion": "1",
        "schemaVersion": "1",
        "traceId": t1.trace_id,
    }
    payload = orjson.loads(msg.body)
    assert payload["eventId"] == row.event_id and payload["dispatchVersion"] == 1
    assert set(payload) == {
        "schemaVersion",
        "eventId",
        "taskId",
        "exportType",
        "dispatchVersion",
        "traceId",
    }
    assert outbox(engine, t2.id)[0].status == "PENDING"


def test_failed_sends_back_off_forever_and_never_touch_the_task(engine):
    transport = MemoryTransport()
    t = new_task(engine)
    pub = Publisher(engine, transport, owner="p1")
    row_id = outbox(engine, t.id)[0].id
    expected = [5, 15, 60, 300, 900, 900]
    for attempt, backoff in enumerate(expected, start=1):
        transport.fail_sends = 1
        with engine.begin() as conn:
            conn.execute(update(O).where(O.c.id == row_id).values(next_retry_at=db_now()))
        assert pub.run_once() == 0
        row = outbox(engine, t.id)[0]
        assert row.status == "PENDING" and row.attempt_count == attempt
        assert "injected" in row.last_error
        assert backoff - 1.5 <= seconds_until(engine, O.c.next_retry_at, row_id, O) <= backoff + 0.5
    with engine.begin() as conn:  # 30 failures: still PENDING, still retried
        conn.execute(
            update(O).where(O.c.id == row_id).values(attempt_count=29, next_retry_at=db_now())
        )
    transport.fail_sends = 1
    pub.run_once()
    row = outbox(engine, t.id)[0]
    assert row.status == "PENDING" and row.attempt_count == 30
    with engine.begin() as conn:
        conn.execute(update(O).where(O.c.id == row_id).values(next_retry_at=db_now()))
    assert pub.run_once() == 1
    assert outbox(engine, t.id)[0].status == "SENT"
    fresh = task(engine, t.id)
    assert fresh.attempt_count == 0 and fresh.dispatch_version == 1 and fresh.status == "PENDING"


def test_after_a_broker_outage_the_backed_off_backlog_is_sent_at_once(engine):
    transport = MemoryTransport()
    pub = Publisher(engine, transport, owner="p1", probe_seconds=0.0)
    tasks = [new_task(engine, f"user{i}") for i in range(3)]
    transport.fail_sends = 1000  # the broker is down
    assert pub.run_once() == 0
    rows = [outbox(engine, t.id)[0] for t in tasks]
    assert [(r.status, r.attempt_count) for r in rows] == [("PENDING", 1)] * 3
    # While it is down, idle passes only ask the transport: no row is claimed or counted.
    for _ in range(5):
        assert pub.run_once() == 0
    assert [outbox(engine, t.id)[0].attempt_count for t in tasks] == [1, 1, 1]
    assert all(seconds_until(engine, O.c.next_retry_at, r.id, O) > 3 for r in rows)
    transport.fail_sends = 0  # the broker is back: the next idle pass sees it
    assert pub.run_once() == 0  # the probe makes the rows due ...
    assert pub.run_once() == 3  # ... and the next pass sends them, 5 s early
    assert {outbox(engine, t.id)[0].status for t in tasks} == {"SENT"}
    assert len(transport.sent) == 3


def test_a_successful_send_releases_the_rows_that_failed_before_it(engine):
    transport = MemoryTransport()
    pub = Publisher(engine, transport, owner="p1", probe_seconds=3600.0)
    early = new_task(engine, "early")
    transport.fail_sends = 1
    assert pub.run_once() == 0  # early's send fails: backed off for 5 s
    late = new_task(engine, "late")
    assert pub.run_once() == 1  # late goes through: the broker works again
    assert outbox(engine, early.id)[0].status == "PENDING"
    assert seconds_until(engine, O.c.next_retry_at, outbox(engine, early.id)[0].id, O) <= 0
    assert pub.run_once() == 1
    assert [m.key for m in transport.sent] == [late.task_no, early.task_no]


def test_two_publishers_send_each_row_once(engine):
    import threading

    transport = MemoryTransport()
    tasks = [new_task(engine, f"user{i}") for i in range(20)]
    pubs = [Publisher(engine, transport, owner=f"p{i}") for i in range(2)]
    threads = [threading.Thread(target=p.run_once) for p in pubs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    keys = sorted(m.key for m in transport.sent)
    assert keys == sorted(t.task_no for t in tasks)


def test_crashed_publisher_claim_is_released_and_sent_again(engine):
    transport = MemoryTransport()
    t = new_task(engine)
    crashed = Publisher(engine, transport, owner="dead", lease_seconds=1)
    crashed.crash_after_send = True
    with pytest.raises(SystemExit):
        crashed.run_once()
    row = outbox(engine, t.id)[0]
    assert row.status == "CLAIMED" and len(transport.sent) == 1
    rec = Reconciler(engine, LocalStorage(engine_dir(engine)), ReconcilerSettings(), topic=TOPIC)
    rec.run_once()
    assert outbox(engine, t.id)[0].status == "CLAIMED"  # lease still live
    with engine.begin() as conn:
        conn.execute(update(O).where(O.c.id == row.id).values(lease_until=db_now_plus(-1)))
    rec.run_once()
    assert rec.last["outbox_release"] == 1
    assert Publisher(engine, transport, owner="alive").run_once() == 1
    assert len(transport.sent) == 2 and transport.sent[0].body == transport.sent[1].body
    assert outbox(engine, t.id)[0].status == "SENT"
    assert task(engine, t.id).dispatch_version == 1


def engine_dir(engine):
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="ec-files-"))


# ------------------------------------------------------------------ reconciler


def reconciler(engine, storage=None, **values: Any) -> Reconciler:
    settings = ReconcilerSettings(
        **{"redispatch_grace_seconds": 60, "sent_stale_seconds": 600, **values}
    )
    return Reconciler(engine, storage or LocalStorage(engine_dir(engine)), settings, topic=TOPIC)


def test_redispatch_writes_a_missing_outbox_row_with_the_same_version(engine):
    t = new_task(engine)
    with engine.begin() as conn:
        conn.execute(O.delete().where(O.c.task_id == t.id))
    rec = reconciler(engine)
    assert rec.run_once() == 0  # inside the grace period
    set_task(engine, t.id, next_retry_at=db_now_plus(-61))
    assert rec.run_once() == 1 and rec.last["redispatch"] == 1
    rows = outbox(engine, t.id)
    assert len(rows) == 1 and rows[0].dispatch_version == 1 and rows[0].status == "PENDING"
    assert task(engine, t.id).dispatch_version == 1
    assert rec.run_once() == 0  # idempotent


def test_stale_sent_command_is_sent_again_without_a_version_change(engine):
    t = new_task(engine)
    row_id = outbox(engine, t.id)[0].id
    set_task(
        engine, t.id, next_retry_at=db_now_plus(-700), attempt_count=3
    )  # attempts used: no limit here
    with engine.begin() as conn:
        conn.execute(
            update(O).where(O.c.id == row_id).values(status="SENT", sent_at=db_now_plus(-601))
        )
    rec = reconciler(engine)
    assert rec.run_once() == 1
    row = outbox(engine, t.id)[0]
    assert row.status == "PENDING" and row.id == row_id and row.dispatch_version == 1
    assert task(engine, t.id).dispatch_version == 1


def test_quarantined_rows_are_never_redispatched(engine):
    t = new_task(engine)
    set_task(engine, t.id, next_retry_at=db_now_plus(-700))
    with engine.begin() as conn:
        conn.execute(
            update(O)
            .where(O.c.task_id == t.id)
            .values(status="QUARANTINED", sent_at=db_now_plus(-9999))
        )
    rec = reconciler(engine)
    for _ in range(3):
        assert rec.run_once() == 0
    rows = outbox(engine, t.id)
    assert len(rows) == 1 and rows[0].status == "QUARANTINED"


def test_a_task_in_backoff_is_not_redispatched_early(engine):
    t = new_task(engine)
    set_task(engine, t.id, next_retry_at=db_now_plus(900), dispatch_version=2)
    with engine.begin() as conn:
        conn.execute(
            update(O)
            .where(O.c.task_id == t.id)
            .values(status="SENT", sent_at=db_now_plus(-3600), dispatch_version=2)
        )
    rec = reconciler(engine)
    for _ in range(3):
        assert rec.run_once() == 0
    assert outbox(engine, t.id)[0].status == "SENT"
    set_task(engine, t.id, next_retry_at=db_now_plus(-30))  # due, but inside the grace
    assert rec.run_once() == 0
    set_task(engine, t.id, next_retry_at=db_now_plus(-61))
    assert rec.run_once() == 1 and outbox(engine, t.id)[0].status == "PENDING"
    assert task(engine, t.id).dispatch_version == 2


def test_expired_lease_is_recovered_with_a_new_version_or_failed(engine):
    # A lost worker is not one of the task's attempts: recoveries have their own limit
    # (task.max_lease_recoveries, 3), and the attempt it was running is not counted.
    a, b = new_task(engine, "a"), new_task(engine, "b")
    for t, recoveries in ((a, 0), (b, 3)):
        set_task(
            engine,
            t.id,
            status="RUNNING",
            lease_owner="dead/1",
            lease_until=db_now_plus(-1),
            attempt_count=1,
            lease_recoveries=recoveries,
            phase="render",
        )
    live = new_task(engine, "c")
    set_task(
        engine,
        live.id,
        status="RUNNING",
        lease_owner="alive/1",
        lease_until=db_now_plus(60),
        attempt_count=1,
    )
    rec = reconciler(engine)
    rec.run_once()
    assert rec.last["lease_recover"] == 2
    ra, rb, rc = task(engine, a.id), task(engine, b.id), task(engine, live.id)
    assert ra.status == "PENDING" and ra.dispatch_version == 2 and ra.lease_owner is None
    assert ra.failure_code == "WORKER_LOST" and "render" in ra.failure_message
    assert (ra.attempt_count, ra.lease_recoveries) == (0, 1)
    assert "lease recovery 1 of 3" in ra.failure_message
    assert [r.dispatch_version for r in outbox(engine, a.id)] == [1, 2]
    assert (
        rb.status == "FAILED"
        and rb.dispatch_version == 1
        and "lease recoveries (3) are used" in rb.failure_message
    )
    assert rc.status == "RUNNING" and rc.lease_owner == "alive/1"


def test_succeeded_files_expire_after_retention_and_failed_deletes_are_retried(engine, tmp_path):
    storage = LocalStorage(tmp_path)
    t = new_task(engine)
    key = new_object_key(t.task_no, "csv", tenant="t1")
    with storage.open_write(key) as fh:
        fh.write(b"x")
    storage.commit(key)
    set_task(engine, t.id, status="SUCCEEDED", object_key=key, expires_at=db_now_plus(60))

    class Broken(LocalStorage):
        def delete(self, key: str) -> None:
            raise OSError("disk unavailable")

    assert reconciler(engine, Broken(tmp_path)).run_once() == 0
    set_task(engine, t.id, expires_at=db_now_plus(-1))
    reconciler(engine, Broken(tmp_path)).run_once()
    assert task(engine, t.id).status == "SUCCEEDED" and storage.exists(key)
    rec = reconciler(engine, storage)
    rec.run_once()
    assert rec.last["expire"] == 1
    assert task(engine, t.id).status == "EXPIRED" and not storage.exists(key)


def test_orphan_files_are_deleted_and_live_files_kept(engine, tmp_path):
    storage = LocalStorage(tmp_path)
    done, failed, running = new_task(engine, "a"), new_task(engine, "b"), new_task(engine, "c")
    keys = {}
    for name, t in (
        ("done", done),
        ("stale", done),
        ("failed", failed),
        ("running", running),
        ("unknown", SimpleNamespace(task_no="exp_" + "1" * 26)),  # no such task
    ):
        keys[name] = new_object_key(t.task_no, "csv", tenant="t1")
        with storage.open_write(keys[name]) as fh:
            fh.write(b"x")
        if name != "running":
            storage.commit(keys[name])
    set_task(
        engine, done.id, status="SUCCEEDED", object_key=keys["done"], expires_at=db_now_plus(600)
    )
    set_task(engine, failed.id, status="FAILED")
    set_task(engine, running.id, status="RUNNING", lease_until=db_now_plus(60))
    assert reconciler(engine, storage).run_once() == 0  # younger than 24 h
    rec = reconciler(engine, storage, orphan_age_seconds=0)
    rec.run_once()
    assert rec.last["orphan_clean"] == 3
    left = sorted(o.key for o in storage.list())
    assert left == sorted([keys["done"], keys["running"]])


def test_old_sent_outbox_rows_are_purged(engine):
    old, recent = new_task(engine, "a"), new_task(engine, "b")
    with engine.begin() as conn:
        conn.execute(
            update(O)
            .where(O.c.task_id == old.id)
            .values(status="SENT", sent_at=db_now_plus(-8 * 86400))
        )
        conn.execute(
            update(O)
            .where(O.c.task_id == recent.id)
            .values(status="SENT", sent_at=db_now_plus(-86400))
        )
    rec = reconciler(engine)
    rec.run_once()
    assert rec.last["outbox_purge"] == 1
    assert outbox(engine, old.id) == [] and len(outbox(engine, recent.id)) == 1


@pytest.fixture
def mariadb_engine(mariadb_db_url):
    engine = make_engine(mariadb_db_url)
    upgrade_database(engine)
    yield engine
    engine.dispose()


@pytest.mark.mariadb
def test_a_row_locked_by_a_frozen_worker_does_not_stall_the_lease_recovery(mariadb_engine):
    # A worker frozen (SIGSTOP) inside a transaction keeps its row locks until its
    # connection dies: the reconciler leaves that task for a later pass and recovers
    # the others now, instead of waiting the lock wait timeout on it.
    engine = mariadb_engine
    frozen, free = new_task(engine, "a"), new_task(engine, "b")
    for t, expired in ((frozen, -20), (free, -10)):  # the frozen one is first in line
        set_task(
            engine,
            t.id,
            status="RUNNING",
            lease_owner="dead/1",
            lease_until=db_now_plus(expired),
            attempt_count=1,
        )
    holder = engine.connect()
    transaction = holder.begin()
    holder.execute(select(T.c.id).where(T.c.id == frozen.id).with_for_update())
    try:
        rec = reconciler(engine)
        rec.run_once()
        assert rec.last["lease_recover"] == 1
        assert task(engine, free.id).status == "PENDING"
    finally:
        transaction.rollback()
        holder.close()
    assert task(engine, frozen.id).status == "RUNNING"  # left for the next pass
    rec.run_once()
    assert task(engine, frozen.id).status == "PENDING"
