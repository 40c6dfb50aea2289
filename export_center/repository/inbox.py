"""The in-page notification list: a user's ``page`` rows of the notification outbox
(written SENT when the event happens), newest first, and their read marks; and the
user's notification defaults (``export_principal.notify_defaults_json``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, and_, func, select, update

from export_center.auth import Identity
from export_center.db import db_now
from export_center.repository.notifications import Notification
from export_center.repository.schedules import touch_principal
from export_center.repository.tables import NOTIFICATIONS as N
from export_center.repository.tables import PRINCIPALS as P

__all__ = [
    "Reachable",
    "known_address",
    "mark_all_read",
    "mark_read",
    "page_notifications",
    "reachable",
    "save_notify_defaults",
    "unread_count",
]


@dataclass(frozen=True, slots=True)
class Reachable:
    """What the service knows of how to reach a user.

    Attributes:
        notify_defaults_json: the saved defaults (canonical targets JSON, ``[]`` for
            nobody); None when the user saved none.
        email: the address of the token's ``email`` claim, None when unknown.
        language: ``en`` or ``zh`` from the token or the page, None when unknown.
    """

    notify_defaults_json: str | None
    email: str | None
    language: str | None


def reachable(conn: Connection, tenant_id: str, user_id: str) -> Reachable:
    """The user's defaults, address and language (all None for an unknown user)."""
    row = conn.execute(
        select(P.c.notify_defaults_json, P.c.email, P.c.language).where(
            P.c.tenant_id == tenant_id, P.c.user_id == user_id
        )
    ).first()
    if row is None:
        return Reachable(None, None, None)
    return Reachable(row.notify_defaults_json, row.email, row.language)


def known_address(engine: Engine, user: Identity) -> str | None:
    """The user's e-mail address: the token's ``email`` claim, else the one recorded
    from an earlier token; None when neither exists."""
    if user.email:
        return user.email
    with engine.connect() as conn:
        return reachable(conn, user.tenant, user.user).email


def save_notify_defaults(conn: Connection, user: Identity, notify_json: str | None) -> None:
    """Store the user's defaults (None: none saved, the built-in ``page`` default),
    creating the principal row when this user was never recorded."""
    key = and_(P.c.tenant_id == user.tenant, P.c.user_id == user.user)
    stmt = update(P).where(key).values(notify_defaults_json=notify_json, updated_at=db_now())
    if conn.execute(stmt).rowcount == 0:
        touch_principal(conn, user, email=user.email, language=user.language, force=True)
        conn.execute(stmt)


def _inbox(tenant_id: str, user_id: str) -> Any:
    return and_(N.c.tenant_id == tenant_id, N.c.user_id == user_id, N.c.channel == "page")


def page_notifications(
    conn: Connection, tenant_id: str, user_id: str, *, limit: int, before_id: int | None = None
) -> list[Notification]:
    """The user's in-page notifications, newest first (keyset: ids below ``before_id``)."""
    cond = _inbox(tenant_id, user_id)
    if before_id is not None:
        cond = and_(cond, N.c.id < before_id)
    rows = conn.execute(select(N).where(cond).order_by(N.c.id.desc()).limit(limit)).mappings()
    return [Notification.from_row(r) for r in rows]


def unread_count(conn: Connection, tenant_id: str, user_id: str) -> int:
    """How many of the user's in-page notifications are unread."""
    return int(
        conn.execute(
            select(func.count()).where(_inbox(tenant_id, user_id), N.c.read_at.is_(None))
        ).scalar_one()
    )


def mark_read(conn: Connection, tenant_id: str, user_id: str, row_id: int) -> bool:
    """Mark one of the user's notifications read; False when it is not theirs."""
    exists = conn.execute(
        select(N.c.id).where(_inbox(tenant_id, user_id), N.c.id == row_id)
    ).first()
    if exists is None:
        return False
    conn.execute(
        update(N)
        .where(N.c.id == row_id, N.c.read_at.is_(None))
        .values(read_at=db_now(), updated_at=db_now())
    )
    return True


def mark_all_read(conn: Connection, tenant_id: str, user_id: str) -> int:
    """Mark every unread notification of the user read; returns how many."""
    return int(
        conn.execute(
            update(N)
            .where(_inbox(tenant_id, user_id), N.c.read_at.is_(None))
            .values(read_at=db_now(), updated_at=db_now())
        ).rowcount
    )
