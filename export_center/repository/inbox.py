"""The in-page notification list: a user's ``page`` rows of the notification outbox
(written SENT when the event happens), newest first, and their read marks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, func, select, update

from export_center.db import db_now
from export_center.repository.notifications import Notification
from export_center.repository.tables import NOTIFICATIONS as N

__all__ = ["mark_all_read", "mark_read", "page_notifications", "unread_count"]


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
