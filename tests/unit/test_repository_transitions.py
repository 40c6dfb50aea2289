"""The repository moves tasks only along the state machine's edges (ALLOWED_TRANSITIONS),
and every attempt-fenced write refuses another owner or version. SQLite, no server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from export_center import repository
from export_center.db import db_now_plus, make_engine
from export_center.repository import Recovery, StoredFile
from export_center.repository.rows import ApprovalNeed
from export_center.repository.tables import TASKS
from export_center.runtime import upgrade_database
from export_center.states import ALLOWED_TRANSITIONS, Phase, TaskStatus

TOPIC, TAG = "t", "EXPORT_TASK"
SEEN: set[tuple[TaskStatus, TaskStatus]] = set()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'ec.db'}")
    upgrade_database(engine)
    yield engine
    engine.dispose()


def new_task(engine: Engine, max_attempts: int = 3) -> int:
    with engine.begin() as conn:
        result = repository.create_task(
            conn,
            repository.NewTask(
                export_type="ORDERS",
                format="CSV",
                task_name="x",
                parameters={"n": id(conn)},
                tenant_id="t",
                app_code="PLATFORM",
                requested_by="u",
                max_attempts=max_attempts,
            ),
            topic=TOPIC,
            tag=TAG,
            limits=repository.CreateLimits(max_active_per_user=99, max_active_per_type=99),
        )
    return result.task.id


def status(engine: Engine, task_id: int) -> TaskStatus:
    with engine.connect() as conn:
        task = repository.read_task(conn, task_id)
    assert task is not None
    return TaskStatus(task.status)


def step(engine: Engine, task_id: int, action: Callable[..., object]) -> object:
    """Run ``action(conn)`` and check the status change is an allowed edge."""
    before = status(engine, task_id)
    with engine.begin() as conn:
        result = action(conn)
    after = status(engine, task_id)
    if after != before:
        assert after in ALLOWED_TRANSITIONS[before], f"{before} -> {after} is not allowed"
        SEEN.add((before, after))
    return result


def claim(engine: Engine, task_id: int, version: int = 1, owner: str = "w/1") -> bool:
    return bool(
        step(
            engine,
            task_id,
            lambda c: repository.claim_task(
                c, task_id, version, owner, lease_seconds=60, max_duration_seconds=600
            ),
        )
    )


def transient_failure(conn, task, version: int, owner: str):
    """A failure that asks for a retry (which the task gets while it has attempts left)."""
    return repository.record_failure(
        conn,
        task,
        version,
        owner,
        code="X",
        message="m",
        retry=True,
        backoff_seconds=[0],
        jitter=0,
        topic=TOPIC,
        tag=TAG,
    )


def test_a_full_life_moves_along_allowed_edges_only(engine):
    ok = new_task(engine)
    assert claim(engine, ok)
    assert (
        step(
            engine,
            ok,
            lambda c: repository.update_progress(
                c, ok, 1, "w/1", processed=5, total=10, phase=Phase.RENDER
            ),
        )
        is True
    )
    assert (
        step(
            engine,
            ok,
            lambda c: repository.commit_success(
                c, ok, 1, "w/1", StoredFile("k", "f.csv", "text/csv", 1, 5), retention_seconds=-1
            ),
        )
        is True
    )
    assert step(engine, ok, lambda c: repository.mark_expired(c, ok, "k")) is True
    assert status(engine, ok) == TaskStatus.EXPIRED

    flaky = new_task(engine, max_attempts=2)
    assert claim(engine, flaky)
    outcome = step(engine, flaky, lambda c: transient_failure(c, flaky, 1, "w/1"))
    assert outcome == repository.AttemptEnd.RETRY and status(engine, flaky) == TaskStatus.PENDING
    assert claim(engine, flaky, version=2, owner="w/2")
    outcome = step(engine, flaky, lambda c: transient_failure(c, flaky, 2, "w/2"))
    assert outcome == repository.AttemptEnd.FAILED and status(engine, flaky) == TaskStatus.FAILED
    assert step(engine, flaky, lambda c: repository.manual_retry(c, flaky, topic=TOPIC, tag=TAG))
    assert status(engine, flaky) == TaskStatus.PENDING
    assert step(engine, flaky, lambda c: repository.request_cancel(c, flaky)) == (
        TaskStatus.CANCELLED
    )

    stopping = new_task(engine)
    assert claim(engine, stopping)
    assert (
        step(
            engine,
            stopping,
            lambda c: repository.release_for_shutdown(c, stopping, 1, "w/1", topic=TOPIC, tag=TAG),
        )
        is True
    )
    assert claim(engine, stopping, version=2)
    assert step(engine, stopping, lambda c: repository.request_cancel(c, stopping)) == (
        TaskStatus.RUNNING
    )
    assert step(engine, stopping, lambda c: repository.finish_cancelled(c, stopping, 2, "w/1"))


@pytest.mark.parametrize(
    ("cancel", "recoveries", "expected"),
    [(True, 3, Recovery.CANCELLED), (False, 3, Recovery.RETRY), (False, 0, Recovery.FAILED)],
)
def test_lease_recovery_moves_along_allowed_edges(engine, cancel, recoveries, expected):
    # One attempt only: a lost worker does not spend it (recoveries count apart).
    task_id = new_task(engine, max_attempts=1)
    assert claim(engine, task_id)
    with engine.begin() as conn:
        conn.execute(
            update(TASKS)
            .where(TASKS.c.id == task_id)
            .values(lease_until=db_now_plus(-1), cancel_requested=cancel)
        )
    with engine.connect() as conn:
        (task,) = repository.expired_running_tasks(conn, 10)
    assert (
        step(
            engine,
            task_id,
            lambda c: repository.recover_expired_lease(
                c, task, topic=TOPIC, tag=TAG, max_recoveries=recoveries
            ),
        )
        == expected
    )
    with engine.connect() as conn:
        after = repository.read_task(conn, task_id)
    assert after is not None
    if expected is Recovery.RETRY:
        assert (after.attempt_count, after.lease_recoveries) == (0, 1)
        assert after.dispatch_version == 2
    elif expected is Recovery.FAILED:
        assert after.failure_code == "WORKER_LOST"
        assert "lease recoveries (0) are used" in (after.failure_message or "")


def test_a_quarantined_command_fails_its_queued_task(engine):
    task_id = new_task(engine)
    with engine.connect() as conn:
        (row,) = repository.outbox_rows(conn, task_id)
        task = repository.read_task(conn, task_id)
    assert task is not None
    outcome = step(
        engine,
        task_id,
        lambda c: repository.quarantine(
            c, event_id=row.event_id, task_no=task.task_no, version=1, reason="poison"
        ),
    )
    assert outcome == repository.QuarantineOutcome.QUARANTINED
    assert status(engine, task_id) == TaskStatus.FAILED


def test_attempt_writes_refuse_another_owner_or_version(engine):
    task_id = new_task(engine)
    assert claim(engine, task_id)
    for version, owner in ((1, "w/2"), (2, "w/1"), (1, "W/1"), (1, "w/1 ")):
        with engine.begin() as conn:
            assert (
                repository.update_progress(
                    conn, task_id, version, owner, processed=1, total=None, phase=Phase.FETCH
                )
                is False
            )
            assert repository.renew_lease(conn, task_id, version, owner, 60)[0] is False
            assert (
                repository.commit_success(
                    conn,
                    task_id,
                    version,
                    owner,
                    StoredFile("k", "f", "t", 1, 1),
                    retention_seconds=60,
                )
                is False
            )
            assert repository.finish_cancelled(conn, task_id, version, owner) is False
            assert (
                repository.record_failure(
                    conn,
                    task_id,
                    version,
                    owner,
                    code="X",
                    message="m",
                    retry=False,
                    backoff_seconds=[0],
                    jitter=0,
                    topic=TOPIC,
                    tag=TAG,
                )
                is None
            )
    assert status(engine, task_id) == TaskStatus.RUNNING


def waiting_task(engine: Engine) -> int:
    """A task created AWAITING_APPROVAL (no outbox row)."""
    need = ApprovalNeed(approver_permission="a:b:c", reasons="x", expire_seconds=60)
    with engine.begin() as conn:
        result = repository.create_task(
            conn,
            repository.NewTask(
                export_type="ORDERS",
                format="CSV",
                task_name="x",
                parameters={"n": id(conn)},
                tenant_id="t",
                app_code="PLATFORM",
                requested_by="u",
                max_attempts=3,
                approval=need,
            ),
            topic=TOPIC,
            tag=TAG,
            limits=repository.CreateLimits(max_active_per_user=99, max_active_per_type=99),
        )
    assert result.task.status == TaskStatus.AWAITING_APPROVAL
    return result.task.id


def test_approval_decisions_and_cancel_move_along_allowed_edges(engine):
    from export_center.repository import approvals

    approved = waiting_task(engine)
    step(engine, approved, lambda c: approvals.decide_approve(c, approved, by="v", reason=None))
    assert status(engine, approved) == TaskStatus.PENDING
    # A second decision finds nothing awaiting: the status fences it.
    assert (
        step(engine, approved, lambda c: approvals.decide_reject(c, approved, by="v", reason="r"))
        is None
    )
    rejected = waiting_task(engine)
    step(engine, rejected, lambda c: approvals.decide_reject(c, rejected, by="v", reason="no"))
    assert status(engine, rejected) == TaskStatus.REJECTED
    assert (
        step(engine, rejected, lambda c: approvals.decide_approve(c, rejected, by="v", reason=None))
        is None
    )
    cancelled = waiting_task(engine)
    step(engine, cancelled, lambda c: repository.request_cancel(c, cancelled))
    assert status(engine, cancelled) == TaskStatus.CANCELLED


def test_the_transition_table_has_no_edge_the_repository_never_takes():
    # Run last in this module: every edge of the table was taken by the tests above.
    edges = {(a, b) for a, targets in ALLOWED_TRANSITIONS.items() for b in targets}
    assert edges == SEEN, sorted(edges - SEEN)


def test_progress_sets_updated_at(engine):
    """A progress write moves ``updated_at`` (the list's "last change" and the watchdog's
    view of a live attempt), like every other write of the task."""
    task_id = new_task(engine)
    assert claim(engine, task_id)
    with engine.begin() as conn:
        conn.execute(update(TASKS).values(updated_at=db_now_plus(-3600)))
        before = repository.read_task(conn, task_id)
        assert repository.update_progress(
            conn, task_id, 1, "w/1", processed=5, total=10, phase=Phase.FETCH
        )
        after = repository.read_task(conn, task_id)
    assert before is not None and after is not None
    assert (after.updated_at - before.updated_at).total_seconds() >= 3590
    assert after.processed_rows == 5
