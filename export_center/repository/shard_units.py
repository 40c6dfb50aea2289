"""Distributed shards: each shard of a running sharded attempt as a unit of work.

A sharded attempt whose shards are distributed (``task.distributed_shards``) keeps the
task's lease (its *coordinator*) and lets any worker of the cluster run its shards. A
shard is claimed like a task, by a conditional UPDATE judged with the database clock:

* **Claim** (:func:`claim_shard`): under the task row's lock (``SELECT ... FOR
  UPDATE``, so claims of one task are serialized and the bound is exact), when the task
  is ``RUNNING`` at the claimed ``dispatch_version`` and not asked to cancel, and fewer
  than ``parallel`` of its shards hold a live lease, the first ``PENDING`` shard whose
  lease is free or expired gets ``lease_owner``, ``lease_until = db now + lease`` and
  ``attempt_count + 1``. ``parallel`` is the registry's, so the bound holds across
  the cluster, not per process.
* **Fence**: every write of a shard's runner (renewal, checkpoint, failure, release)
  names task, dispatch version, shard and lease owner, and runs under a shared lock of
  the task row that it checks is still ``RUNNING`` at that version (zero rows: the
  runner lost the shard and must stop, storing nothing more). Task row first, then the
  shard row: the order of every transaction that touches both, so none deadlocks.
* **Wake-ups** (:func:`insert_shard_wake`): one outbox row per shard to start
  (``unit = shard-<no>.<attempt>``, tag ``EXPORT_SHARD``), sent by the publisher like a
  command; a worker that receives one claims that shard or any other it may.
* **Recovery** (:func:`expired_shard_leases`): the reconciler frees shard leases that
  ran out while the task still runs and writes a new wake-up for them.

The coordinator's own shard threads claim the same way under the task's lease owner;
the task watchdog's renewal extends those shards' leases with the task's
(:func:`renew_owned_shards`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, and_, func, or_, select, update

from export_center import commands
from export_center.db import db_now, db_now_plus
from export_center.ids import new_event_id
from export_center.repository.audit import AuditAction, record_audit
from export_center.repository.outbox import insert_outbox_once
from export_center.repository.reads import read_task
from export_center.repository.rows import Task
from export_center.repository.shards import ShardCheckpoint, ShardStatus, shard_row
from export_center.repository.tables import SHARDS as S
from export_center.repository.tables import TASKS as T
from export_center.states import OutboxStatus, TaskStatus

__all__ = [
    "FAILED",
    "FAILED_RETRY",
    "ExpiredShard",
    "ShardUnit",
    "claim_shard",
    "expired_shard_leases",
    "exports_waiting",
    "fail_shard",
    "free_shard_lease",
    "insert_shard_wake",
    "release_shard",
    "renew_owned_shards",
    "reset_failed_shards",
    "save_unit_checkpoint",
    "shard_board",
    "shard_unit",
]

log = logging.getLogger(__name__)

FAILED = "FAILED"
"""``export_shard.status`` of a shard whose runner failed with an error retrying cannot
help (the coordinator fails the task)."""
FAILED_RETRY = "FAILED_RETRY"
"""``export_shard.status`` of a shard whose runner failed with a transient error (the
coordinator ends the attempt for a retry with backoff, which resumes the shard)."""


@dataclass(frozen=True, slots=True)
class ShardUnit:
    """What the coordinator reads of one shard while the cluster runs it.

    Attributes:
        shard_no: position in the file.
        key: the window's name.
        status: ``PENDING``, ``DONE`` or ``FAILED``.
        rows_written: rows in its stored segments.
        bytes: bytes in its stored segments.
        leased: whether a live lease holds it (database clock).
        lease_owner: who holds or last held it.
        attempt_count: claims it had.
        failure_code: why it failed for good (``FAILED``), else None.
        failure_message: the sentence of that failure.
        total: the shard's own row estimate, once its runner had one.
    """

    shard_no: int
    key: str
    status: str
    rows_written: int
    bytes: int
    leased: bool
    lease_owner: str | None
    attempt_count: int
    failure_code: str | None
    failure_message: str | None
    total: int | None


def _task_at(conn: Connection, task_id: int, version: int, *, exclusive: bool) -> bool:
    """Lock the task row (exclusive: claims; shared: a runner's writes) and tell whether
    the attempt ``version`` still runs and was not asked to cancel."""
    row = conn.execute(
        select(T.c.status, T.c.dispatch_version, T.c.cancel_requested)
        .where(T.c.id == task_id)
        .with_for_update(read=not exclusive)
    ).first()
    return (
        row is not None
        and row.status == TaskStatus.RUNNING.value
        and int(row.dispatch_version) == version
        and not row.cancel_requested
    )


def _live() -> Any:
    return and_(S.c.lease_until.is_not(None), S.c.lease_until > db_now())


def _free() -> Any:
    return or_(S.c.lease_until.is_(None), S.c.lease_until <= db_now())


def claim_shard(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    *,
    lease_seconds: float,
    parallel: int,
    prefer: int | None = None,
) -> ShardCheckpoint | None:
    """Claim one shard of attempt ``version`` of the task for ``owner`` (module rule).

    Args:
        prefer: the shard to take when it is free (a wake-up names one); any other free
            shard otherwise, the first in file order.

    Returns:
        The claimed shard with its checkpoint, or None: the task no longer runs at that
        version (or a cancel was asked), ``parallel`` shards are already held, or no
        shard is free.
    """
    if not _task_at(conn, task_id, version, exclusive=True):
        return None
    held = conn.execute(
        select(func.count())
        .select_from(S)
        .where(S.c.task_id == task_id, S.c.status == ShardStatus.PENDING, _live())
    ).scalar_one()
    if int(held) >= parallel:
        return None
    free = select(S.c.shard_no, S.c.shard_key, S.c.lease_owner).where(
        S.c.task_id == task_id, S.c.status == ShardStatus.PENDING, _free()
    )
    candidates = {r[0]: r for r in conn.execute(free.order_by(S.c.shard_no))}
    if not candidates:
        return None
    shard_no = prefer if prefer is not None and prefer in candidates else min(candidates)
    previous = candidates[shard_no].lease_owner
    claimed = conn.execute(
        update(S)
        .where(
            S.c.task_id == task_id,
            S.c.shard_no == shard_no,
            S.c.status == ShardStatus.PENDING,
            _free(),
        )
        .values(
            lease_owner=owner,
            lease_until=db_now_plus(lease_seconds),
            attempt_count=S.c.attempt_count + 1,
            failure_code=None,
            failure_message=None,
        )
    ).rowcount
    if claimed != 1:
        return None
    if previous is not None:  # its runner stopped renewing: a takeover, on the record
        _record_takeover(conn, task_id, candidates[shard_no].shard_key, previous, owner)
    return shard_unit(conn, task_id, shard_no)


def _record_takeover(conn: Connection, task_id: int, key: str, previous: str, owner: str) -> None:
    log.warning(
        "shard %s: its runner %s stopped renewing its lease; %s takes it over from its checkpoint",
        key,
        previous,
        owner,
        extra={"shard": key},
    )
    record_audit(
        conn,
        actor="system:worker",
        action=AuditAction.LEASE_RECOVERY,
        outcome="shard_taken_over",
        task=read_task(conn, task_id),
        reason=f"the worker {previous} stopped renewing its lease of shard {key}; "
        f"{owner} resumes it from its checkpoint",
        details={"shard": key, "previousOwner": previous, "owner": owner},
    )


def shard_unit(conn: Connection, task_id: int, shard_no: int) -> ShardCheckpoint | None:
    """One shard's row with its checkpoint (None when it is gone)."""
    row = conn.execute(select(S).where(S.c.task_id == task_id, S.c.shard_no == shard_no)).first()
    return None if row is None else shard_row(row)


def _held(task_id: int, shard_no: int, owner: str) -> Any:
    return and_(
        S.c.task_id == task_id,
        S.c.shard_no == shard_no,
        S.c.status == ShardStatus.PENDING,
        S.c.lease_owner == owner,
    )


def renew_owned_shards(
    conn: Connection, task_id: int, version: int, owner: str, lease_seconds: float
) -> tuple[int, bool]:
    """Extend the leases of the task's unfinished shards that ``owner`` holds.

    Returns:
        ``(shards renewed, cancel requested)``; 0 renewed when the attempt ``version``
        no longer runs (the runner must stop).
    """
    cancel = conn.execute(select(T.c.cancel_requested).where(T.c.id == task_id)).scalar()
    if not _task_at(conn, task_id, version, exclusive=False):
        return 0, bool(cancel)
    renewed = conn.execute(
        update(S)
        .where(S.c.task_id == task_id, S.c.status == ShardStatus.PENDING, S.c.lease_owner == owner)
        .values(lease_until=db_now_plus(lease_seconds))
    ).rowcount
    return int(renewed or 0), bool(cancel)


def save_unit_checkpoint(
    conn: Connection, task_id: int, version: int, owner: str, shard: ShardCheckpoint
) -> bool:
    """Write a claimed shard's checkpoint (``DONE`` ends its lease), fenced by the
    shard's lease owner and the attempt's version.

    Returns:
        False when the runner lost the shard (nothing written).
    """
    if not _task_at(conn, task_id, version, exclusive=False):
        return False
    values = shard.values(version)
    if shard.done:
        values.update(lease_owner=None, lease_until=None)
    return (
        conn.execute(
            update(S).where(_held(task_id, shard.shard_no, owner)).values(**values)
        ).rowcount
        == 1
    )


def fail_shard(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    shard_no: int,
    *,
    code: str,
    message: str,
    permanent: bool,
) -> bool:
    """The shard's runner failed: ``FAILED`` (``permanent``) or ``FAILED_RETRY`` with
    its code and message; the coordinator ends the attempt naming the shard. False when
    the runner had lost it."""
    if not _task_at(conn, task_id, version, exclusive=False):
        return False
    return (
        conn.execute(
            update(S)
            .where(_held(task_id, shard_no, owner))
            .values(
                status=FAILED if permanent else FAILED_RETRY,
                failure_code=code[:64],
                failure_message=message[:1000],
                lease_owner=None,
                lease_until=None,
                updated_at=db_now(),
            )
        ).rowcount
        == 1
    )


def release_shard(conn: Connection, task_id: int, owner: str, shard_no: int) -> bool:
    """Give a claimed shard back (its runner stops: shutdown, a transient failure): the
    lease ends now, the checkpoint stays, any worker may claim it again."""
    return (
        conn.execute(
            update(S)
            .where(_held(task_id, shard_no, owner))
            .values(lease_owner=None, lease_until=None)
        ).rowcount
        == 1
    )


def reset_failed_shards(conn: Connection, task_id: int) -> int:
    """A new attempt of the task: shards that failed for good go back to ``PENDING``
    (their checkpoints kept), and every lease of an earlier attempt ends."""
    return int(
        conn.execute(
            update(S)
            .where(S.c.task_id == task_id, S.c.status != ShardStatus.DONE)
            .values(status=ShardStatus.PENDING, lease_owner=None, lease_until=None)
        ).rowcount
        or 0
    )


def shard_board(conn: Connection, task_id: int) -> list[ShardUnit]:
    """Every shard of the task with its lease state, in file order (unfenced read)."""
    live = and_(S.c.lease_until.is_not(None), S.c.lease_until > db_now())
    rows = conn.execute(
        select(
            S.c.shard_no,
            S.c.shard_key,
            S.c.status,
            S.c.rows_written,
            S.c.bytes,
            live.label("leased"),
            S.c.lease_owner,
            S.c.attempt_count,
            S.c.failure_code,
            S.c.failure_message,
            S.c.stats_json,
        )
        .where(S.c.task_id == task_id)
        .order_by(S.c.shard_no)
    )
    out = []
    for r in rows:
        total = None
        if r.stats_json:
            known = orjson.loads(r.stats_json).get("total")
            total = None if known is None else int(known)
        out.append(
            ShardUnit(
                shard_no=int(r.shard_no),
                key=r.shard_key,
                status=r.status,
                rows_written=int(r.rows_written),
                bytes=int(r.bytes),
                leased=bool(r.leased),
                lease_owner=r.lease_owner,
                attempt_count=int(r.attempt_count),
                failure_code=r.failure_code,
                failure_message=r.failure_message,
                total=total,
            )
        )
    return out


def insert_shard_wake(
    conn: Connection, task: Task, shard_no: int, attempt: int, *, topic: str
) -> str | None:
    """Write the outbox row that wakes a worker for shard ``shard_no`` of the task's
    current dispatch version (``unit = shard-<no>.<attempt>``: one per shard claim
    round, so writing it again is a no-op).

    Returns:
        The new ``event_id``, or None when that wake-up exists already.
    """
    event_id = new_event_id()
    values = {
        "event_id": event_id,
        "task_id": task.id,
        "dispatch_version": task.dispatch_version,
        "unit": f"shard-{shard_no}.{attempt}",
        "topic": topic,
        "tag": commands.SHARD_TAG,
        "message_key": task.task_no,
        "payload_json": commands.encode_shard(
            event_id=event_id,
            task_no=task.task_no,
            export_type=task.export_type,
            dispatch_version=task.dispatch_version,
            trace_id=task.trace_id,
            shard_no=shard_no,
        ),
        "status": OutboxStatus.PENDING.value,
        "attempt_count": 0,
        "next_retry_at": db_now(),
        "created_at": db_now(),
        "updated_at": db_now(),
    }
    return event_id if insert_outbox_once(conn, values) else None


@dataclass(frozen=True, slots=True)
class ExpiredShard:
    """A shard whose lease ran out while its task still runs."""

    task_id: int
    shard_no: int
    attempt_count: int
    lease_until: datetime


def exports_waiting(conn: Connection) -> bool:
    """Whether an export waits for a worker now (a PENDING task past its retry time):
    a shard runner then hands its consumer slot back after its shard instead of
    claiming the next one, so the cluster starts waiting exports before it helps a
    running one further."""
    due = select(T.c.id).where(
        T.c.status == TaskStatus.PENDING.value, T.c.next_retry_at <= db_now()
    )
    return conn.execute(due.limit(1)).first() is not None


def expired_shard_leases(conn: Connection, limit: int) -> list[ExpiredShard]:
    """Unfinished shards of ``RUNNING`` tasks whose lease ran out (database clock),
    oldest first: their runner died or froze."""
    rows = conn.execute(
        select(S.c.task_id, S.c.shard_no, S.c.attempt_count, S.c.lease_until)
        .join(T, T.c.id == S.c.task_id)
        .where(
            T.c.status == TaskStatus.RUNNING.value,
            S.c.status == ShardStatus.PENDING,
            S.c.lease_owner.is_not(None),
            S.c.lease_until <= db_now(),
        )
        .order_by(S.c.lease_until)
        .limit(limit)
    )
    return [ExpiredShard(int(r[0]), int(r[1]), int(r[2]), r[3]) for r in rows]


def free_shard_lease(conn: Connection, shard: ExpiredShard) -> bool:
    """End the expired lease of ``shard`` (if still the same claim), so a wake-up finds
    it free, and write it in the task's audit trail; False when someone claimed it
    meanwhile."""
    row = conn.execute(
        select(S.c.shard_key, S.c.lease_owner).where(
            S.c.task_id == shard.task_id, S.c.shard_no == shard.shard_no
        )
    ).first()
    freed = (
        conn.execute(
            update(S)
            .where(
                S.c.task_id == shard.task_id,
                S.c.shard_no == shard.shard_no,
                S.c.status == ShardStatus.PENDING,
                S.c.attempt_count == shard.attempt_count,
                S.c.lease_until <= db_now(),
            )
            .values(lease_owner=None, lease_until=None)
        ).rowcount
        == 1
    )
    if freed and row is not None:
        record_audit(
            conn,
            actor="system:reconciler",
            action=AuditAction.LEASE_RECOVERY,
            outcome="shard_freed",
            task=read_task(conn, shard.task_id),
            reason=f"the worker {row.lease_owner} stopped renewing its lease of shard "
            f"{row.shard_key}; the shard is offered to the cluster again",
            details={"shard": row.shard_key, "previousOwner": row.lease_owner},
        )
    return freed
