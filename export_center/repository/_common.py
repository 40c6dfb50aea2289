"""Helpers every repository module shares: typed results and the values that end an
attempt. Private to the package."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_

from export_center.db import db_now
from export_center.repository.rows import Task
from export_center.repository.tables import TASKS as T
from export_center.states import TaskStatus

#: The failure code and sentence of a cancelled task.
CANCELLED_CODE = "CANCELLED"
CANCELLED_MESSAGE = "cancelled by the user"


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


def cancelled() -> dict[str, Any]:
    """Column values of a cancelled task."""
    return ended(TaskStatus.CANCELLED, CANCELLED_CODE, CANCELLED_MESSAGE)


def failed(code: str, message: str) -> dict[str, Any]:
    """Column values of a failed task with its code and sentence."""
    return ended(TaskStatus.FAILED, code, message)
