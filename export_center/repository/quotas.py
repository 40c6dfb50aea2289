"""The quota tables: per-day usage counted from ``export_task``, and the overrides in
``export_quota``.

Usage is never stored: a day's figures are counted from the task rows, so a refused
create (rolled back), an idempotent replay and an active duplicate (no new row) never
count, and nothing has to be corrected when a task ends. The counts are exact under
concurrency when read after the create guard is locked (:mod:`.create`): every create
of every tenant waits on that row, so no two creates read the same figures.

* tasks created: rows of ``export_task`` with ``requested_at`` in the day, any status
  (a failed or cancelled export was still created);
* rows exported: ``row_count`` of the exports that ended ``SUCCEEDED`` (or ``EXPIRED``
  since: their file was written) with ``completed_at`` in the day: rows count when the
  export finishes, on the day it finishes.

Every override change is written to ``export_audit`` (action ``quota_override``) in
its transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, delete, func, insert, select, update

from export_center.db import db_now
from export_center.repository.guards import lock_scope
from export_center.repository.tables import AUDIT as A
from export_center.repository.tables import QUOTAS as Q
from export_center.repository.tables import TASKS as T
from export_center.states import TaskStatus

__all__ = [
    "QUOTA_AUDIT_ACTION",
    "Override",
    "Usage",
    "clear_override",
    "database_now",
    "list_overrides",
    "overrides_of",
    "set_override",
    "usage",
]

#: ``export_audit.action`` of an override change.
QUOTA_AUDIT_ACTION = "quota_override"
_FINISHED = (TaskStatus.SUCCEEDED.value, TaskStatus.EXPIRED.value)


@dataclass(frozen=True, slots=True)
class Usage:
    """Tasks created and rows exported in a window: ``tasks`` and ``rows`` counts."""

    tasks: int
    rows: int


@dataclass(frozen=True, slots=True)
class Override:
    """One ``export_quota`` row; ``user_id`` ``''`` is the tenant as a whole; a None
    limit keeps the setting's default."""

    tenant_id: str
    user_id: str
    tasks_per_day: int | None
    rows_per_day: int | None
    updated_by: str
    updated_at: datetime

    def to_json(self) -> dict[str, Any]:
        """``{tenant, user, tasksPerDay, rowsPerDay, updatedBy, updatedAt}`` (user None
        for the tenant row; time ISO 8601 UTC)."""
        return {
            "tenant": self.tenant_id,
            "user": self.user_id or None,
            "tasksPerDay": self.tasks_per_day,
            "rowsPerDay": self.rows_per_day,
            "updatedBy": self.updated_by,
            "updatedAt": self.updated_at.isoformat() + "Z",
        }


def database_now(conn: Connection) -> datetime:
    """The database clock (naive UTC, milliseconds)."""
    value = conn.execute(select(db_now())).scalar_one()
    if isinstance(value, str):  # SQLite answers text
        return datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value


def usage(
    conn: Connection, tenant_id: str, user_id: str | None, start: datetime, end: datetime
) -> Usage:
    """Tasks created (but not rejected at approval) and rows exported in ``[start, end)``
    (naive UTC) by the tenant, or by one of its users when ``user_id`` is given."""
    created = [
        T.c.tenant_id == tenant_id,
        T.c.requested_at >= start,
        T.c.requested_at < end,
        T.c.status != TaskStatus.REJECTED.value,  # never ran: its slot is given back
    ]
    finished = [
        T.c.tenant_id == tenant_id,
        T.c.completed_at >= start,
        T.c.completed_at < end,
        T.c.status.in_(_FINISHED),
    ]
    if user_id is not None:
        created.append(T.c.requested_by == user_id)
        finished.append(T.c.requested_by == user_id)
    tasks = conn.execute(select(func.count()).where(*created)).scalar_one()
    rows = conn.execute(
        select(func.coalesce(func.sum(T.c.row_count), 0)).where(*finished)
    ).scalar_one()
    return Usage(int(tasks), int(rows))


def _override(row: Any) -> Override:
    return Override(
        row.tenant_id,
        row.user_id,
        row.tasks_per_day,
        row.rows_per_day,
        row.updated_by,
        row.updated_at,
    )


