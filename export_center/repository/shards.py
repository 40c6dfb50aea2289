"""Shards of sharded exports and their checkpoints (table ``export_shard``).

Every write here belongs to one attempt and is fenced like the attempt's own writes: it
runs only when the task row is still ``RUNNING`` under the writer's dispatch version
and lease owner (checked by an UPDATE of the task in the same transaction, which also
locks the task row until the transaction ends), so an attempt that lost its lease can
never move a checkpoint. Reads (the task detail's "shards done / total") are unfenced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, delete, insert, or_, select, update

from export_center.db import db_now
from export_center.repository._common import held_attempt
from export_center.repository.tables import SHARDS as S
from export_center.repository.tables import TASKS as T

__all__ = [
    "ShardCheckpoint",
    "ShardStatus",
    "delete_shards",
    "hold_attempt",
    "load_shards",
    "plan_task_shards",
    "save_checkpoint",
    "segment_runs",
    "segments_of",
    "shard_row",
]


class ShardStatus:
    """Values of ``export_shard.status``."""

    PENDING = "PENDING"
    DONE = "DONE"


@dataclass(slots=True)
class ShardCheckpoint:
    """One shard's row: its window and where its part stands.

    Attributes:
        shard_no: 0-based position in the file.
        key: the window's name (``2024-03-10``).
        window_from: ISO instant where the window starts (inclusive).
        window_to: ISO instant where it ends (exclusive).
        status: ``PENDING`` (not started or unfinished) or ``DONE``.
        cursor: the keyset cursor of the next page (None: from the shard's start).
        snapshot_token: the shard's snapshot token (None before its first page).
        rows_written: data rows in the stored segments.
        pages: provider pages fetched into the stored segments.
        bytes: bytes in the stored segments.
        checksum: CRC-32 of those bytes (0 for none).
        segments: the dispatch version of each stored segment, in segment order (the
            segment's key names both); stored as runs (:func:`segment_runs`).
        stats: the part writer's counts (JSON-able) as of the checkpoint.
    """

    shard_no: int
    key: str
    window_from: str
    window_to: str
    status: str = ShardStatus.PENDING
    cursor: str | None = None
    snapshot_token: str | None = None
    rows_written: int = 0
    pages: int = 0
    bytes: int = 0
    checksum: int = 0
    segments: list[int] | None = None
    stats: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        """True when the shard's part is complete."""
        return self.status == ShardStatus.DONE

    def values(self, version: int, now: Any = None) -> dict[str, Any]:
        """Column values of this checkpoint written by attempt ``version`` (``now``: the
        database time to record; default: the database clock in the statement)."""
        return {
            "shard_key": self.key,
            "window_from": self.window_from,
            "window_to": self.window_to,
            "status": self.status,
            "cursor": self.cursor,
            "snapshot_token": self.snapshot_token,
            "rows_written": self.rows_written,
            "pages": self.pages,
            "bytes": self.bytes,
            "checksum": f"{self.checksum:08x}",
            "segments_json": orjson.dumps({"runs": segment_runs(self.segments or [])}).decode(),
            "stats_json": None if self.stats is None else orjson.dumps(self.stats).decode(),
            "dispatch_version": version,
            "updated_at": db_now() if now is None else now,
        }


def segment_runs(versions: Sequence[int]) -> list[list[int]]:
    """Fold the segments' dispatch versions into runs ``[[version, count], ...]`` of
    consecutive segments written by one attempt: a checkpoint stays a few entries long
    (one per attempt that wrote the shard) however many pages the shard has, instead of
    one entry per segment rewritten at every page."""
    runs: list[list[int]] = []
    for version in versions:
        if runs and runs[-1][0] == version:
            runs[-1][1] += 1
        else:
            runs.append([version, 1])
    return runs


def segments_of(stored: Any) -> list[int]:
    """The segments' dispatch versions from ``segments_json`` as parsed: ``{"runs":
    [[version, count], ...]}``, or the list ``[[version, bytes], ...]`` (one entry per
    segment) that checkpoints written before the runs hold.

    Raises:
        ValueError: neither shape.
    """
    if isinstance(stored, dict) and isinstance(stored.get("runs"), list):
        return [int(v) for v, count in stored["runs"] for _ in range(int(count))]
    if isinstance(stored, list):
        return [int(v) for v, _bytes in stored]
    raise ValueError(f"segments_json holds neither runs nor a segment list: {stored!r:.80}")


def shard_row(row: Any) -> ShardCheckpoint:
    """The checkpoint of one ``export_shard`` row as read."""
    return ShardCheckpoint(
        shard_no=row.shard_no,
        key=row.shard_key,
        window_from=row.window_from,
        window_to=row.window_to,
        status=row.status,
        cursor=row.cursor,
        snapshot_token=row.snapshot_token,
        rows_written=int(row.rows_written),
        pages=int(row.pages),
        bytes=int(row.bytes),
        checksum=int(row.checksum, 16),
        segments=segments_of(orjson.loads(row.segments_json)),
        stats=None if row.stats_json is None else orjson.loads(row.stats_json),
    )


def load_shards(conn: Connection, task_id: int) -> list[ShardCheckpoint]:
    """The task's shards in file order (empty when it has none yet)."""
    rows = conn.execute(select(S).where(S.c.task_id == task_id).order_by(S.c.shard_no))
    return [shard_row(r) for r in rows]


def hold_attempt(conn: Connection, task_id: int, version: int, owner: str) -> bool:
    """Touch the task row under the attempt's fence (locks it for the transaction)."""
    return (
        conn.execute(
            update(T).where(held_attempt(task_id, version, owner)).values(updated_at=db_now())
        ).rowcount
        == 1
    )


def plan_task_shards(
    conn: Connection,
    task_id: int,
    version: int,
    owner: str,
    planned: Sequence[ShardCheckpoint],
) -> tuple[list[ShardCheckpoint], bool] | None:
    """Keep the task's shards when they match ``planned``, else write ``planned``.

    The rule: shards whose keys and windows equal the plan (same parameters, time zone
    and registry) are reused with their checkpoints; any other set is deleted and the
    plan inserted fresh (the caller deletes the old parts).

    Returns:
        ``(shards to run with their checkpoints, replaced)``: ``replaced`` is True when
        another plan with progress was dropped (its parts are the caller's to delete);
        None when the attempt lost its lease (nothing written).
    """
    if not hold_attempt(conn, task_id, version, owner):
        return None
    current = load_shards(conn, task_id)
    same = [(s.key, s.window_from, s.window_to) for s in current] == [
        (s.key, s.window_from, s.window_to) for s in planned
    ]
    replaced = not same and any(s.done or s.segments for s in current)
    if not same:
        conn.execute(delete(S).where(S.c.task_id == task_id))
        now = conn.execute(select(db_now())).scalar_one()  # one value for the many rows
        conn.execute(
            insert(S),
            [
                {"task_id": task_id, "shard_no": s.shard_no, **s.values(version, now)}
                for s in planned
            ],
        )
        current = [ShardCheckpoint(s.shard_no, s.key, s.window_from, s.window_to) for s in planned]
    else:
        # A new attempt: a shard that failed for good is tried again from its
        # checkpoint, and no lease of an earlier attempt's runners holds.
        conn.execute(
            update(S)
            .where(S.c.task_id == task_id, S.c.status != ShardStatus.DONE)
            .values(status=ShardStatus.PENDING, lease_owner=None, lease_until=None)
        )
        current = [
            dataclasses.replace(s, status=ShardStatus.PENDING) if not s.done else s for s in current
        ]
    conn.execute(
        update(T)
        .where(T.c.id == task_id)
        .values(
            processed_rows=sum(s.rows_written for s in current),
            shards_done=sum(s.done for s in current),
            shards_total=len(current),
        )
    )
    return current, replaced


def save_checkpoint(
    conn: Connection, task_id: int, version: int, owner: str, shard: ShardCheckpoint
) -> bool:
    """Write one shard's checkpoint, fenced by the attempt's lease.

    Call it in the transaction that writes the task's progress, after
    :func:`~export_center.repository.attempts.update_progress` returned True.

    Returns:
        False when the attempt lost its lease (nothing written).
    """
    if not hold_attempt(conn, task_id, version, owner):
        return False
    values = shard.values(version)
    if shard.done:
        values.update(lease_owner=None, lease_until=None)
    # A distributed shard the attempt's own thread claimed carries the attempt's owner;
    # a shard run by a thread of a classic attempt has none.
    mine = or_(S.c.lease_owner.is_(None), S.c.lease_owner == owner)
    return (
        conn.execute(
            update(S)
            .where(S.c.task_id == task_id, S.c.shard_no == shard.shard_no, mine)
            .values(**values)
        ).rowcount
        == 1
    )


def delete_shards(conn: Connection, task_id: int, *, forget_counts: bool = False) -> int:
    """Forget the task's shards (a fresh run, a success, or the end of the task).

    Args:
        forget_counts: also clear the task's ``shards_done`` / ``shards_total`` (a fresh
            run, parts dropped after the retention); a finished export keeps them.

    Returns:
        The shard rows deleted.
    """
    if forget_counts:
        conn.execute(update(T).where(T.c.id == task_id).values(shards_done=None, shards_total=None))
    return conn.execute(delete(S).where(S.c.task_id == task_id)).rowcount or 0
