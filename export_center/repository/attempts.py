"""One execution attempt's writes: claim, lease renewal, progress, success, failure,
hand-back and cancel.

An attempt is dispatch version V of a task, run by one lease owner. Every write it makes
is a conditional UPDATE naming the task, ``status = RUNNING``, the version and the lease
owner (:func:`~export_center.repository._common.held_attempt`); zero rows touched means
the attempt lost its lease and must stop, delete its partial file and write nothing.
``dispatch_version`` grows only when an attempt ends (retry, hand-back, recovery, manual
retry), never when a command is sent again.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, literal, select, update

from export_center.db import db_now, db_now_plus
from export_center.repository._common import (
    cancelled_as_audited,
    failed,
    first_task,
    held_attempt,
    lease_released,
)
from export_center.repository.downloads import record_file_hashes
from export_center.repository.notifications import enqueue_task_event
from export_center.repository.outbox import insert_outbox
from export_center.repository.reads import read_task
from export_center.repository.rows import AttemptEnd, StoredFile, Task
from export_center.repository.tables import OUTBOX as O
from export_center.repository.tables import SHARDS as S
from export_center.repository.tables import TASKS as T
from export_center.states import Phase, TaskStatus

__all__ = [
    "claim_task",
    "commit_success",
    "finish_cancelled",
    "record_failure",
    "release_for_shutdown",
    "renew_lease",
    "start_next_attempt",
    "update_progress",
]


def claim_task(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    *,
    lease_seconds: float,
    max_duration_seconds: float,
    object_key: str | None = None,
) -> bool:
    """PENDING -> RUNNING for this version when its retry time has come and no cancel
    was asked for.

    Also sets the lease, the execution deadline, ``attempt_count + 1`` and clears the
    last attempt's progress and error. ``object_key`` is the key this attempt will write
    (its temporary object while it runs): recorded at claim, so that whoever recovers
    the attempt after its worker died can delete the partial file at once.

    Returns:
        True if this caller now owns the attempt; False if the UPDATE touched no row.
    """
    return (
        conn.execute(
            update(T)
            .where(
                T.c.id == task_id,
                T.c.dispatch_version == version,
                T.c.status == TaskStatus.PENDING.value,
                T.c.next_retry_at <= db_now(),
                T.c.cancel_requested == literal(False),
            )
            .values(
                status=TaskStatus.RUNNING.value,
                phase=Phase.FETCH.value,
                attempt_count=T.c.attempt_count + 1,
                started_at=db_now(),
                lease_owner=owner,
                lease_until=db_now_plus(lease_seconds),
                last_heartbeat_at=db_now(),
                execution_deadline_at=db_now_plus(max_duration_seconds),
                processed_rows=0,
                total_rows=None,
                failure_code=None,
                failure_message=None,
                warning_message=None,
                object_key=object_key,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


def renew_lease(
    conn: Connection, task_id: int, version: int, owner: str, lease_seconds: float
) -> tuple[bool, bool]:
    """Extend the lease by ``lease_seconds`` while the execution deadline has not passed.

    Returns:
        ``(renewed, cancel_requested)``. ``renewed`` is False when the attempt lost its
        lease, its version changed or ``execution_deadline_at`` passed.
    """
    renewed = (
        conn.execute(
            update(T)
            .where(held_attempt(task_id, version, owner), T.c.execution_deadline_at > db_now())
            .values(lease_until=db_now_plus(lease_seconds), last_heartbeat_at=db_now())
        ).rowcount
        == 1
    )
    if renewed:
        # Shards of a distributed attempt that its own threads hold live as long as it.
        conn.execute(
            update(S)
            .where(S.c.task_id == task_id, S.c.lease_owner == owner)
            .values(lease_until=db_now_plus(lease_seconds))
        )
    cancel = conn.execute(select(T.c.cancel_requested).where(T.c.id == task_id)).scalar()
    return renewed, bool(cancel)


def update_progress(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    *,
    processed: int,
    total: int | None,
    phase: Phase,
    shards: tuple[int, int] | None = None,
) -> bool:
    """Write the running attempt's rows done, total estimate and phase (and, for a
    sharded export, ``shards`` = ``(shards done, shards in all)``).

    Returns:
        False when the attempt lost its lease.
    """
    values: dict[str, Any] = {
        "processed_rows": processed,
        "phase": phase.value,
        "updated_at": db_now(),
    }
    if total is not None:
        values["total_rows"] = total
    if shards is not None:
        values["shards_done"], values["shards_total"] = shards
    return (
        conn.execute(
            update(T).where(held_attempt(task_id, version, owner)).values(**values)
        ).rowcount
        == 1
    )


def commit_success(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    stored: StoredFile,
    *,
    retention_seconds: float,
) -> bool:
    """RUNNING -> SUCCEEDED for this attempt, while its deadline holds; the file is kept
    ``retention_seconds`` from now (database clock).

    Returns:
        False when the UPDATE touched no row: the caller must delete the file.
    """
    done = (
        conn.execute(
            update(T)
            .where(held_attempt(task_id, version, owner), T.c.execution_deadline_at > db_now())
            .values(
                **lease_released(),
                status=TaskStatus.SUCCEEDED.value,
                phase=Phase.STORE.value,
                object_key=stored.object_key,
                file_name=stored.file_name,
                content_type=stored.content_type,
                size_bytes=stored.size_bytes,
                row_count=stored.row_count,
                warning_message=stored.warning,
                manifest_json=stored.manifest_json,
                processed_rows=stored.row_count,
                total_rows=stored.row_count,
                completed_at=db_now(),
                expires_at=db_now_plus(retention_seconds),
                failure_code=None,
                failure_message=None,
            )
        ).rowcount
        == 1
    )
    if done:
        enqueue_task_event(conn, task_id, "export.succeeded")
        record_file_hashes(conn, task_id, stored.manifest_json)
    return done


def start_next_attempt(
    conn: Connection,
    task_id: int,
    where: ColumnElement[bool],
    *,
    topic: str,
    tag: str,
    delay: float = 0.0,
    **values: Any,
) -> Task | None:
    """End an attempt by preparing the next one: PENDING with ``dispatch_version + 1``,
    due after ``delay`` seconds, progress, lease and file cleared, and a new outbox row
    with exactly the same ``next_retry_at``. Only an ended attempt grows the version.

    Args:
        where: which task row may be requeued (the attempt's condition).
        values: further columns to set (failure code and message, counters).

    Returns:
        The requeued task, or None when ``where`` matched no row.
    """
    changed = conn.execute(
        update(T)
        .where(where)
        .values(
            **lease_released(),
            status=TaskStatus.PENDING.value,
            phase=Phase.QUEUED.value,
            dispatch_version=T.c.dispatch_version + 1,
            next_retry_at=db_now_plus(delay) if delay else db_now(),
            processed_rows=0,
            total_rows=None,
            object_key=None,
            **values,
        )
    ).rowcount
    if not changed:
        return None
    task = read_task(conn, task_id)
    assert task is not None
    insert_outbox(conn, task, topic=topic, tag=tag)
    # The outbox row's retry time is exactly the task's (two evaluations of the same
    # clock expression may differ by a millisecond), so the publisher never sends early.
    conn.execute(
        update(O)
        .where(O.c.task_id == task_id, O.c.dispatch_version == task.dispatch_version)
        .values(next_retry_at=task.next_retry_at)
    )
    return task


def record_failure(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    *,
    code: str,
    message: str,
    retry: bool,
    backoff_seconds: Sequence[float],
    jitter: float,
    topic: str,
    tag: str,
    min_backoff_seconds: Sequence[float] = (),
) -> AttemptEnd | None:
    """End a failed attempt: FAILED, or PENDING with version + 1 after a backoff.

    A transient failure (``retry``) with attempts left goes back to PENDING with
    ``next_retry_at = db now + backoff`` (the n-th entry of ``backoff_seconds``, the last
    one repeated, at least the n-th entry of ``min_backoff_seconds`` when given, spread by
    ±``jitter``), ``dispatch_version + 1`` and a new outbox row with the same
    ``next_retry_at``. Otherwise the task is FAILED. Both keep the code and the message.

    Args:
        min_backoff_seconds: the least waits for this kind of failure (a full storage
            waits longer than a provider blip); empty: ``backoff_seconds`` alone.

    Returns:
        ``AttemptEnd.RETRY``, ``AttemptEnd.FAILED``, or None when the attempt had lost
        its lease.
    """
    stmt = select(T).where(held_attempt(task_id, version, owner))
    if conn.dialect.name != "sqlite":
        stmt = stmt.with_for_update()
    task = first_task(conn.execute(stmt))
    if task is None:
        return None
    if retry and task.attempt_count < task.max_attempts:
        delay = _nth(backoff_seconds, task.attempt_count)
        if min_backoff_seconds:
            delay = max(delay, _nth(min_backoff_seconds, task.attempt_count))
        delay *= 1 + random.uniform(-jitter, jitter)
        start_next_attempt(
            conn,
            task_id,
            held_attempt(task_id, version, owner),
            topic=topic,
            tag=tag,
            delay=delay,
            failure_code=code[:64],
            failure_message=message[:1000],
        )
        return AttemptEnd.RETRY
    conn.execute(
        update(T).where(held_attempt(task_id, version, owner)).values(**failed(code, message))
    )
    enqueue_task_event(conn, task_id, "export.failed")
    return AttemptEnd.FAILED


def _nth(waits: Sequence[float], attempt: int) -> float:
    """The wait after attempt ``attempt`` (1-based): its entry, the last one repeated."""
    return float(waits[max(min(attempt - 1, len(waits) - 1), 0)])


def release_for_shutdown(
    conn: Connection, task_id: int, version: int, owner: str, *, topic: str, tag: str
) -> bool:
    """Hand a running attempt back: PENDING, due now, version + 1, and the attempt not
    counted (the process stopped, or it could not go on for a reason outside the export:
    the export did not fail).

    Returns:
        False when the attempt had already lost its lease.
    """
    released = start_next_attempt(
        conn,
        task_id,
        held_attempt(task_id, version, owner),
        topic=topic,
        tag=tag,
        attempt_count=T.c.attempt_count - 1,
    )
    return released is not None


def finish_cancelled(conn: Connection, task_id: int, version: int, owner: str) -> bool:
    """RUNNING -> CANCELLED for this attempt once its worker stopped on a cancel request.

    Returns:
        False when the attempt had already lost its lease.
    """
    done = (
        conn.execute(
            update(T)
            .where(held_attempt(task_id, version, owner))
            .values(**cancelled_as_audited(conn, task_id))
        ).rowcount
        == 1
    )
    if done:
        enqueue_task_event(conn, task_id, "export.cancelled")
    return done
