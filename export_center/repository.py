"""Every SQL statement that creates, claims, renews, commits, retries or recovers.

All of it compares and computes times with the database clock (:func:`db.db_now`,
:func:`db.db_now_plus`), never the process clock (seed 002 §8.6). Every write that
belongs to one execution attempt names ``dispatch_version`` and ``lease_owner``; an
UPDATE that touches no row means the attempt lost its lease (DESIGN.md "Task states").

The functions take an open :class:`sqlalchemy.Connection` inside a transaction
(``engine.begin()``) unless they say otherwise, so callers can group them.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson
from sqlalchemy import Connection, Table, and_, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError

from export_center.access import Scope
from export_center.db import db_now, db_now_plus
from export_center.ids import new_event_id, new_task_no, new_trace_id
from export_center.models import (
    GUARD_ROW_ID,
    ExportOutbox,
    ExportRequestKey,
    ExportTask,
    ExportTaskGuard,
)
from export_center.states import OutboxStatus, Phase, TaskStatus

__all__ = [
    "COMMAND_SCHEMA_VERSION",
    "CreateLimits",
    "NewTask",
    "OUTBOX_BACKOFF_SECONDS",
    "TaskRow",
    "canonical_parameters",
    "claim_outbox_row",
    "claim_task",
    "commit_success",
    "create_task",
    "due_outbox_ids",
    "finish_cancelled",
    "insert_outbox",
    "mark_outbox_sent",
    "outbox_send_failed",
    "outbox_backoff",
    "read_task",
    "read_task_by_no",
    "record_failure",
    "renew_lease",
    "update_progress",
]

T = cast(Table, ExportTask.__table__)
O = cast(Table, ExportOutbox.__table__)  # noqa: E741
G = cast(Table, ExportTaskGuard.__table__)
K = cast(Table, ExportRequestKey.__table__)

#: Version of the command payload and of the ``schemaVersion`` message property.
COMMAND_SCHEMA_VERSION = 1
#: Outbox send backoff (seed 002 §7.4): 5 s, 15 s, 1 min, 5 min, then 15 min forever.
OUTBOX_BACKOFF_SECONDS = (5.0, 15.0, 60.0, 300.0, 900.0)

TaskRow = Mapping[str, Any]


def _first(result: Any) -> TaskRow | None:
    """The first row of a result as a mapping, or None (typed for the callers)."""
    return cast("TaskRow | None", result.mappings().first())


def _rows(result: Any) -> list[TaskRow]:
    """Every row of a result as mappings."""
    return cast("list[TaskRow]", list(result.mappings()))


def canonical_parameters(parameters: Mapping[str, Any]) -> tuple[str, str]:
    """Normalize parameters to sorted-key JSON and hash it.

    Returns:
        ``(json_text, sha256_hex)``; equal parameters give equal text whatever the
        key order (DESIGN.md: ``parameters_json`` normalized with sorted keys).
    """
    text = orjson.dumps(parameters, option=orjson.OPT_SORT_KEYS).decode()
    return text, hashlib.sha256(text.encode()).hexdigest()


def outbox_backoff(attempt_count: int, schedule: Sequence[float] = OUTBOX_BACKOFF_SECONDS) -> float:
    """Seconds to wait after the ``attempt_count``-th failed send (1-based; 002 §7.4)."""
    index = max(attempt_count, 1) - 1
    return float(schedule[min(index, len(schedule) - 1)])


@dataclass(frozen=True, slots=True)
class NewTask:
    """What a create request asks for, after validation."""

    export_type: str
    format: str
    task_name: str
    parameters: Mapping[str, Any]
    tenant_id: str
    app_code: str
    requested_by: str
    max_attempts: int
    request_id: str | None = None
    time_zone: str = "UTC"


@dataclass(frozen=True, slots=True)
class CreateLimits:
    """Creation guard limits (seed 002 §14)."""

    duplicate_window_seconds: float = 60.0
    max_active_per_user: int = 3
    max_active_per_type: int = 5


@dataclass(frozen=True, slots=True)
class CreateResult:
    """Outcome of :func:`create_task`: the task row and why it was returned."""

    task: TaskRow
    created: bool
    reason: str  # "created" | "idempotent" | "key_reused" | "duplicate"


class LimitReached(Exception):
    """An active-task limit refused the create; ``scope`` is ``user`` or ``type``."""

    def __init__(self, scope: str, limit: int):
        super().__init__(scope, limit)
        self.scope = scope
        self.limit = limit


def _lock_guard(conn: Connection) -> None:
    # On MySQL this serializes creators on one row (002 §7.2); on SQLite the
    # BEGIN IMMEDIATE that opened the transaction already holds the write lock.
    stmt = select(G.c.id).where(G.c.id == GUARD_ROW_ID)
    if conn.dialect.name != "sqlite":
        stmt = stmt.with_for_update()
    if conn.execute(stmt).first() is None:
        raise RuntimeError("export_task_guard row GLOBAL_CREATE is missing; run db upgrade")


def _record_key(conn: Connection, new: NewTask, task_id: int) -> None:
    """Remember that ``new.request_id`` was answered with task ``task_id`` (no key: no-op)."""
    if new.request_id is None:
        return
    conn.execute(
        insert(K).values(
            tenant_id=new.tenant_id,
            requested_by=new.requested_by,
            request_key=new.request_id,
            task_id=task_id,
            created_at=db_now(),
        )
    )


def create_task(
    conn: Connection, new: NewTask, *, topic: str, tag: str, limits: CreateLimits
) -> CreateResult:
    """Create a task and its first outbox row, or return the task it duplicates.

    Runs inside the caller's transaction: lock the guard row, then idempotency on
    ``(tenant, requester, request_id)``, then the duplicate window (same requester,
    type, format, normalized parameters and time zone, still active, younger than the
    window), then the active limits, then insert task and outbox (seed 002 §7.2, §14).
    A key is recorded with the task that answered it, created or duplicate alike
    (``export_request_key``), so a retry with the key always gets that task.

    Raises:
        LimitReached: a per-user or per-type active limit is reached.
    """
    _lock_guard(conn)
    params_json, params_hash = canonical_parameters(new.parameters)
    if new.request_id is not None:
        existing = _first(
            conn.execute(
                select(T)
                .join(K, K.c.task_id == T.c.id)
                .where(
                    K.c.tenant_id == new.tenant_id,
                    K.c.requested_by == new.requested_by,
                    K.c.request_key == new.request_id,
                )
            )
        )
        if existing is not None:
            same = (
                existing["export_type"] == new.export_type
                and existing["format"] == new.format
                and existing["parameters_hash"] == params_hash
                and existing["time_zone"] == new.time_zone
            )
            return CreateResult(existing, False, "idempotent" if same else "key_reused")
    active = [TaskStatus.PENDING.value, TaskStatus.RUNNING.value]
    duplicate = _first(
        conn.execute(
            select(T)
            .where(
                T.c.tenant_id == new.tenant_id,
                T.c.requested_by == new.requested_by,
                T.c.export_type == new.export_type,
                T.c.format == new.format,
                T.c.parameters_hash == params_hash,
                T.c.time_zone == new.time_zone,
                T.c.status.in_(active),
                T.c.requested_at > db_now_plus(-limits.duplicate_window_seconds),
            )
            .order_by(T.c.id.desc())
            .limit(1)
        )
    )
    if duplicate is not None:
        _record_key(conn, new, duplicate["id"])
        return CreateResult(duplicate, False, "duplicate")
    per_user = conn.execute(
        select(func.count()).where(
            T.c.tenant_id == new.tenant_id,
            T.c.requested_by == new.requested_by,
            T.c.status.in_(active),
        )
    ).scalar_one()
    if per_user >= limits.max_active_per_user:
        raise LimitReached("user", limits.max_active_per_user)
    per_type = conn.execute(
        select(func.count()).where(T.c.export_type == new.export_type, T.c.status.in_(active))
    ).scalar_one()
    if per_type >= limits.max_active_per_type:
        raise LimitReached("type", limits.max_active_per_type)

    task_no = new_task_no()
    trace_id = new_trace_id()
    result = conn.execute(
        insert(T).values(
            task_no=task_no,
            export_type=new.export_type,
            format=new.format,
            task_name=new.task_name,
            parameters_json=params_json,
            parameters_hash=params_hash,
            request_id=new.request_id,
            tenant_id=new.tenant_id,
            app_code=new.app_code,
            requested_by=new.requested_by,
            status=TaskStatus.PENDING.value,
            phase=Phase.QUEUED.value,
            processed_rows=0,
            dispatch_version=1,
            attempt_count=0,
            max_attempts=new.max_attempts,
            next_retry_at=db_now(),
            cancel_requested=False,
            trace_id=trace_id,
            time_zone=new.time_zone,
            requested_at=db_now(),
            updated_at=db_now(),
        )
    )
    assert result.inserted_primary_key is not None
    task_id = result.inserted_primary_key[0]
    _record_key(conn, new, task_id)
    task = read_task(conn, task_id)
    assert task is not None
    insert_outbox(conn, task, topic=topic, tag=tag)
    return CreateResult(task, True, "created")


def command_payload(task: TaskRow, event_id: str) -> dict[str, Any]:
    """The command message of one dispatch version (seed 002 §6.4): identifiers only."""
    return {
        "schemaVersion": COMMAND_SCHEMA_VERSION,
        "eventId": event_id,
        "taskId": task["task_no"],
        "exportType": task["export_type"],
        "dispatchVersion": int(task["dispatch_version"]),
        "traceId": task["trace_id"],
    }


def insert_outbox(
    conn: Connection,
    task: TaskRow,
    *,
    topic: str,
    tag: str,
    delay_seconds: float = 0.0,
) -> str | None:
    """Insert the outbox row for the task's current ``dispatch_version``.

    ``next_retry_at`` is ``db now + delay_seconds`` and must equal the task's own
    retry time, so the publisher never sends early (seed 002 §9.2 step 4).

    Returns:
        The new ``event_id``, or None when a row for this version already exists
        (the unique key ``(task_id, dispatch_version)`` makes redispatch idempotent).
    """
    event_id = new_event_id()
    payload = orjson.dumps(command_payload(task, event_id)).decode()
    values = {
        "event_id": event_id,
        "task_id": task["id"],
        "dispatch_version": task["dispatch_version"],
        "topic": topic,
        "tag": tag,
        "message_key": task["task_no"],
        "payload_json": payload,
        "status": OutboxStatus.PENDING.value,
        "attempt_count": 0,
        "next_retry_at": db_now_plus(delay_seconds) if delay_seconds else db_now(),
        "created_at": db_now(),
        "updated_at": db_now(),
    }
    if conn.dialect.name == "sqlite":
        stmt = insert(O).values(**values).prefix_with("OR IGNORE")
        return event_id if conn.execute(stmt).rowcount == 1 else None
    nested = conn.begin_nested()
    try:
        conn.execute(insert(O).values(**values))
    except IntegrityError:
        nested.rollback()
        return None
    nested.commit()
    return event_id


def read_task(conn: Connection, task_id: int) -> TaskRow | None:
    """Return the task row by internal id, or None."""
    return _first(conn.execute(select(T).where(T.c.id == task_id)))


def read_task_by_no(conn: Connection, task_no: str) -> TaskRow | None:
    """Return the task row by public id (``exp_...``), or None."""
    return _first(conn.execute(select(T).where(T.c.task_no == task_no)))


# --------------------------------------------------------------------------- outbox


def due_outbox_ids(conn: Connection, limit: int) -> list[int]:
    """Ids of PENDING outbox rows whose ``next_retry_at`` has come, oldest first (002 §7.4)."""
    rows = conn.execute(
        select(O.c.id)
        .where(O.c.status == OutboxStatus.PENDING.value, O.c.next_retry_at <= db_now())
        .order_by(O.c.next_retry_at, O.c.id)
        .limit(limit)
    )
    return [r[0] for r in rows]


def claim_outbox_row(
    conn: Connection, row_id: int, owner: str, lease_seconds: float
) -> Mapping[str, Any] | None:
    """Claim one due outbox row with a lease (conditional UPDATE; 0 rows = taken).

    Returns:
        The claimed row, or None when another publisher got it first.
    """
    claimed = conn.execute(
        update(O)
        .where(
            O.c.id == row_id,
            O.c.status == OutboxStatus.PENDING.value,
            O.c.next_retry_at <= db_now(),
        )
        .values(
            status=OutboxStatus.CLAIMED.value,
            lease_owner=owner,
            lease_until=db_now_plus(lease_seconds),
            attempt_count=O.c.attempt_count + 1,
            updated_at=db_now(),
        )
    ).rowcount
    if claimed != 1:
        return None
    return _first(conn.execute(select(O).where(O.c.id == row_id)))


def _held(row_id: int, owner: str) -> Any:
    """The outbox row this publisher claimed and still holds."""
    return and_(
        O.c.id == row_id, O.c.status == OutboxStatus.CLAIMED.value, O.c.lease_owner == owner
    )


def mark_outbox_sent(conn: Connection, row_id: int, owner: str) -> bool:
    """CLAIMED -> SENT for the row this publisher holds; False if its lease was lost."""
    return (
        conn.execute(
            update(O)
            .where(_held(row_id, owner))
            .values(
                status=OutboxStatus.SENT.value,
                sent_at=db_now(),
                lease_owner=None,
                lease_until=None,
                last_error=None,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


def outbox_send_failed(
    conn: Connection,
    row_id: int,
    owner: str,
    attempt_count: int,
    error: str,
    schedule: Sequence[float] = OUTBOX_BACKOFF_SECONDS,
) -> bool:
    """CLAIMED -> PENDING with the backoff of ``attempt_count``; never gives up (002 §7.4)."""
    return (
        conn.execute(
            update(O)
            .where(_held(row_id, owner))
            .values(
                status=OutboxStatus.PENDING.value,
                next_retry_at=db_now_plus(outbox_backoff(attempt_count, schedule)),
                lease_owner=None,
                lease_until=None,
                last_error=error[:1000],
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


# --------------------------------------------------------------------------- execution


def _attempt(task_id: int, version: int, owner: str) -> Any:
    return and_(
        T.c.id == task_id,
        T.c.status == TaskStatus.RUNNING.value,
        T.c.dispatch_version == version,
        T.c.lease_owner == owner,
    )


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
    """PENDING -> RUNNING for this version when its retry time has come (002 §8.2).

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
    """Extend the lease while the deadline has not passed (002 §8.3, §8.3.1).

    Returns:
        ``(renewed, cancel_requested)``. ``renewed`` is False when the attempt lost its
        lease, its version changed or ``execution_deadline_at`` passed.
    """
    renewed = (
        conn.execute(
            update(T)
            .where(_attempt(task_id, version, owner), T.c.execution_deadline_at > db_now())
            .values(
                lease_until=db_now_plus(lease_seconds),
                last_heartbeat_at=db_now(),
            )
        ).rowcount
        == 1
    )
    cancel = conn.execute(select(T.c.cancel_requested).where(T.c.id == task_id)).scalar()
    return renewed, bool(cancel)


