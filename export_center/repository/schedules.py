"""SQL of schedules, their runs and the principals the scheduler checks.

Rules (DESIGN.md "Schedules and notifications"):

* Every time comparison and every written time is the database clock
  (:func:`~export_center.db.db_now`), except ``next_fire_at``, which is a computed
  cron instant (UTC, naive) and is only *compared* with the database clock.
* A scheduler claims one due schedule with a conditional UPDATE
  (:func:`claim_schedule`): ``status = 'ACTIVE' AND deleted_at IS NULL AND
  next_fire_at <= now AND (lease free or expired)``; it sets ``lease_owner``,
  ``lease_until = now + lease`` and bumps ``version``. The fire's writes then name that
  owner and version (:func:`finish_fire`); 0 rows means the claim was lost and the
  caller rolls back its whole fire transaction.
* Changes by people (:func:`update_schedule`) name the version they read, and bump it.
* :func:`touch_principal` upserts what the service last saw of a user's token.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from export_center.auth import Identity
from export_center.db import db_now, db_now_plus
from export_center.repository.rows import _Row
from export_center.repository.tables import PRINCIPALS as P
from export_center.repository.tables import SCHEDULE_RUNS as R
from export_center.repository.tables import SCHEDULES as S
from export_center.repository.tables import TASKS as T

__all__ = [
    "Principal",
    "RunRow",
    "Schedule",
    "claim_schedule",
    "database_now",
    "due_schedule_ids",
    "finish_fire",
    "insert_run",
    "insert_schedule",
    "list_runs",
    "list_schedules",
    "read_principal",
    "read_schedule",
    "run_exists",
    "touch_principal",
    "update_schedule",
]

#: Principal rows are rewritten at most this often for an unchanged token.
PRINCIPAL_REFRESH_SECONDS = 60.0


@dataclass(frozen=True, slots=True, eq=False)
class Schedule(_Row):
    """One ``export_schedule`` row (times naive UTC)."""

    id: int
    tenant_id: str
    app_code: str
    owner: str
    name: str
    export_type: str
    export_json: str
    cron: str
    time_zone: str
    window_json: str | None
    start_at: datetime | None
    end_at: datetime | None
    notify_json: str | None
    status: str
    pause_reason: str | None
    next_fire_at: datetime | None
    lease_owner: str | None
    lease_until: datetime | None
    version: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run with its task's state: ``status`` / ``processed_rows`` / ``task_no`` are
    None when the run made no task."""

    id: int
    schedule_id: int
    fire_time: datetime
    fired_at: datetime
    fires: int
    manual: bool
    task_id: int | None
    outcome: str
    window_from: str | None
    window_to: str | None
    failure_code: str | None
    message: str | None
    task_no: str | None
    status: str | None
    processed_rows: int | None


@dataclass(frozen=True, slots=True)
class Principal:
    """What the service last saw of a user's token."""

    tenant_id: str
    user_id: str
    app_code: str
    permissions: frozenset[str]
    email: str | None
    language: str | None

    def identity(self) -> Identity:
        """The user as a token with the last-seen claims would say (no expiry)."""
        return Identity(
            user=self.user_id,
            tenant=self.tenant_id,
            app_code=self.app_code,
            permissions=self.permissions,
        )


def _naive(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=None) if value.tzinfo else value


def database_now(conn: Connection) -> datetime:
    """The database clock now, as an aware UTC datetime."""
    return _naive(conn.execute(select(db_now())).scalar_one()).replace(tzinfo=UTC)


def insert_schedule(conn: Connection, values: Mapping[str, Any]) -> int:
    """Insert a schedule (``values``: its columns except id, version and times;
    ``status`` defaults to ACTIVE); returns its id."""
    row = {"status": "ACTIVE", **values}
    result = conn.execute(
        insert(S).values(**row, version=1, created_at=db_now(), updated_at=db_now())
    )
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def read_schedule(conn: Connection, schedule_id: int) -> Schedule | None:
    """The schedule (not deleted), or None."""
    row = (
        conn.execute(select(S).where(S.c.id == schedule_id, S.c.deleted_at.is_(None)))
        .mappings()
        .first()
    )
    return None if row is None else Schedule.from_row(row)


def list_schedules(
    conn: Connection, *, tenant_id: str, owner: str | None, limit: int = 200
) -> list[Schedule]:
    """Schedules of a tenant (of ``owner`` only, unless None), newest first."""
    stmt = select(S).where(S.c.tenant_id == tenant_id, S.c.deleted_at.is_(None))
    if owner is not None:
        stmt = stmt.where(S.c.owner == owner)
    rows = conn.execute(stmt.order_by(S.c.id.desc()).limit(limit)).mappings()
    return [Schedule.from_row(r) for r in rows]


def update_schedule(
    conn: Connection, schedule_id: int, version: int, values: Mapping[str, Any]
) -> bool:
    """Change a schedule read at ``version`` (bumps it); False when it changed since
    or was deleted. ``values`` may use ``"DELETE"`` as ``deleted_at`` to stamp the
    database clock."""
    vals = dict(values)
    if vals.get("deleted_at") == "DELETE":
        vals["deleted_at"] = db_now()
    stmt = (
        update(S)
        .where(S.c.id == schedule_id, S.c.version == version, S.c.deleted_at.is_(None))
        .values(**vals, version=S.c.version + 1, updated_at=db_now())
    )
    return conn.execute(stmt).rowcount == 1


