"""Reads for operators: tasks by any filter, the unsent outbox, quarantined commands,
failures by type. Bounded: every read takes a ``limit``.

Operators see across owners; ``tenant_id`` narrows a read to one tenant (the admin API
passes the admin's tenant unless the caller is a platform operator).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, literal_column, select

from export_center.db import db_now, db_now_plus
from export_center.repository._common import all_tasks
from export_center.repository.reads import as_db_time, outbox_due_since
from export_center.repository.rows import OutboxRow, Task
from export_center.repository.tables import OUTBOX as O
from export_center.repository.tables import TASKS as T
from export_center.states import OutboxStatus, TaskStatus

__all__ = [
    "OutboxEntry",
    "failures_by_type",
    "outbox_entry",
    "search_tasks",
    "task_names",
    "unsent_outbox",
]


def search_tasks(
    conn: Connection,
    *,
    statuses: Sequence[str] | None = None,
    export_types: Sequence[str] | None = None,
    requested_by: str | None = None,
    tenant_id: str | None = None,
    since: datetime | None = None,
    name: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[Task]:
    """Tasks matching every filter given, newest first (keyset ``id < before_id``).

    Args:
        since: only tasks requested at or after this UTC time (naive or aware).
        name: only tasks whose name contains this text (``%`` and ``_`` are plain
            characters; letters compare without case, as far as the database's
            ``LOWER`` knows them: every letter on MariaDB, A-Z on SQLite).
    """
    conds: list[Any] = []
    if statuses:
        conds.append(T.c.status.in_(list(statuses)))
    if export_types:
        conds.append(T.c.export_type.in_(list(export_types)))
    if requested_by is not None:
        conds.append(T.c.requested_by == requested_by)
    if tenant_id is not None:
        conds.append(T.c.tenant_id == tenant_id)
    if since is not None:
        conds.append(T.c.requested_at >= since.replace(tzinfo=None))
    if name:
        conds.append(func.lower(T.c.task_name).contains(name.lower(), autoescape=True))
    if before_id is not None:
        conds.append(T.c.id < before_id)
    return all_tasks(conn.execute(select(T).where(*conds).order_by(T.c.id.desc()).limit(limit)))


def task_names(conn: Connection, task_nos: Sequence[str]) -> dict[str, str]:
    """``{task_no: task_name}`` of the given public task ids that exist (one query)."""
    wanted = sorted(set(task_nos))
    if not wanted:
        return {}
    rows = conn.execute(select(T.c.task_no, T.c.task_name).where(T.c.task_no.in_(wanted)))
    return {r[0]: r[1] for r in rows}


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An outbox row with its task's public id, name, tenant and state, and when its
    command became due (:func:`~export_center.repository.reads.outbox_due_since`).

    ``age_seconds`` counts from that moment to the database clock; it is negative while
    the command is ``scheduled`` (an automatic retry whose time has not come).
    """

    row: OutboxRow
    task_no: str
    tenant_id: str
    task_status: str
    age_seconds: float
    task_name: str = ""
    due_at: datetime | None = None

    @property
    def scheduled(self) -> bool:
        """True while the command is unsent and not yet due (it waits by design)."""
        return self.row.status in _UNSENT and self.age_seconds < 0


_UNSENT = (OutboxStatus.PENDING.value, OutboxStatus.CLAIMED.value)


def _age(conn: Connection, column: Any) -> Any:
    """Seconds from ``column`` to the database clock."""
    if conn.dialect.name == "sqlite":
        return (func.julianday(db_now()) - func.julianday(column)) * 86400.0
    return func.timestampdiff(literal_column("MICROSECOND"), column, db_now()) / 1e6


def _entries(conn: Connection, conds: list[Any], limit: int, order: Any) -> list[OutboxEntry]:
    due = outbox_due_since()
    rows = conn.execute(
        select(
            O,
            T.c.task_no,
            T.c.task_name,
            T.c.tenant_id,
            T.c.status.label("task_status"),
            due.label("due_at"),
            _age(conn, due).label("age_seconds"),
        )
        .join(T, T.c.id == O.c.task_id)
        .where(*conds)
        .order_by(order, O.c.id)
        .limit(limit)
    ).mappings()
    return [
        OutboxEntry(
            row=OutboxRow.from_row(row),
            task_no=row["task_no"],
            task_name=row["task_name"],
            tenant_id=row["tenant_id"],
            task_status=row["task_status"],
            age_seconds=float(row["age_seconds"] or 0.0),
            due_at=as_db_time(row["due_at"]),
        )
        for row in rows
    ]


def unsent_outbox(
    conn: Connection,
    *,
    status: OutboxStatus | None = None,
    stuck_seconds: float | None = None,
    tenant_id: str | None = None,
    limit: int = 50,
) -> list[OutboxEntry]:
    """Outbox rows not sent (PENDING or CLAIMED; or exactly ``status``), the command
    that became due first, first (scheduled retries last, soonest first).

    Args:
        stuck_seconds: only commands due for more than this many seconds (a scheduled
            retry is never stuck: it waits for its time by design).
        tenant_id: only rows of this tenant's tasks.
    """
    conds: list[Any] = [O.c.status.in_(_UNSENT) if status is None else O.c.status == status.value]
    if stuck_seconds is not None:
        conds.append(outbox_due_since() <= db_now_plus(-stuck_seconds))
    if tenant_id is not None:
        conds.append(T.c.tenant_id == tenant_id)
    order = outbox_due_since() if status is None else O.c.created_at
    return _entries(conn, conds, limit, order)


def outbox_entry(
    conn: Connection, event_id: str, tenant_id: str | None = None
) -> OutboxEntry | None:
    """The outbox row of one command (``event_id``), or None."""
    conds: list[Any] = [O.c.event_id == event_id]
    if tenant_id is not None:
        conds.append(T.c.tenant_id == tenant_id)
    found = _entries(conn, conds, 1, O.c.id)
    return found[0] if found else None


def failures_by_type(
    conn: Connection, *, tenant_id: str | None = None, since_seconds: float = 86400.0
) -> dict[str, int]:
    """``{export_type: FAILED tasks}`` that ended in the last ``since_seconds``."""
    conds: list[Any] = [
        T.c.status == TaskStatus.FAILED.value,
        T.c.completed_at >= db_now_plus(-since_seconds),
    ]
    if tenant_id is not None:
        conds.append(T.c.tenant_id == tenant_id)
    rows = conn.execute(
        select(T.c.export_type, func.count()).where(*conds).group_by(T.c.export_type)
    )
    return {r[0]: int(r[1]) for r in rows}
