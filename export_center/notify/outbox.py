"""The notification outbox, as the rest of the service writes to it.

Every function runs INSIDE the caller's transaction, the one that writes the change it
announces (rule of the design: a side effect that must happen goes through an outbox
written with its cause). The SQL lives in :mod:`export_center.repository.notifications`
(the repository's terminal transitions call it there, so no caller can forget it);
this module is the entry point for the parts outside the repository:

* :func:`schedule_paused`: the scheduler, when a schedule pauses itself;
* :func:`enqueue_task_event`: a task event outside the repository's transitions;
* :func:`mark_expiring`: the ``export.expiring`` pass (the notifier runs it).

Operator routes (``notify.routes``) are settings the repository never sees: the event
gets one ``route`` row that the notifier expands into robot rows (same event id).
"""

from __future__ import annotations

from sqlalchemy import Connection

from export_center.repository.notifications import (
    ROUTE_CHANNEL,
    enqueue_schedule_paused,
    enqueue_task_event,
    mark_expiring,
)

__all__ = ["ROUTE_CHANNEL", "enqueue_task_event", "mark_expiring", "schedule_paused"]


def schedule_paused(
    conn: Connection,
    *,
    schedule_id: int,
    tenant_id: str,
    owner: str,
    name: str,
    reason: str,
    notify_json: str | None = None,
    reason_code: str | None = None,
    permission: str | None = None,
) -> str:
    """Write the ``schedule.paused`` event of a schedule that paused itself.

    Args:
        conn: the scheduler's transaction (the one that sets the schedule PAUSED).
        schedule_id: the schedule's internal id (``data.scheduleId``).
        tenant_id, owner: the schedule's tenant and owner (the page row's reader).
        name: the schedule's name (``data.scheduleName``).
        reason: the sentence saying why (``data.reason``), e.g. the permission lost.
        notify_json: the schedule's stored notify list; None: the owner's defaults,
            else the page.
        reason_code: ``data.reasonCode`` (``PERMISSION_DENIED``, or the code the
            stored definition now fails with), which each language words.
        permission: ``data.permission``, the permission the owner lacks.

    Returns:
        The event id (one per event, the same on every target).
    """
    return enqueue_schedule_paused(
        conn,
        schedule_id=schedule_id,
        tenant_id=tenant_id,
        owner=owner,
        name=name,
        reason=reason,
        notify_json=notify_json,
        reason_code=reason_code,
        permission=permission,
    )