def _due() -> Any:
    return and_(
        S.c.status == "ACTIVE",
        S.c.deleted_at.is_(None),
        S.c.next_fire_at.is_not(None),
        S.c.next_fire_at <= db_now(),
        or_(S.c.lease_until.is_(None), S.c.lease_until <= db_now()),
    )


def due_schedule_ids(conn: Connection, limit: int) -> list[int]:
    """Ids of due, unleased (or lease-expired) active schedules, earliest fire first."""
    rows = conn.execute(
        select(S.c.id).where(_due()).order_by(S.c.next_fire_at, S.c.id).limit(limit)
    )
    return [r[0] for r in rows]


def claim_schedule(
    conn: Connection, schedule_id: int, owner: str, lease_seconds: float
) -> Schedule | None:
    """Claim one due schedule with a lease on the database clock (conditional UPDATE).

    Returns:
        The claimed row (its ``version`` is the one :func:`finish_fire` must name), or
        None when it is not due any more or another scheduler holds it.
    """
    claimed = conn.execute(
        update(S)
        .where(S.c.id == schedule_id, _due())
        .values(
            lease_owner=owner,
            lease_until=db_now_plus(lease_seconds),
            version=S.c.version + 1,
        )
    ).rowcount
    if claimed != 1:
        return None
    return read_schedule(conn, schedule_id)


def finish_fire(
    conn: Connection,
    schedule_id: int,
    *,
    owner: str,
    version: int,
    next_fire_at: datetime | None,
    status: str,
    pause_reason: str | None = None,
) -> bool:
    """Advance a claimed schedule and release its lease (names ``owner`` and
    ``version``); False when the claim was lost (roll the fire back)."""
    return (
        conn.execute(
            update(S)
            .where(S.c.id == schedule_id, S.c.lease_owner == owner, S.c.version == version)
            .values(
                next_fire_at=next_fire_at,
                status=status,
                pause_reason=pause_reason,
                lease_owner=None,
                lease_until=None,
                version=S.c.version + 1,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


def insert_run(conn: Connection, values: Mapping[str, Any]) -> int | None:
    """Insert a run (``fired_at`` = database now); None when a run of this schedule
    and fire time exists already (the unique key: a fire is recorded once)."""
    nested = conn.begin_nested()
    try:
        result = conn.execute(insert(R).values(**values, fired_at=db_now()))
    except IntegrityError:
        nested.rollback()
        return None
    nested.commit()
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def run_exists(conn: Connection, schedule_id: int, fire_time: datetime) -> bool:
    """True when the schedule has a run at ``fire_time`` (naive UTC) already."""
    found = conn.execute(
        select(R.c.id).where(R.c.schedule_id == schedule_id, R.c.fire_time == fire_time)
    ).first()
    return found is not None


def list_runs(conn: Connection, schedule_id: int, limit: int = 100) -> list[RunRow]:
    """The schedule's runs with their tasks' state and rows, newest first."""
    rows = conn.execute(
        select(R, T.c.task_no, T.c.status, T.c.processed_rows)
        .select_from(R.outerjoin(T, T.c.id == R.c.task_id))
        .where(R.c.schedule_id == schedule_id)
        .order_by(R.c.fire_time.desc(), R.c.id.desc())
        .limit(limit)
    ).mappings()
    return [RunRow(**{k: r[k] for k in RunRow.__dataclass_fields__}) for r in rows]


def read_principal(conn: Connection, tenant_id: str, user_id: str) -> Principal | None:
    """What the service last saw of this user, or None."""
    row = (
        conn.execute(select(P).where(P.c.tenant_id == tenant_id, P.c.user_id == user_id))
        .mappings()
        .first()
    )
    if row is None:
        return None
    return Principal(
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        app_code=row["app_code"],
        permissions=frozenset(json.loads(row["permissions_json"])),
        email=row["email"],
        language=row["language"],
    )


def touch_principal(
    conn: Connection,
    user: Identity,
    *,
    email: str | None = None,
    language: str | None = None,
    force: bool = False,
) -> bool:
    """Record the user's token: app, permissions (and e-mail and language when given).

    The row is rewritten when the claims differ from the stored ones, when it was last
    seen over :data:`PRINCIPAL_REFRESH_SECONDS` ago, or when ``force``; otherwise
    nothing is written. Returns True when a row was written.
    """
    perms = json.dumps(sorted(user.permissions), separators=(",", ":"))
    values: dict[str, Any] = {"app_code": user.app_code, "permissions_json": perms}
    if email is not None:
        values["email"] = email
    if language is not None:
        values["language"] = language
    key = and_(P.c.tenant_id == user.tenant, P.c.user_id == user.user)
    changed = or_(
        P.c.app_code != user.app_code,
        P.c.permissions_json != perms,
        P.c.seen_at <= db_now_plus(-PRINCIPAL_REFRESH_SECONDS),
        *([P.c.email.is_(None) | (P.c.email != email)] if email is not None else []),
        *([P.c.language.is_(None) | (P.c.language != language)] if language else []),
    )
    where = key if force else and_(key, changed)
    stmt = update(P).where(where).values(**values, seen_at=db_now(), updated_at=db_now())
    if conn.execute(stmt).rowcount == 1:
        return True
    exists = conn.execute(select(func.count()).select_from(P).where(key)).scalar_one()
    if exists:
        return False
    nested = conn.begin_nested()
    try:
        conn.execute(
            insert(P).values(
                tenant_id=user.tenant,
                user_id=user.user,
                **values,
                seen_at=db_now(),
                updated_at=db_now(),
            )
        )
    except IntegrityError:  # another request of the same user inserted it first
        nested.rollback()
        return False
    nested.commit()
    return True
