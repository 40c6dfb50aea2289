"""Reads: a task by id, the lists the API and the operators see, and the small questions
the consumer, the watchdog and the metrics ask the database.

Every time comparison uses the database clock (``db_now``), never the process clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, case, func, literal_column, select

from export_center.access import Scope
from export_center.db import db_now
from export_center.repository._common import all_tasks, first_task
from export_center.repository.rows import Task
from export_center.repository.tables import OUTBOX as O
from export_center.repository.tables import TASKS as T
from export_center.states import OutboxStatus, TaskStatus

__all__ = [
    "AttemptState",
    "ClaimState",
    "QueueFigures",
    "active_tasks",
    "as_db_time",
    "attempt_state",
    "cancel_or_deadline",
    "claim_state",
    "deadline_passed",
    "list_tasks",
    "outbox_due_since",
    "ping",
    "queue_figures",
    "read_task",
    "read_task_by_no",
    "retention_left_seconds",
    "retention_passed",
    "task_file_states",
    "task_ids_by_no",
]


def ping(conn: Connection) -> None:
    """One round trip to the database (readiness); raises when it does not answer."""
    conn.execute(select(literal_column("1"))).scalar()


def read_task(conn: Connection, task_id: int) -> Task | None:
    """The task with internal id ``task_id``, or None."""
    return first_task(conn.execute(select(T).where(T.c.id == task_id)))


def read_task_by_no(conn: Connection, task_no: str) -> Task | None:
    """The task with public id ``task_no`` (``exp_...``), or None (exact match)."""
    return first_task(conn.execute(select(T).where(T.c.task_no == task_no)))


def list_tasks(
    conn: Connection,
    *,
    scope: Scope,
    statuses: Sequence[str] | None,
    limit: int,
    before_id: int | None,
    export_types: Sequence[str] | None = None,
) -> list[Task]:
    """Tasks visible in ``scope`` (tenant and app always; the owner unless the scope is
    the whole tenant), newest first, keyset paged by ``id < before_id``. The identity
    columns compare byte for byte (binary collation), as :func:`access.in_scope` does."""
    conds: list[Any] = [T.c.tenant_id == scope.tenant_id, T.c.app_code == scope.app_code]
    if scope.owner is not None:
        conds.append(T.c.requested_by == scope.owner)
    if statuses:
        conds.append(T.c.status.in_(list(statuses)))
    if export_types:
        conds.append(T.c.export_type.in_(list(export_types)))
    if before_id is not None:
        conds.append(T.c.id < before_id)
    return all_tasks(conn.execute(select(T).where(*conds).order_by(T.c.id.desc()).limit(limit)))


def active_tasks(
    conn: Connection,
    *,
    tenant_id: str | None = None,
    requested_by: str | None = None,
    export_type: str | None = None,
    limit: int = 100,
) -> list[Task]:
    """Queued and running tasks of one requester (with ``tenant_id``) or of one export
    type, oldest first: what an active-task limit counts."""
    conds: list[Any] = [T.c.status.in_([TaskStatus.PENDING.value, TaskStatus.RUNNING.value])]
    if tenant_id is not None:
        conds.append(T.c.tenant_id == tenant_id)
    if requested_by is not None:
        conds.append(T.c.requested_by == requested_by)
    if export_type is not None:
        conds.append(T.c.export_type == export_type)
    return all_tasks(conn.execute(select(T).where(*conds).order_by(T.c.id).limit(limit)))


def task_file_states(conn: Connection, task_nos: list[str]) -> dict[str, tuple[str, str | None]]:
    """``{task_no: (status, object_key)}`` of the given tasks (the orphan scan)."""
    if not task_nos:
        return {}
    rows = conn.execute(
        select(T.c.task_no, T.c.status, T.c.object_key).where(T.c.task_no.in_(task_nos))
    )
    return {r[0]: (r[1], r[2]) for r in rows}


def task_ids_by_no(conn: Connection, task_nos: list[str]) -> dict[str, int]:
    """``{task_no: id}`` of the given tasks that exist."""
    if not task_nos:
        return {}
    rows = conn.execute(select(T.c.task_no, T.c.id).where(T.c.task_no.in_(task_nos)))
    return {r[0]: int(r[1]) for r in rows}


def retention_passed(conn: Connection, task_id: int) -> bool:
    """True when the task's file is past ``expires_at`` by the database clock."""
    return bool(conn.execute(select(T.c.expires_at <= db_now()).where(T.c.id == task_id)).scalar())


