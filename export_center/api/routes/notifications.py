"""``/api/v1/notifications``: the caller's in-page notifications (newest first), the
unread count, and marking them read."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.notify_schemas import NotificationPublic, NotificationsPublic
from export_center.api.openapi import AUTH, GUARD, errors
from export_center.api.present import utc
from export_center.errors import NotFound, ValidationFailed
from export_center.notify.notifier import message_for
from export_center.notify.texts import summary
from export_center.repository import inbox
from export_center.repository import notifications as notes

__all__ = ["router"]

router = APIRouter(
    prefix="/api/v1/notifications", tags=["notifications"], dependencies=[Depends(strict_query)]
)

_MISSING = {404: ["NOTIFICATION_NOT_FOUND"]}


def public(row: notes.Notification) -> NotificationPublic:
    """The API shape of an in-page notification row."""
    data = row.data
    message = message_for(row, language="en", base_url=None)
    return NotificationPublic(
        id=str(row.id),
        type=row.event_type,
        createdAt=utc(row.created_at),
        read=row.read_at is not None,
        taskId=data.get("taskId"),
        state=data.get("state"),
        exportType=data.get("exportType"),
        taskName=data.get("taskName") or data.get("scheduleName"),
        scheduleId=data.get("scheduleId"),
        message=summary(message, "en"),
        messageZh=summary(message, "zh"),
    )


@router.get(
    "", response_model=NotificationsPublic, responses=errors(AUTH, {422: ["INVALID_VALUE"]})
)
def list_notifications(
    user: CurrentUser,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    before: Annotated[str | None, Query(max_length=18)] = None,
) -> NotificationsPublic:
    """The caller's notifications, newest first, and how many are unread."""
    if before is not None and not before.isdigit():
        raise ValidationFailed(
            "before must be a notification id", code="INVALID_VALUE", field="before"
        )
    with runtime.engine.connect() as conn:
        rows = inbox.page_notifications(
            conn,
            user.tenant,
            user.user,
            limit=limit + 1,
            before_id=int(before) if before is not None else None,
        )
        unread = inbox.unread_count(conn, user.tenant, user.user)
    more = len(rows) > limit
    rows = rows[:limit]
    return NotificationsPublic(
        items=[public(r) for r in rows],
        unreadCount=unread,
        nextBefore=str(rows[-1].id) if more and rows else None,
    )


@router.post("/read-all", responses=errors(GUARD, AUTH))
def read_all(user: CurrentUser, runtime: RuntimeDep) -> dict[str, int]:
    """Mark every notification of the caller read."""
    with runtime.engine.begin() as conn:
        marked = inbox.mark_all_read(conn, user.tenant, user.user)
    return {"marked": marked, "unreadCount": 0}


@router.post("/{notification_id}/read", responses=errors(GUARD, AUTH, _MISSING))
def read_one(notification_id: str, user: CurrentUser, runtime: RuntimeDep) -> dict[str, int]:
    """Mark one of the caller's notifications read."""
    missing = NotFound("no such notification of yours", code="NOTIFICATION_NOT_FOUND")
    if not notification_id.isdigit() or len(notification_id) > 18:
        raise missing
    with runtime.engine.begin() as conn:
        if not inbox.mark_read(conn, user.tenant, user.user, int(notification_id)):
            raise missing
        unread = inbox.unread_count(conn, user.tenant, user.user)
    return {"unreadCount": unread}
