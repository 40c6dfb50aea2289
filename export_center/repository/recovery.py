"""What the reconciler repairs: lost leases, files past retention.

A RUNNING task whose lease ran out (by the database clock) lost its worker. Its attempt
ends here: CANCELLED if a cancel was asked, PENDING with ``dispatch_version + 1`` while
the task's lease recoveries are below their limit, FAILED otherwise; the UPDATE names the
version and still requires the lease to be expired, so a live attempt is never touched.

A lost worker is an infrastructure fault (kill -9, a lost machine, a process frozen past
its lease), not a failure of the export: it does not spend one of the task's
``max_attempts`` but counts in ``lease_recoveries``, with its own limit, so that a task
whose export kills every worker that runs it still ends (FAILED ``WORKER_LOST``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, select, update

from export_center.db import db_now
from export_center.repository._common import all_tasks, cancelled_as_audited, failed
from export_center.repository.attempts import start_next_attempt
from export_center.repository.notifications import enqueue_task_event
from export_center.repository.rows import Recovery, Task
from export_center.repository.tables import TASKS as T
from export_center.states import Phase, TaskStatus

__all__ = [
    "expired_running_tasks",
    "mark_expired",
    "recover_expired_lease",
    "tasks_past_retention",
]


def _tasks_due(
    conn: Connection, status: TaskStatus, column: ColumnElement[Any], limit: int
) -> list[Task]:
    """Tasks in ``status`` whose time ``column`` has passed by the database clock, oldest first."""
    return all_tasks(
        conn.execute(
            select(T)
            .where(T.c.status == status.value, column <= db_now())
            .order_by(column)
            .limit(limit)
        )
    )


def expired_running_tasks(conn: Connection, limit: int) -> list[Task]:
    """RUNNING tasks whose lease ran out by the database clock, at most ``limit``."""
    return _tasks_due(conn, TaskStatus.RUNNING, T.c.lease_until, limit)


def tasks_past_retention(conn: Connection, limit: int) -> list[Task]:
    """SUCCEEDED tasks whose file is past ``expires_at``, at most ``limit``."""
    return _tasks_due(conn, TaskStatus.SUCCEEDED, T.c.expires_at, limit)


def recover_expired_lease(
    conn: Connection, task: Task, *, topic: str, tag: str, max_recoveries: int
) -> Recovery | None:
    """End an attempt whose worker stopped renewing its lease.

    Cancel requested -> CANCELLED; fewer than ``max_recoveries`` lease recoveries so far
    -> PENDING with ``dispatch_version + 1``, due now, a new outbox row, the attempt not
    counted (``attempt_count - 1``) and ``lease_recoveries + 1`` (``WORKER_LOST`` kept as
    the last error); otherwise FAILED (``WORKER_LOST``).

    On MySQL/MariaDB the row is first locked with ``SKIP LOCKED``: a row that another
    session holds (a worker frozen in the middle of a transaction keeps its locks until
    its connection dies) is left for a later pass instead of stalling the reconciler for
    the whole lock wait timeout.

    Args:
        max_recoveries: lease recoveries a task may have (``task.max_lease_recoveries``).

    Returns:
        The recovery, or None when the task changed meanwhile or its row is locked
        (nothing was written).
    """
    expired = and_(
        T.c.id == task.id,
        T.c.status == TaskStatus.RUNNING.value,
        T.c.dispatch_version == task.dispatch_version,
        T.c.lease_until <= db_now(),
    )
    if conn.dialect.name != "sqlite":
        free = conn.execute(select(T.c.id).where(expired).with_for_update(skip_locked=True))
        if free.first() is None:
            return None
    if task.cancel_requested:
        done = conn.execute(
            update(T).where(expired).values(**cancelled_as_audited(conn, task.id))
        ).rowcount
        if done:
            enqueue_task_event(conn, task.id, "export.cancelled")
        return Recovery.CANCELLED if done else None
    recoveries = task.lease_recoveries + 1
    if recoveries <= max_recoveries:
        requeued = start_next_attempt(
            conn,
            task.id,
            expired,
            topic=topic,
            tag=tag,
            attempt_count=T.c.attempt_count - 1,
            lease_recoveries=T.c.lease_recoveries + 1,
            failure_code="WORKER_LOST",
            failure_message=(
                f"{task.phase}: the worker stopped renewing its lease (lease recovery "
                f"{recoveries} of {max_recoveries}); retrying"
            ),
        )
        return Recovery.RETRY if requeued else None
    message = (
        f"{task.phase}: the worker stopped renewing its lease {recoveries} times; "
        f"the task's lease recoveries ({max_recoveries}) are used"
    )
    done = conn.execute(update(T).where(expired).values(**failed("WORKER_LOST", message))).rowcount
    if done:
        enqueue_task_event(conn, task.id, "export.failed")
    return Recovery.FAILED if done else None


def mark_expired(conn: Connection, task_id: int, object_key: str | None) -> bool:
    """SUCCEEDED -> EXPIRED once its file is deleted (only if the file is still the same)."""
    return (
        conn.execute(
            update(T)
            .where(
                T.c.id == task_id,
                T.c.status == TaskStatus.SUCCEEDED.value,
                T.c.object_key == object_key,
            )
            .values(status=TaskStatus.EXPIRED.value, phase=Phase.STORE.value, updated_at=db_now())
        ).rowcount
        == 1
    )
