"""Distributed shards on SQLite and MariaDB: each shard a unit of work that any worker
claims (its own lease, fencing, checkpoint and attempts), woken through the outbox, run
to the same bytes as a threaded or sequential run, bounded by the type's ``parallel``
across the runners, recovered when its runner dies, stopped by a cancel, failed or
retried by what its runner met, and finalized once by the coordinator.

The workers here are the consumer threads of one stack (each claim has its own lease
owner: to the database they are as foreign as two processes); the run on several
processes with RocketMQ and S3 is ``python -m bench --only distributed``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import time
from typing import Any

import pytest
from sqlalchemy import func, select, update

from export_center.attempt.shards import plan_shards
from export_center.db import db_now
from export_center.errors import StorageError
from export_center.models import ExportAudit, ExportOutbox, ExportShard, ExportTask
from export_center.reconciler import Reconciler
from export_center.repository import shard_units
from export_center.settings import ReconcilerSettings
from export_center.testing import DeadlockVictim, FaultInjectingRun
from tests.integration.test_shards import (
    ALL_DATES,
    ORDERS,
    _parts,
    _probed,
    _small_pages,
    _source_by_day,
)
from tests.support.helpers import (
    Stack,
    assert_same_workbook_but_its_mark,
    create,
    download,
    read_csv,
    wait_state,
)
from tests.unit.writer_helpers import frozen_package_time

T, S, OB = ExportTask.__table__, ExportShard.__table__, ExportOutbox.__table__
A = ExportAudit.__table__

DISTRIBUTED = {"distributed_shards": True, "local_shards": 1, "checkpoint_every_seconds": 0.001}


def _distributed(make_stack: Any, **overrides: Any) -> tuple[Stack, Any]:
    task = {**DISTRIBUTED, **overrides.pop("task", {})}
    consumer = {"concurrency": 4, **overrides.pop("consumer", {})}
    return _probed(make_stack, task=task, consumer=consumer, **overrides)


def _set(stack: Stack, **task: Any) -> None:
    for name, value in task.items():
        setattr(stack.runtime.settings.task, name, value)


class _LeaseSampler:
    """Samples, every 20 ms, how many shards hold a live lease (database clock)."""

    def __init__(self, stack: Stack) -> None:
        self.engine = stack.runtime.engine
        self.most = 0
        self.owners: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _LeaseSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(S.c.lease_owner).where(
                        S.c.status == "PENDING", S.c.lease_until > db_now()
                    )
                ).all()
            self.most = max(self.most, len(rows))
            self.owners.update(r[0] for r in rows)


def _shard_runs(stack: Stack, task_id: str) -> int:
    return (
        sum(
            1
            for no, branch in stack.runtime.consumer.handled
            if no == task_id and branch == "executed"
        )
        - 1
    )  # the task's own command


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_distributed_shards_give_the_bytes_of_a_threaded_run(make_stack, sample_dir, fmt):
    stack, probe = _distributed(make_stack)
    _small_pages(stack, 200)
    probe.delay_seconds = 0.01  # pages take long enough for the wake-ups to be taken
    client = stack.client()
    files, tasks = [], []
    with frozen_package_time():
        for distributed in (True, False):
            _set(stack, distributed_shards=distributed)
            with _LeaseSampler(stack) as sampler:
                task_id = create(client, fmt, parameters=ALL_DATES).json()["taskId"]
                detail = wait_state(client, task_id)
            assert detail["state"] == "succeeded", detail
            assert detail["processed"] == ORDERS
            assert detail["shardsDone"] == detail["shardsTotal"] == 16
            assert probe.served(task_id) == ORDERS  # nothing fetched twice
            if distributed:
                # The type's parallel (4) bounds the shards held across every runner.
                assert 2 <= sampler.most <= 4, sampler.most
                assert len(sampler.owners) >= 2, sampler.owners
                assert _shard_runs(stack, task_id) >= 1  # another consumer ran shards
            files.append(download(client, detail))
            tasks.append(task_id)
    if fmt == "csv":
        assert files[0] == files[1]
        keys = [int(r[0]) for r in read_csv(files[0])[1:]]
        assert keys == _source_by_day(sample_dir, stack)
    else:
        assert_same_workbook_but_its_mark(files[0], files[1], *tasks)
    assert _parts(stack) == []
    with stack.runtime.engine.connect() as conn:
        assert conn.execute(select(S.c.task_id)).first() is None
        wakes = conn.execute(
            select(OB.c.tag, func.count()).where(OB.c.unit != "task").group_by(OB.c.tag)
        ).all()
    assert wakes == [("EXPORT_SHARD", 4 - 1)]  # parallel - local_shards, distributed run


def test_a_parallel_of_two_holds_across_runners(make_stack):
    stack, probe = _distributed(make_stack, consumer={"concurrency": 5})
    _small_pages(stack, 100)
    probe.delay_seconds = 0.01
    registry = stack.runtime.registry
    orders = registry.types["ORDERS"]
    registry.types["ORDERS"] = dataclasses.replace(
        orders, shards=dataclasses.replace(orders.shards, parallel=2)
    )
    client = stack.client()
    with _LeaseSampler(stack) as sampler:
        task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
        detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded", detail
    assert sampler.most == 2, sampler.most
    assert probe.served(task_id) == ORDERS


def test_a_dead_runners_shard_is_taken_over_after_its_lease(make_stack, sample_dir):
    # A runner that claimed a shard and died (its lease never renewed): after the lease
    # runs out (4 s) the reconciler frees it and wakes a worker, or the coordinator
    # takes it over; the file is exact and only that shard's rows were fetched twice.
    # Two consumer threads (the coordinator and one helper) hold at most 2 of the 4
    # shards the type allows, so the "worker" below finds room at once, however slowly
    # the host runs.
    stack, probe = _distributed(
        make_stack,
        task={"lease_seconds": 4, "heartbeat_seconds": 0.5},
        reconciler={"enabled": False},
        consumer={"concurrency": 2},
    )
    _small_pages(stack, 100)
    probe.delay_seconds = 0.01
    engine = stack.runtime.engine
    client = stack.client()
    stolen: dict[str, Any] = {}

    def steal() -> None:  # a "worker" claims the first free shard, then is killed
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stolen:
            with engine.begin() as conn:
                task = conn.execute(select(T.c.id, T.c.dispatch_version)).first()
                if task is not None:
                    cp = shard_units.claim_shard(
                        conn,
                        task.id,
                        task.dispatch_version,
                        "dead-worker/1",
                        lease_seconds=4,
                        parallel=4,
                        prefer=15,
                    )
                    if cp is not None:
                        stolen["shard"] = cp.shard_no
                        stolen["at"] = time.monotonic()
            time.sleep(0.01)

    thief = threading.Thread(target=steal)
    thief.start()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    thief.join()
    assert stolen, "the dead worker got a shard"
    reconciler = Reconciler(
        engine, stack.runtime.storage, ReconcilerSettings(), topic=stack.settings.command_topic
    )
    recovered = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        recovered += reconciler.run_once() and reconciler.last["shard_lease_recover"]
        if client.get(f"/api/v1/exports/{task_id}").json()["state"] != "running":
            break
        time.sleep(0.2)
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded", detail
    assert time.monotonic() - stolen["at"] >= 3.5  # it waited for the lease to run out
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert keys == _source_by_day(sample_dir, stack)
    assert probe.served(task_id) == ORDERS  # the dead worker fetched nothing
    assert detail["attempts"] == 1
    with engine.connect() as conn:
        audit = conn.execute(
            select(A.c.action, A.c.outcome, A.c.reason).where(A.c.action == "lease_recovery")
        ).all()
    assert [a.outcome for a in audit] in (["shard_taken_over"], ["shard_freed"]), audit
    assert "dead-worker/1" in audit[0].reason


def test_a_dead_runners_shard_is_freed_and_woken_by_the_reconciler(make_stack):
    stack = make_stack(publisher={"enabled": False}, consumer={"enabled": False})
    engine = stack.runtime.engine
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    with engine.begin() as conn:
        task = conn.execute(select(T).where(T.c.task_no == task_id)).one()
        conn.execute(update(T).where(T.c.id == task.id).values(status="RUNNING"))
        conn.execute(
            S.insert(),
            [
                {
                    "task_id": task.id,
                    "shard_no": no,
                    "shard_key": f"k{no}",
                    "window_from": "a",
                    "window_to": "b",
                    "status": "PENDING",
                    "rows_written": 0,
                    "pages": 0,
                    "bytes": 0,
                    "checksum": "00000000",
                    "segments_json": '{"runs": []}',
                    "dispatch_version": task.dispatch_version,
                    "updated_at": dt.datetime(2026, 1, 1),
                }
                for no in range(3)
            ],
        )
        first = shard_units.claim_shard(
            conn, task.id, task.dispatch_version, "w1", lease_seconds=0.2, parallel=2
        )
        second = shard_units.claim_shard(
            conn, task.id, task.dispatch_version, "w2", lease_seconds=60, parallel=2
        )
        third = shard_units.claim_shard(
            conn, task.id, task.dispatch_version, "w3", lease_seconds=60, parallel=2
        )
    assert (first.shard_no, second.shard_no, third) == (0, 1, None)  # parallel 2 holds
    time.sleep(0.5)
    reconciler = Reconciler(
        engine, stack.runtime.storage, ReconcilerSettings(), topic=stack.settings.command_topic
    )
    reconciler.run_once()
    assert reconciler.last["shard_lease_recover"] == 1
    with engine.connect() as conn:
        (freed,) = conn.execute(select(A.c.outcome, A.c.reason, A.c.details_json)).all()
    assert freed.outcome == "shard_freed" and "w1" in freed.reason, freed
    with engine.begin() as conn:
        wake = conn.execute(select(OB.c.unit, OB.c.tag).where(OB.c.unit != "task")).all()
        assert wake == [("shard-0.1", "EXPORT_SHARD")]
        again = shard_units.claim_shard(
            conn, task.id, task.dispatch_version, "w3", lease_seconds=60, parallel=2
        )
        assert again is not None and again.shard_no == 0
        # An older version's runner is fenced out of every write.
        assert not shard_units.save_unit_checkpoint(
            conn, task.id, task.dispatch_version - 1, "w3", again
        )
        assert shard_units.save_unit_checkpoint(conn, task.id, task.dispatch_version, "w3", again)
        assert not shard_units.save_unit_checkpoint(
            conn, task.id, task.dispatch_version, "w1", again
        )
    reconciler.run_once()
    assert reconciler.last["shard_lease_recover"] == 0


def test_cancel_reaches_every_runner_within_10_s(make_stack):
    stack, probe = _distributed(make_stack)
    _small_pages(stack, 50)
    probe.delay_seconds = 0.05
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    engine = stack.runtime.engine
    deadline = time.monotonic() + 60
    owners: set[str] = set()
    while time.monotonic() < deadline and len(owners) < 3:
        with engine.connect() as conn:
            owners = {
                r[0]
                for r in conn.execute(select(S.c.lease_owner).where(S.c.lease_owner.is_not(None)))
            }
        time.sleep(0.05)
    assert len(owners) >= 3, owners
    started = time.monotonic()
    assert client.post(f"/api/v1/exports/{task_id}/cancel").status_code in (200, 202)
    detail = wait_state(client, task_id, timeout=30)
    assert detail["state"] == "cancelled", detail
    # Every runner stopped asking the provider within 10 s of the cancel.
    time.sleep(2.5)
    asked = len(probe.requests)
    time.sleep(1.0)
    assert len(probe.requests) == asked
    assert time.monotonic() - started <= 10 + 3.5
    Reconciler(
        engine, stack.runtime.storage, ReconcilerSettings(), topic=stack.settings.command_topic
    ).run_once()
    assert _parts(stack) == []
    with engine.connect() as conn:
        assert conn.execute(select(S.c.task_id)).first() is None


def _shard_ids(stack: Stack) -> list[str]:
    """The 16 shard ids of ALL_DATES, in file order."""
    etype = stack.runtime.registry.types["ORDERS"]
    return [s.key for s in plan_shards(etype, ALL_DATES, "UTC")]


def test_a_shard_that_fails_for_good_fails_the_task_naming_it(make_stack):
    stack, probe = _distributed(make_stack)
    _small_pages(stack, 100)
    probe.delay_seconds = 0.01
    bad = _shard_ids(stack)[9]
    probe.fail[bad] = [400]
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    detail = wait_state(client, task_id)
    assert detail["state"] == "failed", detail
    assert f"shard {bad}" in detail["error"]["message"], detail["error"]
    assert detail["error"]["code"] == "PROVIDER_REJECTED", detail["error"]


def test_a_transient_shard_failure_retries_the_attempt_which_resumes(make_stack, sample_dir):
    stack, probe = _distributed(
        make_stack, task={"retry_backoff_seconds": [0.2]}, provider={"request_attempts": 2}
    )
    _small_pages(stack, 100)
    probe.delay_seconds = 0.01
    bad = _shard_ids(stack)[12]
    probe.fail[bad] = [503, 503]  # both tries of one page: the shard fails transiently
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded", detail
    assert detail["attempts"] == 2
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert keys == _source_by_day(sample_dir, stack)
    # The retry resumed: the shards done before were not fetched again.
    assert probe.served(task_id) < ORDERS * 1.5, probe.served(task_id)


class _FailAtStore:
    """The first attempt fails at the finalize's store, after every shard is done."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, point: str) -> None:
        if point == "store" and not self.failed:
            self.failed = True
            raise StorageError("the storage went away (injected)")