def overrides_of(
    conn: Connection, tenant_id: str, user_id: str
) -> tuple[Override | None, Override | None]:
    """The tenant's override and the user's (``None`` where there is none)."""
    rows = conn.execute(
        select(Q).where(Q.c.tenant_id == tenant_id, Q.c.user_id.in_(["", user_id]))
    ).all()
    found = {row.user_id: _override(row) for row in rows}
    return found.get(""), (found.get(user_id) if user_id else None)


def list_overrides(conn: Connection, tenant_id: str | None, limit: int = 200) -> list[Override]:
    """Overrides of one tenant (every tenant when None), by tenant then user."""
    stmt = select(Q).order_by(Q.c.tenant_id, Q.c.user_id).limit(limit)
    if tenant_id is not None:
        stmt = stmt.where(Q.c.tenant_id == tenant_id)
    return [_override(row) for row in conn.execute(stmt)]


def _audit(
    conn: Connection,
    *,
    actor: str,
    outcome: str,
    tenant_id: str,
    reason: str | None,
    details: dict[str, Any],
) -> None:
    conn.execute(
        insert(A).values(
            occurred_at=db_now(),
            actor=actor[:160],
            action=QUOTA_AUDIT_ACTION,
            outcome=outcome,
            tenant_id=tenant_id,
            reason=reason[:1000] if reason else None,
            details_json=orjson.dumps(details).decode(),
        )
    )


def _before(conn: Connection, tenant_id: str, user_id: str) -> Override | None:
    """The override now, after locking its scope's create guard row (the user's, or the
    tenant's for ``user_id=''``): two operators writing the same new override wait on
    each other instead of one failing on the unique key, and a create counting that
    scope's quota sees the override before or after the change, never in between (on
    SQLite the write transaction already serializes)."""
    if user_id:
        lock_scope(conn, "user", tenant_id, user_id)
    else:
        lock_scope(conn, "tenant", tenant_id)
    row = conn.execute(select(Q).where(Q.c.tenant_id == tenant_id, Q.c.user_id == user_id)).first()
    return None if row is None else _override(row)


def set_override(
    conn: Connection,
    *,
    tenant_id: str,
    user_id: str,
    tasks_per_day: int | None,
    rows_per_day: int | None,
    actor: str,
    reason: str | None,
) -> Override:
    """Write the override of a tenant (``user_id=''``) or a user, replacing any, and
    audit it (outcome ``set``, details: user, the limits before and after), in the
    caller's transaction. Returns the row as stored."""
    before = _before(conn, tenant_id, user_id)
    values = {
        "tasks_per_day": tasks_per_day,
        "rows_per_day": rows_per_day,
        "updated_by": actor[:160],
        "updated_at": db_now(),
    }
    if before is None:
        conn.execute(insert(Q).values(tenant_id=tenant_id, user_id=user_id, **values))
    else:
        conn.execute(
            update(Q).where(Q.c.tenant_id == tenant_id, Q.c.user_id == user_id).values(**values)
        )
    _audit(
        conn,
        actor=actor,
        outcome="set",
        tenant_id=tenant_id,
        reason=reason,
        details={
            "user": user_id or None,
            "before": _limits(before),
            "after": {"tasksPerDay": tasks_per_day, "rowsPerDay": rows_per_day},
        },
    )
    after = _before(conn, tenant_id, user_id)
    assert after is not None
    return after


def clear_override(
    conn: Connection, *, tenant_id: str, user_id: str, actor: str, reason: str | None
) -> Override | None:
    """Delete the override (the defaults apply again) and audit it (outcome
    ``cleared``); returns the row that was removed, None when there was none (nothing
    is audited then)."""
    before = _before(conn, tenant_id, user_id)
    if before is None:
        return None
    conn.execute(delete(Q).where(Q.c.tenant_id == tenant_id, Q.c.user_id == user_id))
    _audit(
        conn,
        actor=actor,
        outcome="cleared",
        tenant_id=tenant_id,
        reason=reason,
        details={"user": user_id or None, "before": _limits(before), "after": None},
    )
    return before


def _limits(found: Override | None) -> dict[str, int | None] | None:
    if found is None:
        return None
    return {"tasksPerDay": found.tasks_per_day, "rowsPerDay": found.rows_per_day}
