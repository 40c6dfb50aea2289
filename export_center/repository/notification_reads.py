"""Reads of the notification outbox: the rows of one event, the attempts of one row,
and the backlog the gauges show (database clock)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, select

from export_center.db import db_now
from export_center.repository.notifications import (
    DeliveryAttempt,
    Notification,
    NotificationStatus,
)
from export_center.repository.tables import DELIVERY_ATTEMPTS as D
from export_center.repository.tables import NOTIFICATIONS as N

__all__ = ["delivery_attempts", "notification_backlog", "notifications_of_event"]


def notifications_of_event(conn: Connection, event_id: str) -> list[Notification]:
    """Every row of one event (tests, the route fan-out)."""
    rows = conn.execute(select(N).where(N.c.event_id == event_id).order_by(N.c.id)).mappings()
    return [Notification.from_row(r) for r in rows]


def delivery_attempts(conn: Connection, notification_id: int) -> list[DeliveryAttempt]:
    """The delivery attempts of one notification, oldest first."""
    rows = conn.execute(
        select(D).where(D.c.notification_id == notification_id).order_by(D.c.id)
    ).mappings()
    return [DeliveryAttempt.from_row(r) for r in rows]


def notification_backlog(conn: Connection) -> tuple[int, float]:
    """``(rows due and not delivered, seconds since the oldest of them was written)``,
    both by the database clock; rows backed off to a later try count too (a receiver
    that is down makes the backlog grow; the age says for how long)."""
    row = conn.execute(
        select(func.count(), func.min(N.c.created_at), db_now()).where(
            N.c.status.in_([NotificationStatus.PENDING.value, NotificationStatus.CLAIMED.value])
        )
    ).one()
    count, oldest, now = int(row[0]), row[1], row[2]
    if not count or oldest is None:
        return count, 0.0
    if isinstance(now, str):
        now = datetime.fromisoformat(now)
    if isinstance(oldest, str):
        oldest = datetime.fromisoformat(oldest)
    return count, max((now - oldest).total_seconds(), 0.0)