def retention_passed(conn: Connection, task_id: int) -> bool:
    """True when the task's file is past ``expires_at`` by the database clock."""
    return bool(conn.execute(select(T.c.expires_at <= db_now()).where(T.c.id == task_id)).scalar())


def deadline_passed(conn: Connection, task_id: int) -> bool:
    """True when the task's ``execution_deadline_at`` is at or before db now."""
    row = conn.execute(
        select(T.c.execution_deadline_at <= db_now()).where(T.c.id == task_id)
    ).scalar()
    return bool(row)


def update_progress(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    *,
    processed: int,
    total: int | None,
    phase: Phase,
) -> bool:
    """Write progress of the running attempt; False when the attempt lost its lease."""
    values: dict[str, Any] = {"processed_rows": processed, "phase": phase.value}
    if total is not None:
        values["total_rows"] = total
    return (
        conn.execute(update(T).where(_attempt(task_id, version, owner)).values(**values)).rowcount
        == 1
    )


@dataclass(frozen=True, slots=True)
class StoredFile:
    """The file an attempt produced."""

    object_key: str
    file_name: str
    content_type: str
    size_bytes: int
    row_count: int
    warning: str | None = None


def commit_success(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    stored: StoredFile,
    *,
    retention_seconds: float,
) -> bool:
    """RUNNING -> SUCCEEDED for this attempt, while its deadline holds (002 §8.4).

    Returns:
        False when the UPDATE touched no row: the caller must delete the file.
    """
    return (
        conn.execute(
            update(T)
            .where(_attempt(task_id, version, owner), T.c.execution_deadline_at > db_now())
            .values(
                status=TaskStatus.SUCCEEDED.value,
                phase=Phase.STORE.value,
                object_key=stored.object_key,
                file_name=stored.file_name,
                content_type=stored.content_type,
                size_bytes=stored.size_bytes,
                row_count=stored.row_count,
                warning_message=stored.warning,
                processed_rows=stored.row_count,
                total_rows=stored.row_count,
                completed_at=db_now(),
                expires_at=db_now_plus(retention_seconds),
                lease_owner=None,
                lease_until=None,
                failure_code=None,
                failure_message=None,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


def _new_attempt(
    conn: Connection,
    task_id: int,
    where: Any,
    *,
    topic: str,
    tag: str,
    delay: float = 0.0,
    **values: Any,
) -> TaskRow | None:
    """End an attempt by starting the next one: PENDING with ``dispatch_version + 1``, due
    after ``delay`` seconds, progress and lease cleared, and a new outbox row with the same
    ``next_retry_at`` (002 §3 principle 5: only an ended attempt grows the version).

    Returns:
        The requeued task, or None when ``where`` matched no row.
    """
    changed = conn.execute(
        update(T)
        .where(where)
        .values(
            status=TaskStatus.PENDING.value,
            phase=Phase.QUEUED.value,
            dispatch_version=T.c.dispatch_version + 1,
            next_retry_at=db_now_plus(delay) if delay else db_now(),
            processed_rows=0,
            total_rows=None,
            lease_owner=None,
            lease_until=None,
            object_key=None,
            updated_at=db_now(),
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
        .where(O.c.task_id == task_id, O.c.dispatch_version == task["dispatch_version"])
        .values(next_retry_at=task["next_retry_at"])
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
    backoff_seconds: list[float] | tuple[float, ...],
    jitter: float,
    topic: str,
    tag: str,
) -> str | None:
    """End a failed attempt: FAILED, or PENDING with version + 1 and backoff (002 §9.2).

    A transient failure with attempts left goes back to PENDING with
    ``next_retry_at = db now + backoff`` (the n-th entry of ``backoff_seconds``, last
    entry repeated, ±``jitter``), ``dispatch_version + 1`` and a new outbox row with
    the same ``next_retry_at``. Otherwise the task is FAILED. Both keep the message.

    Returns:
        ``"retry"``, ``"failed"``, or None when the attempt had lost its lease.
    """
    task = _first(
        conn.execute(
            select(T).where(_attempt(task_id, version, owner)).with_for_update()
            if conn.dialect.name != "sqlite"
            else select(T).where(_attempt(task_id, version, owner))
        )
    )
    if task is None:
        return None
    failure = {"failure_code": code[:64], "failure_message": message[:1000]}
    if retry and task["attempt_count"] < task["max_attempts"]:
        index = min(task["attempt_count"] - 1, len(backoff_seconds) - 1)
        delay = float(backoff_seconds[max(index, 0)]) * (1 + random.uniform(-jitter, jitter))
        _new_attempt(
            conn,
            task_id,
            _attempt(task_id, version, owner),
            topic=topic,
            tag=tag,
            delay=delay,
            **failure,
        )
        return "retry"
    conn.execute(
        update(T)
        .where(_attempt(task_id, version, owner))
        .values(
            status=TaskStatus.FAILED.value,
            completed_at=db_now(),
            lease_owner=None,
            lease_until=None,
            object_key=None,
            updated_at=db_now(),
            **failure,
        )
    )
    return "failed"


def release_for_shutdown(
    conn: Connection, task_id: int, version: int, owner: str, *, topic: str, tag: str
) -> bool:
    """Hand a running attempt back on graceful shutdown: PENDING, due now, version + 1,
    and the attempt not counted (the process stopped, the export did not fail).

    Returns:
        False when the attempt had already lost its lease.
    """
    released = _new_attempt(
        conn,
        task_id,
        _attempt(task_id, version, owner),
        topic=topic,
        tag=tag,
        attempt_count=T.c.attempt_count - 1,
    )
    return released is not None


def finish_cancelled(conn: Connection, task_id: int, version: int, owner: str) -> bool:
    """RUNNING -> CANCELLED for this attempt after the worker stopped (cancel requested)."""
    return (
        conn.execute(
            update(T)
            .where(_attempt(task_id, version, owner))
            .values(
                status=TaskStatus.CANCELLED.value,
                completed_at=db_now(),
                lease_owner=None,
                lease_until=None,
                object_key=None,
                failure_code="CANCELLED",
                failure_message="cancelled by the user",
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


# --------------------------------------------------------------------------- API reads


def list_tasks(
    conn: Connection,
    *,
    scope: Scope,
    statuses: Sequence[str] | None,
    limit: int,
    before_id: int | None,
    export_types: Sequence[str] | None = None,
) -> list[TaskRow]:
    """Tasks visible in ``scope`` (tenant and app always; the owner unless the scope is
    the whole tenant), newest first, keyset paged by ``id < before_id``. The identity
    columns compare byte for byte (binary collation), as :func:`access.in_scope` does."""
    conds = [T.c.tenant_id == scope.tenant_id, T.c.app_code == scope.app_code]
    if scope.owner is not None:
        conds.append(T.c.requested_by == scope.owner)
    if statuses:
        conds.append(T.c.status.in_(list(statuses)))
    if export_types:
        conds.append(T.c.export_type.in_(list(export_types)))
    if before_id is not None:
        conds.append(T.c.id < before_id)
    return _rows(conn.execute(select(T).where(*conds).order_by(T.c.id.desc()).limit(limit)))


def active_tasks(
    conn: Connection,
    *,
    tenant_id: str | None = None,
    requested_by: str | None = None,
    export_type: str | None = None,
    limit: int = 100,
) -> list[TaskRow]:
    """Queued and running tasks of one requester (with ``tenant_id``) or of one export
    type, oldest first: what an active-task limit counts."""
    conds: list[Any] = [T.c.status.in_([TaskStatus.PENDING.value, TaskStatus.RUNNING.value])]
    if tenant_id is not None:
        conds.append(T.c.tenant_id == tenant_id)
    if requested_by is not None:
        conds.append(T.c.requested_by == requested_by)
    if export_type is not None:
        conds.append(T.c.export_type == export_type)
    return _rows(conn.execute(select(T).where(*conds).order_by(T.c.id).limit(limit)))


def request_cancel(conn: Connection, task_id: int) -> str | None:
    """Cancel a PENDING task at once, or flag a RUNNING one (DESIGN.md cancel rule).

    Returns:
        The resulting status (``CANCELLED`` or ``RUNNING`` with the flag set), or None
        when the task is in a state that cannot be cancelled.
    """
    pending = conn.execute(
        update(T)
        .where(T.c.id == task_id, T.c.status == TaskStatus.PENDING.value)
        .values(
            status=TaskStatus.CANCELLED.value,
            cancel_requested=True,
            completed_at=db_now(),
            failure_code="CANCELLED",
            failure_message="cancelled by the user",
            updated_at=db_now(),
        )
    ).rowcount
    if pending:
        return TaskStatus.CANCELLED.value
    running = conn.execute(
        update(T)
        .where(T.c.id == task_id, T.c.status == TaskStatus.RUNNING.value)
        .values(cancel_requested=True, updated_at=db_now())
    ).rowcount
    return TaskStatus.RUNNING.value if running else None


def manual_retry(conn: Connection, task_id: int, *, topic: str, tag: str) -> TaskRow | None:
    """FAILED -> PENDING with version + 1, counters reset and a new outbox row (002 §9.3).

    Returns:
        The updated task, or None when it was not FAILED. The caller deletes the old
        file (its key is read before this call).
    """
    return _new_attempt(
        conn,
        task_id,
        and_(T.c.id == task_id, T.c.status == TaskStatus.FAILED.value),
        topic=topic,
        tag=tag,
        attempt_count=0,
        failure_code=None,
        failure_message=None,
        warning_message=None,
        started_at=None,
        completed_at=None,
        cancel_requested=False,
    )


def outbox_rows(conn: Connection, task_id: int) -> list[TaskRow]:
    """All outbox rows of a task, oldest version first (tests and the admin view)."""
    return _rows(
        conn.execute(select(O).where(O.c.task_id == task_id).order_by(O.c.dispatch_version))
    )


# --------------------------------------------------------------------------- reconciler


def tasks_missing_outbox(conn: Connection, grace_seconds: float, limit: int) -> list[TaskRow]:
    """PENDING tasks past retry time + grace with no outbox row for their version (002 §8.5-1A).

    A QUARANTINED row also counts as a row, so a quarantined version is never redispatched.
    """
    missing = ~(
        select(literal(1))
        .where(O.c.task_id == T.c.id, O.c.dispatch_version == T.c.dispatch_version)
        .exists()
    )
    return _rows(
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
    """SENT rows older than the stale window whose task still waits in PENDING (002 §8.5-1B)."""
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


def resend_outbox_row(conn: Connection, row_id: int) -> bool:
    """SENT -> PENDING (due now) for the same version: the command is sent again."""
    return (
        conn.execute(
            update(O)
            .where(O.c.id == row_id, O.c.status == OutboxStatus.SENT.value)
            .values(
                status=OutboxStatus.PENDING.value,
                next_retry_at=db_now(),
                lease_owner=None,
                lease_until=None,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


def _tasks_due(conn: Connection, status: TaskStatus, column: Any, limit: int) -> list[TaskRow]:
    """Tasks in ``status`` whose time ``column`` has passed by the database clock, oldest first."""
    return _rows(
        conn.execute(
            select(T)
            .where(T.c.status == status.value, column <= db_now())
            .order_by(column)
            .limit(limit)
        )
    )


def expired_running_tasks(conn: Connection, limit: int) -> list[TaskRow]:
    """RUNNING tasks whose lease ran out by the database clock (002 §8.5-2)."""
    return _tasks_due(conn, TaskStatus.RUNNING, T.c.lease_until, limit)


def recover_expired_lease(conn: Connection, task: TaskRow, *, topic: str, tag: str) -> str | None:
    """End an attempt whose worker stopped renewing (002 §8.5-2).

    Cancel requested -> CANCELLED; attempts left -> PENDING with ``dispatch_version + 1``,
    due now, and a new outbox row; otherwise FAILED (``WORKER_LOST``). The UPDATE names
    the version and requires the lease to be expired still, so a live attempt is never
    touched.

    Returns:
        ``cancelled``, ``retry``, ``failed``, or None when the task changed meanwhile.
    """
    expired = and_(
        T.c.id == task["id"],
        T.c.status == TaskStatus.RUNNING.value,
        T.c.dispatch_version == task["dispatch_version"],
        T.c.lease_until <= db_now(),
    )
    common = {"lease_owner": None, "lease_until": None, "object_key": None, "updated_at": db_now()}
    if task["cancel_requested"]:
        done = conn.execute(
            update(T)
            .where(expired)
            .values(
                status=TaskStatus.CANCELLED.value,
                completed_at=db_now(),
                failure_code="CANCELLED",
                failure_message="cancelled by the user",
                **common,
            )
        ).rowcount
        return "cancelled" if done else None
    attempt = task["attempt_count"]
    if attempt < task["max_attempts"]:
        requeued = _new_attempt(
            conn,
            task["id"],
            expired,
            topic=topic,
            tag=tag,
            failure_code="WORKER_LOST",
            failure_message=(
                f"{task['phase']}: the worker stopped renewing its lease during attempt "
                f"{attempt}; retrying"
            ),
        )
        return "retry" if requeued else None
    done = conn.execute(
        update(T)
        .where(expired)
        .values(
            status=TaskStatus.FAILED.value,
            completed_at=db_now(),
            failure_code="WORKER_LOST",
            failure_message=(
                f"{task['phase']}: the worker stopped renewing its lease and all "
                f"{task['max_attempts']} attempts are used"
            ),
            **common,
        )
    ).rowcount
    return "failed" if done else None


def release_expired_outbox_claims(conn: Connection) -> int:
    """CLAIMED rows whose publisher lease ran out go back to PENDING, due now (002 §8.5-3)."""
    return int(
        conn.execute(
            update(O)
            .where(O.c.status == OutboxStatus.CLAIMED.value, O.c.lease_until <= db_now())
            .values(
                status=OutboxStatus.PENDING.value,
                next_retry_at=db_now(),
                lease_owner=None,
                lease_until=None,
                updated_at=db_now(),
            )
        ).rowcount
    )


def tasks_past_retention(conn: Connection, limit: int) -> list[TaskRow]:
    """SUCCEEDED tasks whose ``expires_at`` has passed (002 §8.5-4, §15)."""
    return _tasks_due(conn, TaskStatus.SUCCEEDED, T.c.expires_at, limit)


def mark_expired(conn: Connection, task_id: int, object_key: str | None) -> bool:
    """SUCCEEDED -> EXPIRED once its file is deleted (only if the file is still the same)."""
    return (
        conn.execute(
            update(T)
            .where(
                T.c.id == task_id,
                T.c.status == TaskStatus.SUCCEEDED.value,
                T.c.object_key == object_key,
            )
            .values(status=TaskStatus.EXPIRED.value, phase=Phase.STORE.value, updated_at=db_now())
        ).rowcount
        == 1
    )


def task_file_states(conn: Connection, task_nos: list[str]) -> dict[str, tuple[str, str | None]]:
    """``{task_no: (status, object_key)}`` for the orphan scan."""
    if not task_nos:
        return {}
    rows = conn.execute(
        select(T.c.task_no, T.c.status, T.c.object_key).where(T.c.task_no.in_(task_nos))
    )
    return {r[0]: (r[1], r[2]) for r in rows}


def purge_sent_outbox(conn: Connection, older_than_days: float, limit: int) -> int:
    """Delete at most ``limit`` SENT rows older than ``older_than_days`` (002 §15)."""
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


# --------------------------------------------------------------------------- dead letters

QUARANTINE_MESSAGE = "command message corrupted; create the export again"


class QuarantineMismatch(Exception):
    """An update of the quarantine transaction did not touch exactly one row."""


def quarantine(conn: Connection, *, event_id: str, task_no: str, version: int, reason: str) -> str:
    """Quarantine a dead-lettered command and fail its task, in one transaction (002 §9.4.2).

    The outbox row (same ``event_id``, task and version; SENT, PENDING or CLAIMED) becomes
    QUARANTINED, which stops the reconciler from sending it again; the task (same
    version, PENDING) becomes FAILED with a message a person can act on.

    Returns:
        ``quarantined``; or ``stale`` when the message no longer matches the current
        attempt (nothing is changed: the caller logs it for audit and acknowledges).

    Raises:
        QuarantineMismatch: an UPDATE touched a number of rows other than one (the
            caller's transaction must roll back and the message stay unacknowledged).
    """
    task = read_task_by_no(conn, task_no)
    if task is None or task["dispatch_version"] != version or task["status"] != TaskStatus.PENDING:
        return "stale"
    row = _first(conn.execute(select(O).where(O.c.event_id == event_id)))
    if row is None or row["task_id"] != task["id"] or row["dispatch_version"] != version:
        return "stale"
    quarantined = conn.execute(
        update(O)
        .where(
            O.c.event_id == event_id,
            O.c.task_id == task["id"],
            O.c.dispatch_version == version,
            O.c.status.in_(
                [OutboxStatus.SENT.value, OutboxStatus.PENDING.value, OutboxStatus.CLAIMED.value]
            ),
        )
        .values(
            status=OutboxStatus.QUARANTINED.value,
            last_error=f"quarantined from the dead-letter queue: {reason}"[:1000],
            lease_owner=None,
            lease_until=None,
            updated_at=db_now(),
        )
    ).rowcount
    failed = conn.execute(
        update(T)
        .where(
            T.c.id == task["id"],
            T.c.dispatch_version == version,
            T.c.status == TaskStatus.PENDING.value,
        )
        .values(
            status=TaskStatus.FAILED.value,
            failure_code="COMMAND_CORRUPTED",
            failure_message=QUARANTINE_MESSAGE,
            completed_at=db_now(),
            lease_owner=None,
            lease_until=None,
            updated_at=db_now(),
        )
    ).rowcount
    if quarantined != 1 or failed != 1:
        raise QuarantineMismatch(f"outbox rows {quarantined}, task rows {failed}")
    return "quarantined"
