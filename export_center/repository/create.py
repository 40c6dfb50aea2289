"""Creating a task: the guard rows, idempotency keys, the duplicate window, the limits.

One create is one transaction: the requester's guard row is locked (``SELECT ... FOR
UPDATE`` on MySQL, :mod:`export_center.repository.guards`; on SQLite the ``BEGIN
IMMEDIATE`` write transaction already serializes), then the idempotency key, the
duplicate window, the daily quotas and the per-user limit are checked; the export type's
guard row is locked last for the per-type limit, and the task and its first outbox row
are inserted together (the transactional outbox: no command without its task, no task
without its command). Creates of different requesters share only the type's row, and
only from the per-type count to the commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from sqlalchemy import Connection, func, insert, select

from export_center.db import db_now, db_now_plus
from export_center.ids import new_task_no, new_trace_id
from export_center.models import GUARD_ROW_ID
from export_center.repository._common import first_task
from export_center.repository.approvals import insert_approval
from export_center.repository.guards import lock_scope
from export_center.repository.outbox import insert_outbox
from export_center.repository.reads import read_task
from export_center.repository.rows import (
    CreateLimits,
    CreateReason,
    CreateResult,
    LimitReached,
    NewTask,
)
from export_center.repository.tables import CREATE_GUARD as G
from export_center.repository.tables import REQUEST_KEYS as K
from export_center.repository.tables import TASKS as T
from export_center.states import Phase, TaskStatus

__all__ = ["canonical_parameters", "create_task", "guard_row_exists"]

_ACTIVE = (TaskStatus.PENDING.value, TaskStatus.RUNNING.value)
AWAITING = TaskStatus.AWAITING_APPROVAL


def canonical_parameters(parameters: Mapping[str, Any]) -> tuple[str, str]:
    """Normalize parameters to sorted-key JSON and hash it.

    Returns:
        ``(json_text, sha256_hex)``; equal parameters give equal text whatever the key
        order, so "the same export" can be found by hash.
    """
    text = orjson.dumps(parameters, option=orjson.OPT_SORT_KEYS).decode()
    return text, hashlib.sha256(text.encode()).hexdigest()


def guard_row_exists(conn: Connection) -> bool:
    """True when the ``GLOBAL_CREATE`` row of ``export_task_guard`` is there: the first
    migration writes it, so its absence says the schema was made some other way."""
    return conn.execute(select(G.c.id).where(G.c.id == GUARD_ROW_ID)).first() is not None


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
    conn: Connection,
    new: NewTask,
    *,
    topic: str,
    tag: str,
    limits: CreateLimits,
    check: Callable[[Connection, NewTask], None] | None = None,
) -> CreateResult:
    """Create a task and its first outbox row, or return the task the request names.

    Runs inside the caller's transaction, in this order:

    1. lock the requester's guard row (tenant, requester);
    2. a known idempotency key (tenant, requester, key) returns the task it answered
       before: ``idempotent`` when the export is the same (type, format, normalized
       parameters, time zone, file spec, notify targets), else ``key_reused``;
    3. an active task of the same requester and export (the same six), younger than
       the duplicate window, is returned as ``duplicate`` (and the key, if any, is
       bound to it): a request that asks to tell other people is not a repeat;
    4. ``check`` (the daily quotas, :func:`export_center.quotas.check_create`, which
       locks the tenant's guard row when a tenant quota applies), then the
       per-requester active limit; then the export type's guard row is locked and the
       per-type active limit checked (last: creates of other requesters wait for it
       only from here to the commit);
    5. insert the task, its key and its outbox row (``created``).

    Raises:
        LimitReached: a per-user or per-type active limit is reached.
        Exception: whatever ``check`` raises (nothing is written then).
    """
    lock_scope(conn, "user", new.tenant_id, new.requested_by)
    params_json, params_hash = canonical_parameters(new.parameters)
    if new.request_id is not None:
        existing = first_task(
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
                existing.export_type == new.export_type
                and existing.format == new.format
                and existing.parameters_hash == params_hash
                and existing.time_zone == new.time_zone
                and existing.file_spec_json == new.file_spec_json
                and existing.notify_json == new.notify_json
            )
            reason = CreateReason.IDEMPOTENT if same else CreateReason.KEY_REUSED
            return CreateResult(existing, False, reason)
    duplicate = first_task(
        conn.execute(
            select(T)
            .where(
                T.c.tenant_id == new.tenant_id,
                T.c.requested_by == new.requested_by,
                T.c.export_type == new.export_type,
                T.c.format == new.format,
                T.c.parameters_hash == params_hash,
                T.c.time_zone == new.time_zone,
                (
                    T.c.file_spec_json.is_(None)
                    if new.file_spec_json is None
                    else T.c.file_spec_json == new.file_spec_json
                ),
                (
                    T.c.notify_json.is_(None)
                    if new.notify_json is None
                    else T.c.notify_json == new.notify_json
                ),
                T.c.status.in_((*_ACTIVE, AWAITING.value)),
                T.c.requested_at > db_now_plus(-limits.duplicate_window_seconds),
            )
            .order_by(T.c.id.desc())
            .limit(1)
        )
    )
    if duplicate is not None:
        _record_key(conn, new, duplicate.id)
        return CreateResult(duplicate, False, CreateReason.DUPLICATE)
    if check is not None:
        check(conn, new)
    _check_limits(conn, new, limits)
    result = conn.execute(
        insert(T).values(
            task_no=new_task_no(),
            export_type=new.export_type,
            format=new.format,
            task_name=new.task_name,
            parameters_json=params_json,
            parameters_hash=params_hash,
            request_id=new.request_id,
            tenant_id=new.tenant_id,
            app_code=new.app_code,
            requested_by=new.requested_by,
            status=(TaskStatus.PENDING if new.approval is None else AWAITING).value,
            phase=(Phase.QUEUED if new.approval is None else Phase.APPROVAL).value,
            processed_rows=0,
            dispatch_version=1,
            attempt_count=0,
            max_attempts=new.max_attempts,
            next_retry_at=db_now(),
            cancel_requested=False,
            trace_id=new.trace_id or new_trace_id(),
            time_zone=new.time_zone,
            file_spec_json=new.file_spec_json,
            schedule_id=new.schedule_id,
            notify_json=new.notify_json,
            row_ceiling=new.row_ceiling,
            total_rows=new.estimated_rows,
            requested_at=db_now(),
            updated_at=db_now(),
        )
    )
    assert result.inserted_primary_key is not None
    task_id = int(result.inserted_primary_key[0])
    _record_key(conn, new, task_id)
    task = read_task(conn, task_id)
    assert task is not None
    if new.approval is None:
        insert_outbox(conn, task, topic=topic, tag=tag)
    else:  # no command before approval: the approving transaction writes it
        insert_approval(conn, task, new.approval)
    return CreateResult(task, True, CreateReason.CREATED)


def _check_limits(conn: Connection, new: NewTask, limits: CreateLimits) -> None:
    """Raise :class:`LimitReached` when the requester or the export type has too many
    queued or running tasks; locks the type's guard row before counting its tasks (the
    requester's is held already)."""
    per_user = conn.execute(
        select(func.count()).where(
            T.c.tenant_id == new.tenant_id,
            T.c.requested_by == new.requested_by,
            T.c.status.in_(_ACTIVE),
        )
    ).scalar_one()
    if per_user >= limits.max_active_per_user:
        raise LimitReached("user", limits.max_active_per_user)
    lock_scope(conn, "type", new.export_type)
    per_type = conn.execute(
        select(func.count()).where(T.c.export_type == new.export_type, T.c.status.in_(_ACTIVE))
    ).scalar_one()
    if per_type >= limits.max_active_per_type:
        raise LimitReached("type", limits.max_active_per_type)