def retention_left_seconds(conn: Connection, task_id: int) -> float | None:
    """Seconds from the database clock to the task's ``expires_at`` (negative once it
    passed), or None when the task has no retention end."""
    if conn.dialect.name == "sqlite":
        left: ColumnElement[Any] = (
            func.julianday(T.c.expires_at) - func.julianday(db_now())
        ) * 86400.0
    else:
        left = func.timestampdiff(literal_column("MICROSECOND"), db_now(), T.c.expires_at) / 1e6
    value = conn.execute(select(left).where(T.c.id == task_id)).scalar()
    return None if value is None else float(value)


def deadline_passed(conn: Connection, task_id: int) -> bool:
    """True when the task's ``execution_deadline_at`` is at or before the database clock."""
    return bool(
        conn.execute(
            select(T.c.execution_deadline_at <= db_now()).where(T.c.id == task_id)
        ).scalar()
    )


def cancel_or_deadline(conn: Connection, task_id: int) -> tuple[bool, bool]:
    """``(cancel_requested, deadline_passed)`` of a task (the watchdog's poll); both False
    when the task is gone."""
    row = conn.execute(
        select(T.c.cancel_requested, T.c.execution_deadline_at <= db_now()).where(T.c.id == task_id)
    ).first()
    return (bool(row[0]), bool(row[1])) if row is not None else (False, False)


@dataclass(frozen=True, slots=True)
class AttemptState:
    """What the database says of a task when an attempt's renewal touched no row."""

    status: str
    dispatch_version: int
    lease_owner: str | None
    cancel_requested: bool
    past_deadline: bool


def attempt_state(conn: Connection, task_id: int) -> AttemptState | None:
    """The task's status, version, lease owner, cancel flag and whether its deadline
    passed (database clock); None when the task is gone."""
    row = conn.execute(
        select(
            T.c.status,
            T.c.dispatch_version,
            T.c.lease_owner,
            T.c.cancel_requested,
            T.c.execution_deadline_at <= db_now(),
        ).where(T.c.id == task_id)
    ).first()
    if row is None:
        return None
    return AttemptState(row[0], int(row[1]), row[2], bool(row[3]), bool(row[4]))


@dataclass(frozen=True, slots=True)
class ClaimState:
    """Why a claim may have touched no row: the task's status and version, and whether
    its lease is live and its backoff still running (database clock)."""

    status: str
    dispatch_version: int
    lease_live: bool
    in_backoff: bool


def claim_state(conn: Connection, task_no: str) -> ClaimState | None:
    """The claim-relevant state of the task ``task_no``; None when it does not exist."""
    row = conn.execute(
        select(
            T.c.status,
            T.c.dispatch_version,
            T.c.lease_until > db_now(),
            T.c.next_retry_at > db_now(),
        ).where(T.c.task_no == task_no)
    ).first()
    if row is None:
        return None
    return ClaimState(row[0], int(row[1]), bool(row[2]), bool(row[3]))


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """The database gauges.

    ``queue_age_seconds``: how long the oldest due PENDING task has waited.
    ``outbox_pending``: unsent commands that are due (the backlog), and
    ``outbox_oldest_age_seconds`` the seconds since the oldest of them became due.
    ``outbox_max_attempt``: the highest send count of an unsent command.
    ``outbox_scheduled``: unsent commands of automatic retries whose time has not come,
    and ``outbox_next_scheduled_at`` the earliest of those times (naive UTC, None when
    there is none): they wait by design and are no backlog.
    """

    queue_age_seconds: float
    outbox_pending: int
    outbox_oldest_age_seconds: float
    outbox_max_attempt: int
    outbox_scheduled: int = 0
    outbox_next_scheduled_at: datetime | None = None