def test_the_finalize_is_claimed_once_and_a_new_attempt_only_assembles(make_stack, sample_dir):
    stack, probe = _distributed(make_stack, task={"retry_backoff_seconds": [0.2]})
    _small_pages(stack, 100)
    fault = _FailAtStore()
    stack.runtime.consumer.run_factory = FaultInjectingRun.with_fault(fault)
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    detail = wait_state(client, task_id)
    assert fault.failed
    assert detail["state"] == "succeeded", detail
    assert detail["attempts"] == 2
    assert probe.served(task_id) == ORDERS  # the second attempt fetched nothing
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert keys == _source_by_day(sample_dir, stack)
    with stack.runtime.engine.connect() as conn:
        commits = conn.execute(
            select(func.count()).select_from(T).where(T.c.status == "SUCCEEDED")
        ).scalar_one()
    assert commits == 1


def test_a_runner_of_another_workers_shard_keeps_the_short_shard_lease(make_stack):
    stack = make_stack(
        publisher={"enabled": False},
        consumer={"enabled": False},
        task={"shard_lease_seconds": 9, "heartbeat_seconds": 60},
    )
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    with stack.runtime.engine.connect() as conn:
        task = conn.execute(select(T).where(T.c.task_no == task_id)).one()
    from export_center.attempt.steps import Attempt
    from export_center.attempt.watchdog import ShardWatchdog, Watchdog
    from export_center.repository import read_task

    with stack.runtime.engine.connect() as conn:
        row = read_task(conn, task.id)
    context = stack.runtime.context
    runner = Attempt(stack.runtime.engine, context, row, 1, "w/1", shard_lease_seconds=9)
    assert isinstance(runner.watchdog, ShardWatchdog)
    assert runner.watchdog.lease_seconds == 9 and runner.watchdog.heartbeat_seconds == 3
    coordinator = Attempt(stack.runtime.engine, context, row, 1, "w/2")
    assert type(coordinator.watchdog) is Watchdog
    assert coordinator.watchdog.lease_seconds == 30


def test_every_runner_reads_its_shards_through_blips(make_stack, sample_dir, caplog):
    # The reads of the shard rows (all their columns) fail 8 times as lock wait
    # timeouts: coordinator and helpers ride them out like any other statement, so no
    # shard is left leased to a runner that gave up, none is taken over, and the file
    # is exact with nothing fetched twice.
    stack, probe = _distributed(make_stack)
    _small_pages(stack, 200)
    probe.delay_seconds = 0.01
    victim = DeadlockVictim(stack.runtime.engine, "export_shard.segments_json", times=8, code=1205)
    try:
        client = stack.client()
        task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
        detail = wait_state(client, task_id)
    finally:
        victim.close()
    assert victim.failed == 8
    assert detail["state"] == "succeeded", detail
    assert detail["attempts"] == 1
    assert _shard_runs(stack, task_id) >= 1  # helpers ran shards
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert keys == _source_by_day(sample_dir, stack)
    assert probe.served(task_id) == ORDERS
    with stack.runtime.engine.connect() as conn:
        recoveries = conn.execute(select(A.c.outcome).where(A.c.action == "lease_recovery")).all()
    assert recoveries == []
    failed = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert failed == []  # no "command handling failed": no wake-up was lost to a blip
