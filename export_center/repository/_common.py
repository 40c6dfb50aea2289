"""Helpers every repository module shares: typed results and the values that end an
attempt. Private to the package."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, func, select

from export_center.db import db_now
from export_center.repository.audit import AuditAction, actor_role
from export_center.repository.rows import Task
from export_center.repository.tables import AUDIT as A
from export_center.repository.tables import TASKS as T
from export_center.states import TaskStatus

#: The failure code of a cancelled task, and its sentence when the audit trail does not
#: say who asked (the cancel is audited in the transaction that asks for it, so only a
#: trail purged while the task ran leaves it unsaid).
CANCELLED_CODE = "CANCELLED"
CANCELLED_MESSAGE = "cancelled on request"


def first_task(result: Any) -> Task | None:
    """The first row of a ``SELECT`` of every task column, typed; None when empty."""
    row = result.mappings().first()
    return None if row is None else Task.from_row(row)


def all_tasks(result: Any) -> list[Task]:
    """Every row of a ``SELECT`` of every task column, typed."""
    return [Task.from_row(row) for row in result.mappings()]


def held_attempt(task_id: int, version: int, owner: str) -> ColumnElement[bool]:
    """The running attempt ``version`` of the task, still held by ``owner``: the condition
    of every write an attempt makes (zero rows touched = the lease is lost)."""
    return and_(
        T.c.id == task_id,
        T.c.status == TaskStatus.RUNNING.value,
        T.c.dispatch_version == version,
        T.c.lease_owner == owner,
    )


def lease_released() -> dict[str, Any]:
    """Column values that drop the attempt's lease."""
    return {"lease_owner": None, "lease_until": None, "updated_at": db_now()}


def ended(status: TaskStatus, code: str | None, message: str | None) -> dict[str, Any]:
    """Column values of a task ending in ``status`` (CANCELLED or FAILED) without a file:
    completed now, lease dropped, no object key, the failure code and sentence kept."""
    return {
        **lease_released(),
        "status": status.value,
        "completed_at": db_now(),
        "object_key": None,
        "failure_code": None if code is None else code[:64],
        "failure_message": None if message is None else message[:1000],
    }


def cancel_message(actor: str | None, *, tenant_id: str, owner: str) -> str:
    """The stored sentence of a task cancelled by ``actor`` (an audit actor name).

    Returns:
        ``"cancelled by its owner (alice)"``, ``"cancelled by an administrator
        (admin-1)"``, ``"cancelled by an operator"``, or :data:`CANCELLED_MESSAGE`.
    """
    if actor is None:
        return CANCELLED_MESSAGE
    role, user = actor_role(actor, tenant_id=tenant_id, owner=owner)
    if role == "owner":
        return f"cancelled by its owner ({user})"
    if role == "administrator":
        return f"cancelled by an administrator ({user})"
    if role == "operator":
        return "cancelled by an operator"
    return CANCELLED_MESSAGE


def cancelled(message: str = CANCELLED_MESSAGE) -> dict[str, Any]:
    """Column values of a cancelled task, with the sentence that says who cancelled it."""
    return ended(TaskStatus.CANCELLED, CANCELLED_CODE, message)


def cancelled_as_audited(conn: Connection, task_id: int) -> dict[str, Any]:
    """Column values of a running task that stops on a cancel request: the sentence
    names the actor of the task's newest ``manual_cancel`` audit row (written with the
    request, so it is there before any worker sees the flag)."""
    newest = (
        select(func.max(A.c.id))
        .where(A.c.task_id == task_id, A.c.action == AuditAction.MANUAL_CANCEL.value)
        .scalar_subquery()
    )
    row = conn.execute(
        select(
            T.c.tenant_id,
            T.c.requested_by,
            select(A.c.actor).where(A.c.id == newest).scalar_subquery(),
        ).where(T.c.id == task_id)
    ).first()
    if row is None:
        return cancelled()
    tenant_id, owner, actor = row
    return cancelled(cancel_message(actor, tenant_id=tenant_id, owner=owner))


def failed(code: str, message: str) -> dict[str, Any]:
    """Column values of a failed task with its code and sentence."""
    return ended(TaskStatus.FAILED, code, message)