def _age_seconds(conn: Connection, column: ColumnElement[Any]) -> ColumnElement[Any]:
    """Seconds from the oldest value of ``column`` to the database clock."""
    if conn.dialect.name == "sqlite":
        return (func.julianday(db_now()) - func.julianday(func.min(column))) * 86400.0
    return func.timestampdiff(literal_column("MICROSECOND"), func.min(column), db_now()) / 1e6


def _later(a: ColumnElement[Any], b: ColumnElement[Any]) -> ColumnElement[Any]:
    """The later of two times (``max(a, b)``, portable)."""
    return case((b > a, b), else_=a)


def outbox_due_since() -> ColumnElement[Any]:
    """When the command of an outbox row became due, as a database time; needs the
    outbox joined to its task (``OUTBOX.task_id = TASKS.id``).

    The rule: a command is due once its task may run. A row never handed to the broker
    (``attempt_count = 0``) is due at ``max(created_at, next_retry_at)``: an automatic
    retry is written at the failure with ``next_retry_at`` at the end of its backoff,
    and waits until then by design. Once a send was tried, ``next_retry_at`` is the
    publisher's own send backoff, which must not hide the wait: such a row is due since
    its task's retry time (``max(created_at, task.next_retry_at)`` for the task's current
    dispatch version, else ``created_at``), so a broker that refuses every send keeps
    the row's age growing.
    """
    task_due = case(
        (T.c.dispatch_version == O.c.dispatch_version, _later(O.c.created_at, T.c.next_retry_at)),
        else_=O.c.created_at,
    )
    return case((O.c.attempt_count == 0, _later(O.c.created_at, O.c.next_retry_at)), else_=task_due)


_UNSENT = (OutboxStatus.PENDING.value, OutboxStatus.CLAIMED.value)


def queue_figures(conn: Connection, *, tenant_id: str | None = None) -> QueueFigures:
    """Compute the queue and outbox gauges in three bounded aggregate queries.

    Only due commands are backlog (:func:`outbox_due_since` at or before the database
    clock); unsent commands due later are counted apart as scheduled retries.

    Args:
        tenant_id: only this tenant's tasks and commands (the admin overview); None:
            every tenant (the metrics).
    """
    tenant: list[Any] = [] if tenant_id is None else [T.c.tenant_id == tenant_id]
    age = conn.execute(
        select(_age_seconds(conn, T.c.next_retry_at)).where(
            T.c.status == TaskStatus.PENDING.value, T.c.next_retry_at <= db_now(), *tenant
        )
    ).scalar()
    due = outbox_due_since()
    unsent = select().select_from(O.join(T, T.c.id == O.c.task_id))
    unsent = unsent.where(O.c.status.in_(_UNSENT), *tenant)
    pending, max_attempt, oldest = conn.execute(
        unsent.add_columns(
            func.count(), func.max(O.c.attempt_count), _age_seconds(conn, due)
        ).where(due <= db_now())
    ).one()
    scheduled, next_at = conn.execute(
        unsent.add_columns(func.count(), func.min(O.c.next_retry_at)).where(due > db_now())
    ).one()
    return QueueFigures(
        queue_age_seconds=float(age or 0.0),
        outbox_pending=int(pending),
        outbox_oldest_age_seconds=float(oldest or 0.0),
        outbox_max_attempt=int(max_attempt or 0),
        outbox_scheduled=int(scheduled),
        outbox_next_scheduled_at=as_db_time(next_at),
    )


def as_db_time(value: object) -> datetime | None:
    """A database time read by an aggregate or a computed column (SQLite answers text)
    as a naive UTC datetime; None stays None."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
