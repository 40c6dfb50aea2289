"""The scheduler fires each fire exactly once: two scheduler instances racing on the
same due schedules (SQLite and MariaDB), and a replayed fire."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from export_center.repository import schedules as srepo
from export_center.repository.schedules import database_now
from export_center.repository.tables import SCHEDULE_RUNS, SCHEDULES, TASKS
from export_center.schedules.scheduler import Scheduler, _LostClaim
from tests.support.helpers import Stack

SCHEDULES_MADE = 8


def new_schedule(stack: Stack, cron: str) -> int:
    answer = stack.client("alice").post(
        "/api/v1/schedules",
        json={
            "name": "orders",
            "export": {"exportType": "ORDERS", "format": "csv"},
            "cron": cron,
            "timezone": "UTC",
            "window": "previous_day",
        },
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["scheduleId"])


def counts(stack: Stack) -> tuple[int, int, int]:
    """(runs, distinct fire (schedule, time) pairs, tasks made by schedules)."""
    with stack.runtime.engine.connect() as conn:
        runs = conn.execute(select(func.count()).select_from(SCHEDULE_RUNS)).scalar_one()
        pairs = conn.execute(
            select(func.count()).select_from(
                select(SCHEDULE_RUNS.c.schedule_id, SCHEDULE_RUNS.c.fire_time).distinct().subquery()
            )
        ).scalar_one()
        tasks = conn.execute(
            select(func.count()).select_from(TASKS).where(TASKS.c.schedule_id.is_not(None))
        ).scalar_one()
    return runs, pairs, tasks


def test_two_schedulers_racing_fire_each_schedule_once(make_stack: Any) -> None:
    # No duplicate window: the eight schedules ask for the same export on purpose.
    stack: Stack = make_stack(scheduler={"enabled": False}, limits={"duplicate_window_seconds": 0})
    ids = [new_schedule(stack, "0 * * * *") for _ in range(SCHEDULES_MADE)]
    engine = stack.runtime.engine
    with engine.begin() as conn:
        now = database_now(conn)
        due = now.replace(minute=0, second=0, microsecond=0, tzinfo=None)
        conn.execute(update(SCHEDULES).values(next_fire_at=due))
    racers = [
        Scheduler(engine, stack.runtime.registry, stack.settings, owner=f"instance-{n}")
        for n in "ab"
    ]
    barrier = threading.Barrier(len(racers))
    fired: list[int] = []

    def race(scheduler: Scheduler) -> None:
        barrier.wait()
        fired.append(scheduler.run_once())

    threads = [threading.Thread(target=race, args=(s,)) for s in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(fired) == SCHEDULES_MADE
    assert counts(stack) == (SCHEDULES_MADE, SCHEDULES_MADE, SCHEDULES_MADE)
    with engine.connect() as conn:
        per_schedule = dict(
            conn.execute(
                select(TASKS.c.schedule_id, func.count()).group_by(TASKS.c.schedule_id)
            ).all()
        )
        keys = conn.execute(select(TASKS.c.request_id).where(TASKS.c.schedule_id.is_not(None)))
        key_set = {k for (k,) in keys}
        nxt = {
            r.next_fire_at
            for r in conn.execute(select(SCHEDULES.c.next_fire_at, SCHEDULES.c.lease_owner))
        }
        leases = {r[0] for r in conn.execute(select(SCHEDULES.c.lease_owner))}
    assert per_schedule == {sid: 1 for sid in ids}
    stamp = due.isoformat(timespec="milliseconds") + "Z"
    assert key_set == {f"schedule:{sid}:{stamp}" for sid in ids}
    assert nxt == {due + timedelta(hours=1)} and leases == {None}
    # A second pass of either finds nothing due.
    assert [s.run_once() for s in racers] == [0, 0]


def test_a_replayed_fire_creates_nothing(make_stack: Any) -> None:
    stack: Stack = make_stack(scheduler={"enabled": False}, limits={"duplicate_window_seconds": 0})
    sid = new_schedule(stack, "0 * * * *")
    engine = stack.runtime.engine
    with engine.begin() as conn:
        due = database_now(conn).replace(minute=0, second=0, microsecond=0, tzinfo=None)
        conn.execute(update(SCHEDULES).values(next_fire_at=due))
    scheduler = stack.runtime.scheduler
    assert scheduler.run_once() == 1
    # The same fire time again (as if its advance had been lost): no new run or task.
    with engine.begin() as conn:
        conn.execute(update(SCHEDULES).where(SCHEDULES.c.id == sid).values(next_fire_at=due))
    assert scheduler.run_once() == 0
    assert counts(stack) == (1, 1, 1)
    with engine.connect() as conn:
        nxt = conn.execute(select(SCHEDULES.c.next_fire_at)).scalar_one()
    assert nxt.replace(microsecond=0) == due + timedelta(hours=1)


def test_a_lost_lease_rolls_the_fire_back(make_stack: Any) -> None:
    stack: Stack = make_stack(scheduler={"enabled": False})
    sid = new_schedule(stack, "0 * * * *")
    engine = stack.runtime.engine
    with engine.begin() as conn:
        due = database_now(conn).replace(minute=0, second=0, microsecond=0, tzinfo=None)
        conn.execute(update(SCHEDULES).values(next_fire_at=due))
    slow = Scheduler(engine, stack.runtime.registry, stack.settings, owner="slow")
    with engine.begin() as conn:
        claimed = srepo.claim_schedule(conn, sid, "slow", 60)
    assert claimed is not None
    # Meanwhile its owner pauses it (a change by a person bumps the version).
    assert stack.client("alice").post(f"/api/v1/schedules/{sid}/pause").status_code == 200
    # Its fire created a task and a run, then its fenced advance found the version
    # changed: the whole transaction rolls back.
    with pytest.raises(_LostClaim), engine.begin() as conn:
        slow._fire(conn, claimed)
    assert counts(stack) == (0, 0, 0)
