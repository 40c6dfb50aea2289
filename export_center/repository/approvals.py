"""Approval requests: the row a waiting task gets, the queue, the fenced decisions.

A task that needs approval is created ``AWAITING_APPROVAL`` with no outbox row and one
``export_approval`` row (:func:`insert_approval`, in the create's transaction). Every
decision is a conditional UPDATE on the task's status (``... WHERE status =
'AWAITING_APPROVAL'``): of two approvers, or an approver and the expiry pass, exactly
one wins and the others see zero rows. An approval writes the task's first outbox row
in the approving transaction, so nothing is dispatched before it. Times use the
database clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select, update

from export_center.db import db_now, db_now_plus
from export_center.repository._common import all_tasks, ended, first_task
from export_center.repository.audit import AuditAction, record_audit
from export_center.repository.rows import ApprovalNeed, Task
from export_center.repository.tables import APPROVALS as P
from export_center.repository.tables import TASKS as T
from export_center.states import Phase, TaskStatus

__all__ = [
    "APPROVAL_EXPIRED",
    "APPROVAL_REJECTED",
    "Approval",
    "awaiting_by_type",
    "decide_approve",
    "decide_reject",
    "due_approvals",
    "insert_approval",
    "queue",
    "read_approval",
    "withdraw",
]

#: ``failure_code`` of a task rejected by an approver.
APPROVAL_REJECTED = "APPROVAL_REJECTED"
#: ``failure_code`` of a task whose approval request expired unanswered.
APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
_AWAITING = TaskStatus.AWAITING_APPROVAL.value


@dataclass(frozen=True, slots=True)
class Approval:
    """One ``export_approval`` row (times naive UTC, database clock)."""

    task_id: int
    tenant_id: str
    app_code: str
    requested_by: str
    approver_permission: str
    reasons: str
    rules_json: str | None
    estimated_rows: int | None
    outcome: str
    requested_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    decision_reason: str | None

    @classmethod
    def from_row(cls, row: Any) -> Approval:
        """The typed row of a ``SELECT`` of every column."""
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


def insert_approval(conn: Connection, task: Task, need: ApprovalNeed) -> None:
    """Write the approval request of the new ``task`` (status AWAITING_APPROVAL),
    expiring ``need.expire_seconds`` after now on the database clock."""
    conn.execute(
        P.insert().values(
            task_id=task.id,
            tenant_id=task.tenant_id,
            app_code=task.app_code,
            requested_by=task.requested_by,
            approver_permission=need.approver_permission[:128],
            reasons=need.reasons[:1000],
            rules_json=need.rules_json,
            estimated_rows=task.total_rows,
            outcome="awaiting",
            requested_at=db_now(),
            expires_at=db_now_plus(need.expire_seconds),
        )
    )
    record_audit(
        conn,
        actor=f"user:{task.tenant_id}/{task.requested_by}",
        action=AuditAction.APPROVAL_REQUESTED,
        outcome="awaiting",
        task=task,
        reason=need.reasons,
        details={"approverPermission": need.approver_permission},
    )


def read_approval(conn: Connection, task_id: int) -> Approval | None:
    """The approval row of task ``task_id``, or None (it never needed approval)."""
    row = conn.execute(select(P).where(P.c.task_id == task_id)).mappings().first()
    return None if row is None else Approval.from_row(row)


def queue(
    conn: Connection,
    *,
    tenant_id: str | None,
    app_code: str | None,
    permissions: list[str] | None,
    limit: int = 200,
) -> list[tuple[Task, Approval]]:
    """The tasks awaiting approval of ``tenant_id``/``app_code`` (None: every tenant /
    app) whose approver permission is among ``permissions`` (None: any), oldest first
    (at most ``limit``)."""
    stmt = (
        select(T, *[c.label(f"a_{c.name}") for c in P.c])
        .join(P, P.c.task_id == T.c.id)
        .where(T.c.status == _AWAITING)
    )
    if tenant_id is not None:
        stmt = stmt.where(T.c.tenant_id == tenant_id)
    if app_code is not None:
        stmt = stmt.where(T.c.app_code == app_code)
    if permissions is not None:
        stmt = stmt.where(P.c.approver_permission.in_(permissions or [""]))
    rows = conn.execute(stmt.order_by(T.c.id).limit(limit)).mappings()
    out = []
    for row in rows:
        task = Task.from_row(row)
        approval = Approval.from_row({c.name: row[f"a_{c.name}"] for c in P.c})
        out.append((task, approval))
    return out


def awaiting_by_type(conn: Connection) -> dict[str, int]:
    """How many tasks await approval now (all tenants), by export type."""
    rows = conn.execute(
        select(T.c.export_type, func.count())
        .where(T.c.status == _AWAITING)
        .group_by(T.c.export_type)
    )
    return {str(export_type): int(count) for export_type, count in rows}


def _decide(
    conn: Connection, task_id: int, outcome: str, by: str | None, reason: str | None
) -> None:
    conn.execute(
        update(P)
        .where(P.c.task_id == task_id, P.c.outcome == "awaiting")
        .values(
            outcome=outcome,
            decided_by=None if by is None else by[:128],
            decided_at=db_now(),
            decision_reason=None if reason is None else reason[:1000],
        )
    )


def decide_approve(conn: Connection, task_id: int, *, by: str, reason: str | None) -> Task | None:
    """AWAITING_APPROVAL -> PENDING (queued now), fenced on the status; the caller
    writes the outbox row in the same transaction.

    Returns:
        The queued task, or None when it was not awaiting approval (any more).
    """
    won = conn.execute(
        update(T)
        .where(T.c.id == task_id, T.c.status == _AWAITING)
        .values(
            status=TaskStatus.PENDING.value,
            phase=Phase.QUEUED.value,
            next_retry_at=db_now(),
            updated_at=db_now(),
        )
    ).rowcount
    if not won:
        return None
    _decide(conn, task_id, "approved", by, reason)
    return first_task(conn.execute(select(T).where(T.c.id == task_id)))


def decide_reject(
    conn: Connection,
    task_id: int,
    *,
    by: str | None,
    reason: str,
    code: str = APPROVAL_REJECTED,
) -> Task | None:
    """AWAITING_APPROVAL -> REJECTED (terminal), fenced on the status; the task's
    ``failure_code`` is ``code`` and its ``failure_message`` ``reason``.

    Args:
        by: the approver's user id; None for the expiry pass (outcome ``expired``).

    Returns:
        The rejected task, or None when it was not awaiting approval (any more).
    """
    won = conn.execute(
        update(T)
        .where(T.c.id == task_id, T.c.status == _AWAITING)
        .values(**ended(TaskStatus.REJECTED, code, reason))
    ).rowcount
    if not won:
        return None
    _decide(conn, task_id, "expired" if by is None else "rejected", by, reason)
    return first_task(conn.execute(select(T).where(T.c.id == task_id)))


def withdraw(conn: Connection, task_id: int) -> None:
    """Mark the request of a task cancelled while it waited (outcome ``cancelled``);
    nothing when it had none or it was decided."""
    _decide(conn, task_id, "cancelled", None, None)


def due_approvals(conn: Connection, limit: int) -> list[Task]:
    """Tasks still awaiting approval whose request expired (database clock), oldest
    first, at most ``limit``."""
    return all_tasks(
        conn.execute(
            select(T)
            .join(P, P.c.task_id == T.c.id)
            .where(T.c.status == _AWAITING, P.c.expires_at <= db_now())
            .order_by(P.c.expires_at)
            .limit(limit)
        )
    )
