"""The notification outbox: rows written with the change they announce, delivered by the
notifier.

A terminal transition of a task (succeeded, failed after its last attempt, cancelled),
the expiring-soon mark, or a schedule pausing itself calls :func:`enqueue_task_event`
or :func:`enqueue_schedule_paused` in the SAME transaction. One event gets one event id
and one ``export_notification`` row per target; the unique key ``(event_id, channel,
target)`` makes writing a row twice a no-op. Targets, in order:

* the task's ``notify_json`` targets, else the owner's defaults
  (``export_principal.notify_defaults_json``), else one ``page`` target; only targets
  whose ``events`` hold the event;
* every enabled, undeleted webhook endpoint of the tenant subscribed to the event;
* one ``route`` row (target ``operator``): the operator routes of ``notify.routes``
  are settings the repository does not see, so the notifier expands this row into one
  robot row per matching route (same event id, idempotent) and marks it SENT.

``page`` rows are the in-page list: written SENT at once. An ``email`` target without
``to`` goes to the owner's ``export_principal.email``; without one no row is written and
the audit says so (``notify_skipped``).

Delivery: the notifier claims due PENDING rows with a lease (database clock), records an
``export_delivery_attempt`` per try, marks SENT, or puts the row back to PENDING with a
back-off, or marks it DEAD once it is older than ``max_age_hours``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, insert, literal, select, update
from sqlalchemy.exc import IntegrityError

from export_center.db import db_now, db_now_plus
from export_center.ids import new_event_id
from export_center.notify.targets import Target, targets_from_json
from export_center.repository import leases
from export_center.repository.audit import AuditAction, record_audit
from export_center.repository.reads import read_task
from export_center.repository.rows import Task, _Row
from export_center.repository.tables import DELIVERY_ATTEMPTS as D
from export_center.repository.tables import NOTIFICATIONS as N
from export_center.repository.tables import PRINCIPALS as P
from export_center.repository.tables import TASKS as T
from export_center.repository.tables import WEBHOOK_ENDPOINTS as W
from export_center.states import TaskStatus, api_state

__all__ = [
    "ROUTE_CHANNEL",
    "DeliveryAttempt",
    "Notification",
    "NotificationStatus",
    "claim_notification",
    "due_notifications",
    "mark_notification_dropped",
    "enqueue_schedule_paused",
    "enqueue_task_event",
    "insert_notification",
    "mark_expiring",
    "mark_notification_dead",
    "mark_notification_sent",
    "notification_failed",
    "read_notification",
    "record_delivery_attempt",
    "redeliver_notification",
    "release_expired_notification_claims",
    "task_event_data",
]

#: The fan-out row of the operator routes (expanded by the notifier).
ROUTE_CHANNEL = "route"
_ROUTE_TARGET = "operator"
_EVENT_OF_STATUS = {
    TaskStatus.SUCCEEDED: "export.succeeded",
    TaskStatus.FAILED: "export.failed",
    TaskStatus.CANCELLED: "export.cancelled",
}


class NotificationStatus(StrEnum):
    """Where a notification row is."""

    PENDING = "PENDING"
    CLAIMED = "CLAIMED"
    SENT = "SENT"
    DEAD = "DEAD"
    DROPPED = "DROPPED"  # its target was switched off or deleted on purpose


@dataclass(frozen=True, slots=True, eq=False)
class Notification(_Row):
    """One ``export_notification`` row (times naive UTC, database clock)."""

    id: int
    event_id: str
    event_type: str
    tenant_id: str
    user_id: str | None
    task_id: int | None
    schedule_id: int | None
    channel: str
    target: str
    payload_json: str
    status: str
    attempt_count: int
    next_retry_at: datetime
    lease_owner: str | None
    lease_until: datetime | None
    sent_at: datetime | None
    dead_at: datetime | None
    read_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def data(self) -> dict[str, Any]:
        """The event's data (the webhook body's ``data``)."""
        return dict(json.loads(self.payload_json))


@dataclass(frozen=True, slots=True, eq=False)
class DeliveryAttempt(_Row):
    """One ``export_delivery_attempt`` row."""

    id: int
    notification_id: int
    attempt_no: int
    attempted_at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int | None
    manual: bool


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="milliseconds") + "Z"


def task_event_data(task: Task) -> dict[str, Any]:
    """The event data of a task event: ``taskId`` (public id), ``state`` (API
    lowercase), ``exportType``, ``scheduleId`` (when a schedule made it), ``taskName``,
    ``rows``, ``fileName``, ``failureCode``, ``failureMessage``, ``expiresAt`` (ISO UTC),
    ``timeZone`` (the export's IANA zone: messages give times in it)."""
    data: dict[str, Any] = {
        "taskId": task.task_no,
        "state": api_state(task.status),
        "exportType": task.export_type,
        "taskName": task.task_name,
        "timeZone": task.time_zone,
    }
    if task.schedule_id is not None:
        data["scheduleId"] = task.schedule_id
    if task.status == TaskStatus.SUCCEEDED:
        data.update(rows=task.row_count, fileName=task.file_name, expiresAt=_iso(task.expires_at))
    if task.status in (TaskStatus.FAILED, TaskStatus.REJECTED):
        data.update(failureCode=task.failure_code, failureMessage=task.failure_message)
    return data


def insert_notification(
    conn: Connection,
    *,
    event_id: str,
    event_type: str,
    tenant_id: str,
    user_id: str | None,
    channel: str,
    target: str,
    data: Mapping[str, Any],
    task_id: int | None = None,
    schedule_id: int | None = None,
    sent: bool = False,
) -> bool:
    """Insert one notification row (PENDING and due now, or SENT when ``sent``).

    Returns:
        False when the row ``(event_id, channel, target)`` already exists (no-op).
    """
    values = {
        "event_id": event_id,
        "event_type": event_type,
        "tenant_id": tenant_id,
        "user_id": user_id,
        "task_id": task_id,
        "schedule_id": schedule_id,
        "channel": channel,
        "target": target[:512],
        "payload_json": json.dumps(dict(data), sort_keys=True, separators=(",", ":")),
        "status": (NotificationStatus.SENT if sent else NotificationStatus.PENDING).value,
        "attempt_count": 0,
        "next_retry_at": db_now(),
        "sent_at": db_now() if sent else None,
        "created_at": db_now(),
        "updated_at": db_now(),
    }
    if conn.dialect.name == "sqlite":
        stmt = insert(N).values(**values).prefix_with("OR IGNORE")
        return bool(conn.execute(stmt).rowcount == 1)
    nested = conn.begin_nested()
    try:
        conn.execute(insert(N).values(**values))
    except IntegrityError:
        nested.rollback()
        return False
    nested.commit()
    return True


def _principal(conn: Connection, tenant_id: str, user_id: str) -> Any:
    return conn.execute(
        select(P.c.email, P.c.notify_defaults_json).where(
            P.c.tenant_id == tenant_id, P.c.user_id == user_id
        )
    ).first()


def _targets(task_json: str | None, principal: Any) -> tuple[Target, ...]:
    targets = targets_from_json(task_json)
    if targets is None and principal is not None:
        targets = targets_from_json(principal.notify_defaults_json)
    return (Target("page", None),) if targets is None else targets


def _webhooks(conn: Connection, tenant_id: str, event_type: str) -> list[str]:
    rows = conn.execute(
        select(W.c.public_id, W.c.events_json)
        .where(W.c.tenant_id == tenant_id, W.c.enabled == literal(True), W.c.deleted_at.is_(None))
        .order_by(W.c.id)
    )
    return [r.public_id for r in rows if event_type in json.loads(r.events_json)]


def _enqueue(
    conn: Connection,
    *,
    event_type: str,
    tenant_id: str,
    user_id: str,
    targets: Sequence[Target],
    data: Mapping[str, Any],
    task: Task | None,
    schedule_id: int | None,
) -> str:
    event_id = new_event_id()
    principal = _principal(conn, tenant_id, user_id)
    common: dict[str, Any] = {
        "event_id": event_id,
        "event_type": event_type,
        "tenant_id": tenant_id,
        "user_id": user_id,
        "data": data,
        "task_id": task.id if task is not None else None,
        "schedule_id": schedule_id,
    }
    for target in targets:
        if event_type not in target.events:
            continue
        if target.channel == "page":
            insert_notification(conn, channel="page", target=user_id, sent=True, **common)
        elif target.channel == "email" and target.to is None:
            email = principal.email if principal is not None else None
            if email:
                insert_notification(conn, channel="email", target=email, **common)
            else:
                record_audit(
                    conn,
                    actor="system:notifier",
                    action=AuditAction.NOTIFY_SKIPPED,
                    outcome="no_address",
                    task=task,
                    event_id=event_id,
                    reason=f"{event_type}: no e-mail address is known for {user_id}",
                )
        elif target.to is not None:
            insert_notification(conn, channel=target.channel, target=target.to, **common)
    for endpoint in _webhooks(conn, tenant_id, event_type):
        insert_notification(conn, channel="webhook", target=endpoint, **common)
    insert_notification(conn, channel=ROUTE_CHANNEL, target=_ROUTE_TARGET, **common)
    return event_id


def enqueue_task_event(
    conn: Connection, task_id: int, event_type: str | None = None, *, page_always: bool = False
) -> str | None:
    """Write the notification rows of a task event, in the caller's transaction.

    Args:
        task_id: the task (internal id), already in its new state.
        event_type: ``export.succeeded|failed|cancelled|expiring|approved|rejected``;
            None: the event of the task's terminal status.
        page_always: the owner's page is told even when no target asks for the event
            (an approval decision answers the requester's own request).

    Returns:
        The event id, or None when the task is missing or not in a state with an event.
    """
    task = read_task(conn, task_id)
    if task is None:
        return None
    event = event_type or _EVENT_OF_STATUS.get(TaskStatus(task.status))
    if event is None:
        return None
    principal = _principal(conn, task.tenant_id, task.requested_by)
    targets = _targets(task.notify_json, principal)
    if page_always and not any(t.channel == "page" and event in t.events for t in targets):
        targets = (*targets, Target("page", None, (event,)))
    return _enqueue(
        conn,
        event_type=event,
        tenant_id=task.tenant_id,
        user_id=task.requested_by,
        targets=targets,
        data=task_event_data(task),
        task=task,
        schedule_id=task.schedule_id,
    )


def enqueue_schedule_paused(
    conn: Connection,
    *,
    schedule_id: int,
    tenant_id: str,
    owner: str,
    name: str,
    reason: str,
    notify_json: str | None,
    reason_code: str | None = None,
    permission: str | None = None,
) -> str:
    """Write the ``schedule.paused`` rows of a schedule that paused itself (the
    scheduler calls this in the transaction that pauses it).

    Args:
        notify_json: the schedule's notify list (None: the owner's defaults, else page).
        reason_code: the code of the reason (``data.reasonCode``: ``PERMISSION_DENIED``
            or the create's code that the definition fails), so that each language
            words it.
        permission: the permission the owner lacks (``data.permission``).

    Returns:
        The event id.
    """
    data: dict[str, Any] = {"scheduleId": schedule_id, "scheduleName": name, "reason": reason}
    if reason_code is not None:
        data["reasonCode"] = reason_code
    if permission is not None:
        data["permission"] = permission
    targets = _targets(notify_json, _principal(conn, tenant_id, owner))
    return _enqueue(
        conn,
        event_type="schedule.paused",
        tenant_id=tenant_id,
        user_id=owner,
        targets=targets,
        data=data,
        task=None,
        schedule_id=schedule_id,
    )


def mark_expiring(conn: Connection, notice_hours: float, limit: int) -> int:
    """Mark SUCCEEDED tasks whose file expires within ``notice_hours`` (database clock)
    and enqueue their ``export.expiring`` event, each at most once: the conditional
    UPDATE on ``expiry_notified_at IS NULL`` lets one caller win.

    Returns:
        How many tasks were marked.
    """
    due = [
        r[0]
        for r in conn.execute(
            select(T.c.id)
            .where(
                T.c.status == TaskStatus.SUCCEEDED.value,
                T.c.expiry_notified_at.is_(None),
                T.c.expires_at <= db_now_plus(notice_hours * 3600),
                T.c.expires_at > db_now(),
            )
            .order_by(T.c.expires_at)
            .limit(limit)
        )
    ]
    marked = 0
    for task_id in due:
        won = conn.execute(
            update(T)
            .where(T.c.id == task_id, T.c.expiry_notified_at.is_(None))
            .values(expiry_notified_at=db_now())
        ).rowcount
        if won == 1:
            enqueue_task_event(conn, task_id, "export.expiring")
            marked += 1
    return marked


# ------------------------------------------------------------------ delivery


def due_notifications(conn: Connection, limit: int) -> list[tuple[int, str, str]]:
    """``(id, channel, target)`` of PENDING rows whose ``next_retry_at`` has come,
    oldest first."""
    return [
        (int(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute(
            select(N.c.id, N.c.channel, N.c.target)
            .where(N.c.status == NotificationStatus.PENDING.value, N.c.next_retry_at <= db_now())
            .order_by(N.c.next_retry_at, N.c.id)
            .limit(limit)
        )
    ]


def read_notification(conn: Connection, row_id: int) -> Notification | None:
    """The notification row ``row_id``, or None."""
    row = conn.execute(select(N).where(N.c.id == row_id)).mappings().first()
    return None if row is None else Notification.from_row(row)


def claim_notification(
    conn: Connection, row_id: int, owner: str, lease_seconds: float
) -> Notification | None:
    """PENDING (due) -> CLAIMED with a lease, ``attempt_count + 1``
    (:func:`~export_center.repository.leases.claim_due`); None when taken."""
    if not leases.claim_due(conn, N, row_id, owner, lease_seconds):
        return None
    return read_notification(conn, row_id)


def _held(row_id: int, owner: str) -> Any:
    return leases.held(N, row_id, owner)


def record_delivery_attempt(
    conn: Connection,
    row: Notification,
    *,
    status_code: int | None,
    error: str | None,
    duration_ms: int,
) -> None:
    """Append the delivery attempt ``row.attempt_count`` of a notification."""
    conn.execute(
        insert(D).values(
            notification_id=row.id,
            attempt_no=row.attempt_count,
            attempted_at=db_now(),
            status_code=status_code,
            error=error[:1000] if error else None,
            duration_ms=duration_ms,
            manual=False,
        )
    )


def mark_notification_sent(
    conn: Connection, row_id: int, owner: str, status_code: int | None
) -> bool:
    """CLAIMED -> SENT for the row this notifier holds; False if its lease was lost."""
    return (
        conn.execute(
            update(N)
            .where(_held(row_id, owner))
            .values(
                status=NotificationStatus.SENT.value,
                lease_owner=None,
                lease_until=None,
                sent_at=db_now(),
                last_status_code=status_code,
                last_error=None,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


def notification_failed(
    conn: Connection,
    row_id: int,
    owner: str,
    *,
    delay_seconds: float,
    max_age_hours: float,
    status_code: int | None,
    error: str,
    retry: bool = True,
) -> NotificationStatus | None:
    """CLAIMED -> PENDING after ``delay_seconds``, or DEAD when ``retry`` is False or
    the row is older than ``max_age_hours`` (database clock).

    Returns:
        PENDING or DEAD, or None when this notifier no longer held the row.
    """
    common = {
        "lease_owner": None,
        "lease_until": None,
        "last_status_code": status_code,
        "last_error": error[:1000],
        "updated_at": db_now(),
    }
    if retry:
        young = N.c.created_at > db_now_plus(-max_age_hours * 3600)
        again = conn.execute(
            update(N)
            .where(_held(row_id, owner), young)
            .values(
                status=NotificationStatus.PENDING.value,
                next_retry_at=db_now_plus(delay_seconds),
                **common,
            )
        ).rowcount
        if again == 1:
            return NotificationStatus.PENDING
    dead = conn.execute(
        update(N)
        .where(_held(row_id, owner))
        .values(status=NotificationStatus.DEAD.value, dead_at=db_now(), **common)
    ).rowcount
    return NotificationStatus.DEAD if dead == 1 else None


def mark_notification_dropped(conn: Connection, row_id: int, owner: str, error: str) -> bool:
    """CLAIMED -> DROPPED: the target was switched off or deleted on purpose; False when
    this notifier no longer held the row."""
    values = {**leases.unclaimed(NotificationStatus.DROPPED.value), "last_error": error[:1000]}
    return conn.execute(update(N).where(_held(row_id, owner)).values(**values)).rowcount == 1


def mark_notification_dead(conn: Connection, row_id: int, owner: str, error: str) -> bool:
    """CLAIMED -> DEAD at once (a target that can never be reached)."""
    return (
        notification_failed(
            conn,
            row_id,
            owner,
            delay_seconds=0,
            max_age_hours=0,
            status_code=None,
            error=error,
            retry=False,
        )
        == NotificationStatus.DEAD
    )


def release_expired_notification_claims(conn: Connection) -> int:
    """CLAIMED rows whose notifier lease ran out go back to PENDING, due now (a crash
    between send and mark sends again with the same event id)."""
    return leases.release_expired(conn, N)


def redeliver_notification(conn: Connection, row_id: int) -> bool:
    """SENT, DEAD or DROPPED -> PENDING, due now (redelivery by hand). The row keeps its
    ``created_at`` (the event's time): one past ``max_age_hours`` gets one try, and is
    dead again if that fails."""
    return (
        conn.execute(
            update(N)
            .where(
                N.c.id == row_id,
                N.c.status.in_(
                    [
                        NotificationStatus.SENT.value,
                        NotificationStatus.DEAD.value,
                        NotificationStatus.DROPPED.value,
                    ]
                ),
            )
            .values(
                status=NotificationStatus.PENDING.value,
                next_retry_at=db_now(),
                dead_at=None,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )
