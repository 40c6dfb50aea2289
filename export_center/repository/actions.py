"""What a person does to a task: cancel it, retry it after it failed.

The API (and the operator tools) call these after the visibility and permission checks.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, select, update

from export_center.db import db_now
from export_center.repository._common import cancel_message, cancelled
from export_center.repository.approvals import withdraw
from export_center.repository.attempts import start_next_attempt
from export_center.repository.notifications import enqueue_task_event
from export_center.repository.rows import Task
from export_center.repository.tables import TASKS as T
from export_center.states import TaskStatus

__all__ = ["manual_retry", "request_cancel"]


#: States a cancel ends at once: queued, or still waiting for approval (no command yet).
_CANCEL_AT_ONCE = (TaskStatus.PENDING.value, TaskStatus.AWAITING_APPROVAL.value)


def request_cancel(
    conn: Connection, task_id: int, *, actor: str | None = None
) -> TaskStatus | None:
    """Cancel a PENDING (or AWAITING_APPROVAL) task at once, or flag a RUNNING one: its
    worker sees the flag within 2 s and stops within 10 s.

    Args:
        actor: who asks (an audit actor name): a PENDING task's stored sentence says so
            (:func:`~export_center.repository._common.cancel_message`); a RUNNING one's
            is written when it stops, from the audit row the caller adds.

    Returns:
        ``CANCELLED``, or ``RUNNING`` with the flag set, or None when the task is in a
        state that cannot be cancelled.
    """
    owner = conn.execute(select(T.c.tenant_id, T.c.requested_by).where(T.c.id == task_id)).first()
    message = (
        cancel_message(actor, tenant_id=owner[0], owner=owner[1])
        if owner is not None
        else cancel_message(None, tenant_id="", owner="")
    )
    pending = conn.execute(
        update(T)
        .where(T.c.id == task_id, T.c.status.in_(_CANCEL_AT_ONCE))
        .values(**cancelled(message), cancel_requested=True)
    ).rowcount
    if pending:
        withdraw(conn, task_id)  # a request waiting for approval, if it was one
        enqueue_task_event(conn, task_id, "export.cancelled")
        return TaskStatus.CANCELLED
    running = conn.execute(
        update(T)
        .where(T.c.id == task_id, T.c.status == TaskStatus.RUNNING.value)
        .values(cancel_requested=True, updated_at=db_now())
    ).rowcount
    return TaskStatus.RUNNING if running else None


def manual_retry(conn: Connection, task_id: int, *, topic: str, tag: str) -> Task | None:
    """FAILED -> PENDING with version + 1, counters and errors reset, and a new outbox row.

    A FAILED task holds no file (every failure path deletes it), so nothing is deleted.

    Returns:
        The requeued task, or None when it was not FAILED.
    """
    return start_next_attempt(
        conn,
        task_id,
        and_(T.c.id == task_id, T.c.status == TaskStatus.FAILED.value),
        topic=topic,
        tag=tag,
        attempt_count=0,
        lease_recoveries=0,
        failure_code=None,
        failure_message=None,
        warning_message=None,
        started_at=None,
        completed_at=None,
        cancel_requested=False,
    )
