"""The dead-letter disposal: quarantine a poison command and fail its task.

A command the workers could not read ends in the broker's dead-letter queue. Its
properties still name the task, the version and the event. If they match the current
attempt, one transaction marks the outbox row QUARANTINED (the reconciler never sends it
again) and the task FAILED with a sentence a person can act on; otherwise nothing
changes and the message is acknowledged as stale. No message is ever sent again from
the dead-letter queue, so a poison command cannot loop.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from export_center.db import db_now
from export_center.repository._common import failed
from export_center.repository.notifications import enqueue_task_event
from export_center.repository.reads import read_task_by_no
from export_center.repository.rows import OutboxRow, QuarantineOutcome
from export_center.repository.tables import OUTBOX as O
from export_center.repository.tables import TASKS as T
from export_center.states import OutboxStatus, TaskStatus

__all__ = ["QUARANTINE_MESSAGE", "QuarantineMismatch", "quarantine"]

QUARANTINE_MESSAGE = "command message corrupted; create the export again"


class QuarantineMismatch(Exception):
    """An update of the quarantine transaction did not touch exactly one row."""


def quarantine(
    conn: Connection, *, event_id: str, task_no: str, version: int, reason: str
) -> QuarantineOutcome:
    """Quarantine a dead-lettered command and fail its task, in one transaction.

    The outbox row (same ``event_id``, task and version; SENT, PENDING or CLAIMED)
    becomes QUARANTINED; the task (same version, PENDING) becomes FAILED with
    ``COMMAND_CORRUPTED``.

    Returns:
        ``QUARANTINED``; or ``STALE`` when the message no longer matches the current
        attempt (nothing is changed: the caller logs it and acknowledges).

    Raises:
        QuarantineMismatch: an UPDATE touched a number of rows other than one (the
            caller's transaction must roll back and the message stay unacknowledged).
    """
    task = read_task_by_no(conn, task_no)
    if task is None or task.dispatch_version != version or task.status != TaskStatus.PENDING:
        return QuarantineOutcome.STALE
    found = conn.execute(select(O).where(O.c.event_id == event_id)).mappings().first()
    row = None if found is None else OutboxRow.from_row(found)
    if row is None or row.task_id != task.id or row.dispatch_version != version:
        return QuarantineOutcome.STALE
    unsent = [OutboxStatus.SENT.value, OutboxStatus.PENDING.value, OutboxStatus.CLAIMED.value]
    quarantined = conn.execute(
        update(O)
        .where(
            O.c.event_id == event_id,
            O.c.task_id == task.id,
            O.c.dispatch_version == version,
            O.c.status.in_(unsent),
        )
        .values(
            status=OutboxStatus.QUARANTINED.value,
            last_error=f"quarantined from the dead-letter queue: {reason}"[:1000],
            lease_owner=None,
            lease_until=None,
            updated_at=db_now(),
        )
    ).rowcount
    failed_rows = conn.execute(
        update(T)
        .where(
            T.c.id == task.id,
            T.c.dispatch_version == version,
            T.c.status == TaskStatus.PENDING.value,
        )
        .values(**failed("COMMAND_CORRUPTED", QUARANTINE_MESSAGE))
    ).rowcount
    if quarantined != 1 or failed_rows != 1:
        raise QuarantineMismatch(f"outbox rows {quarantined}, task rows {failed_rows}")
    enqueue_task_event(conn, task.id, "export.failed")
    return QuarantineOutcome.QUARANTINED
