"""The transactional outbox: commands written with the task change, sent by the publisher.

An outbox row is written in the same transaction as the task change it announces, one
per ``(task, dispatch_version)`` (a unique key, so writing it again is a no-op). The
publisher claims due rows with a lease, sends them and marks them SENT; a failed send
goes back to PENDING with a backoff of 5 s, 15 s, 1 min, 5 min, then every 15 min,
forever (sending never gives up; it alerts). The reconciler releases claims whose
publisher died and sends again SENT commands whose task still waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, insert, literal, select, update
from sqlalchemy.exc import IntegrityError

from export_center import commands
from export_center.db import db_now, db_now_plus
from export_center.ids import new_event_id
from export_center.repository import leases
from export_center.repository._common import all_tasks
from export_center.repository.rows import OutboxRow, Task
from export_center.repository.tables import OUTBOX as O
from export_center.repository.tables import TASKS as T
from export_center.states import OutboxStatus, TaskStatus

__all__ = [
    "OUTBOX_BACKOFF_SECONDS",
    "claim_outbox_row",
    "due_outbox_ids",
    "insert_outbox",
    "mark_outbox_sent",
    "outbox_backoff",
    "outbox_rows",
    "outbox_send_failed",
    "purge_sent_outbox",
    "release_expired_outbox_claims",
    "resend_outbox_row",
    "release_outbox_backoff",
    "stale_sent_outbox_ids",
    "tasks_missing_outbox",
]

#: Outbox send backoff: 5 s, 15 s, 1 min, 5 min, then 15 min forever.
OUTBOX_BACKOFF_SECONDS = (5.0, 15.0, 60.0, 300.0, 900.0)


def outbox_backoff(attempt_count: int, schedule: Sequence[float] = OUTBOX_BACKOFF_SECONDS) -> float:
    """Seconds to wait after the ``attempt_count``-th failed send (1-based; the last
    entry of ``schedule`` repeats forever)."""
    index = max(attempt_count, 1) - 1
    return float(schedule[min(index, len(schedule) - 1)])


def _first_row(result: Any) -> OutboxRow | None:
    row = result.mappings().first()
    return None if row is None else OutboxRow.from_row(row)


def insert_outbox(
    conn: Connection,
    task: Task,
    *,
    topic: str,
    tag: str,
    delay_seconds: float = 0.0,
) -> str | None:
    """Insert the outbox row of the task's current ``dispatch_version``.

    ``next_retry_at`` is ``db now + delay_seconds`` and must equal the task's own retry
    time, so the publisher never sends a command before its task may run.

    Returns:
        The new ``event_id``, or None when a row for this version already exists (the
        unique key ``(task_id, dispatch_version)`` makes redispatch idempotent).
    """
    event_id = new_event_id()
    values = {
        "event_id": event_id,
        "task_id": task.id,
        "dispatch_version": task.dispatch_version,
        "topic": topic,
        "tag": tag,
        "message_key": task.task_no,
        "payload_json": commands.encode(
            event_id=event_id,
            task_no=task.task_no,
            export_type=task.export_type,
            dispatch_version=task.dispatch_version,
            trace_id=task.trace_id,
        ),
        "status": OutboxStatus.PENDING.value,
        "attempt_count": 0,
        "next_retry_at": db_now_plus(delay_seconds) if delay_seconds else db_now(),
        "created_at": db_now(),
        "updated_at": db_now(),
    }
    return event_id if insert_outbox_once(conn, values) else None


def insert_outbox_once(conn: Connection, values: dict[str, Any]) -> bool:
    """Insert one outbox row unless its unit exists already.

    The unique key ``(task_id, dispatch_version, unit)`` decides: SQLite skips the row
    (``INSERT OR IGNORE``); MariaDB inserts in a savepoint and rolls only it back on the
    duplicate key, so the caller's transaction goes on either way.

    Returns:
        True when the row was written, False when it existed.
    """
    if conn.dialect.name == "sqlite":
        stmt = insert(O).values(**values).prefix_with("OR IGNORE")
        return bool(conn.execute(stmt).rowcount == 1)
    nested = conn.begin_nested()
    try:
        conn.execute(insert(O).values(**values))
    except IntegrityError:
        nested.rollback()
        return False
    nested.commit()
    return True


def due_outbox_ids(conn: Connection, limit: int) -> list[int]:
    """Ids of PENDING outbox rows whose ``next_retry_at`` has come, oldest first."""
    rows = conn.execute(
        select(O.c.id)
        .where(O.c.status == OutboxStatus.PENDING.value, O.c.next_retry_at <= db_now())
        .order_by(O.c.next_retry_at, O.c.id)
        .limit(limit)
    )
    return [r[0] for r in rows]


def claim_outbox_row(
    conn: Connection, row_id: int, owner: str, lease_seconds: float
) -> OutboxRow | None:
    """Claim one due outbox row with a lease (conditional UPDATE; 0 rows = taken).

    Returns:
        The claimed row, or None when another publisher got it first.
    """
    if not leases.claim_due(conn, O, row_id, owner, lease_seconds):
        return None
    return _first_row(conn.execute(select(O).where(O.c.id == row_id)))


def _held(row_id: int, owner: str) -> ColumnElement[bool]:
    """The outbox row this publisher claimed and still holds."""
    return leases.held(O, row_id, owner)


def _unclaimed(status: OutboxStatus) -> dict[str, Any]:
    """Column values of a row going back to ``status`` without a publisher lease."""
    return leases.unclaimed(status.value)


def mark_outbox_sent(conn: Connection, row_id: int, owner: str) -> bool:
    """CLAIMED -> SENT for the row this publisher holds; False if its lease was lost."""
    values = {**_unclaimed(OutboxStatus.SENT), "sent_at": db_now(), "last_error": None}
    return conn.execute(update(O).where(_held(row_id, owner)).values(**values)).rowcount == 1


def outbox_send_failed(
    conn: Connection,
    row_id: int,
    owner: str,
    attempt_count: int,
    error: str,
    schedule: Sequence[float] = OUTBOX_BACKOFF_SECONDS,
) -> bool:
    """CLAIMED -> PENDING with the backoff of ``attempt_count``; sending never gives up.

    Returns:
        False when this publisher no longer held the row.
    """
    values = {
        **_unclaimed(OutboxStatus.PENDING),
        "next_retry_at": db_now_plus(outbox_backoff(attempt_count, schedule)),
        "last_error": error[:1000],
    }
    return conn.execute(update(O).where(_held(row_id, owner)).values(**values)).rowcount == 1


def release_outbox_backoff(conn: Connection) -> int:
    """Make every backed-off command due now (PENDING rows that failed to send and wait
    for their next try): called when the broker takes messages again after failed
    sends, so an outage ends with the backlog sent at once instead of at each row's
    next try (up to 15 minutes later).

    Returns:
        How many rows became due.
    """
    return int(
        conn.execute(
            update(O)
            .where(
                O.c.status == OutboxStatus.PENDING.value,
                O.c.attempt_count > 0,
                O.c.next_retry_at > db_now(),
            )
            .values(next_retry_at=db_now(), updated_at=db_now())
        ).rowcount
    )


def resend_outbox_row(conn: Connection, row_id: int) -> bool:
    """SENT -> PENDING (due now) for the same version: the command is sent again."""
    values = {**_unclaimed(OutboxStatus.PENDING), "next_retry_at": db_now()}
    return (
        conn.execute(
            update(O)
            .where(O.c.id == row_id, O.c.status == OutboxStatus.SENT.value)
            .values(**values)
        ).rowcount
        == 1
    )


def release_expired_outbox_claims(conn: Connection) -> int:
    """CLAIMED rows whose publisher lease ran out go back to PENDING, due now.

    Returns:
        How many rows were released.
    """
    return leases.release_expired(conn, O)


def tasks_missing_outbox(conn: Connection, grace_seconds: float, limit: int) -> list[Task]:
    """PENDING tasks past their retry time plus ``grace_seconds`` that have no outbox row
    for their version. A QUARANTINED row counts as a row, so a quarantined version is
    never sent again."""
    missing = ~(
        select(literal(1))
        .where(O.c.task_id == T.c.id, O.c.dispatch_version == T.c.dispatch_version)
        .exists()
    )
    return all_tasks(
        conn.execute(
            select(T)
            .where(
                T.c.status == TaskStatus.PENDING.value,
                T.c.next_retry_at <= db_now_plus(-grace_seconds),
                missing,
            )
            .order_by(T.c.id)
            .limit(limit)
        )
    )


def stale_sent_outbox_ids(
    conn: Connection, stale_seconds: float, grace_seconds: float, limit: int
) -> list[int]:
    """SENT rows older than ``stale_seconds`` whose task still waits in PENDING for that
    version, past its retry time plus ``grace_seconds`` (the command was lost)."""
    return [
        r[0]
        for r in conn.execute(
            select(O.c.id)
            .join(T, and_(T.c.id == O.c.task_id, T.c.dispatch_version == O.c.dispatch_version))
            .where(
                O.c.status == OutboxStatus.SENT.value,
                O.c.sent_at <= db_now_plus(-stale_seconds),
                T.c.status == TaskStatus.PENDING.value,
                T.c.next_retry_at <= db_now_plus(-grace_seconds),
            )
            .order_by(O.c.id)
            .limit(limit)
        )
    ]


def purge_sent_outbox(conn: Connection, older_than_days: float, limit: int) -> int:
    """Delete at most ``limit`` SENT rows sent more than ``older_than_days`` ago.

    Returns:
        How many rows were deleted.
    """
    ids = [
        r[0]
        for r in conn.execute(
            select(O.c.id)
            .where(
                O.c.status == OutboxStatus.SENT.value,
                O.c.sent_at <= db_now_plus(-older_than_days * 86400),
            )
            .order_by(O.c.id)
            .limit(limit)
        )
    ]
    if not ids:
        return 0
    return int(conn.execute(O.delete().where(O.c.id.in_(ids))).rowcount)


def outbox_rows(conn: Connection, task_id: int) -> list[OutboxRow]:
    """All outbox rows of a task, oldest version first (operators and tests)."""
    result = conn.execute(select(O).where(O.c.task_id == task_id).order_by(O.c.dispatch_version))
    return [OutboxRow.from_row(row) for row in result.mappings()]
