"""One shard's running state inside an attempt, and the JSON of the columns it records.

:class:`ShardState` is what a shard's thread owns while it runs: its checkpoint as last
written, the buffer of the segment being rendered, the rows since that checkpoint, the
writer counts to resume from, the shard's own row estimate and its control totals.
"""

from __future__ import annotations

import io
from dataclasses import asdict
from typing import Any

from export_center.attempt.shards import Shard
from export_center.columns import Column, ColumnType
from export_center.packaging import ControlTotals
from export_center.repository import ShardCheckpoint
from export_center.writers import WriterStats

__all__ = ["ShardState", "columns_json", "columns_of", "merged"]


def columns_json(columns: list[Column]) -> list[dict[str, Any]]:
    """The columns as JSON-able dicts (kept in a checkpoint's stats)."""
    return [{**asdict(c), "type": str(c.type)} for c in columns]


def columns_of(raw: list[dict[str, Any]]) -> list[Column]:
    """The columns back from :func:`columns_json`."""
    return [Column(**{**c, "type": ColumnType(c["type"])}) for c in raw]


def merged(first: list[str], more: Any) -> list[str]:
    """``first`` followed by the items of ``more`` it does not hold yet."""
    out = list(first)
    out.extend(item for item in more if item not in out)
    return out


class ShardState:
    """One running shard: its checkpoint, buffer and writer (owned by its thread)."""

    def __init__(self, checkpoint: ShardCheckpoint, shard: Shard) -> None:
        self.cp = checkpoint
        self.shard = shard
        self.buffer = io.BytesIO()
        self.live_rows = 0  # rows written since the last checkpoint
        writer = (checkpoint.stats or {}).get("writer")
        self.resume_from = WriterStats.from_dict(writer) if writer else None
        known = (checkpoint.stats or {}).get("total")
        #: The provider's row estimate of this shard (its first page), kept in the
        #: checkpoint so that a resumed attempt still knows it.
        self.total: int | None = int(known) if known is not None else None
        if checkpoint.done:
            self.total = checkpoint.rows_written
        self.batch_no = checkpoint.pages
        kept = (checkpoint.stats or {}).get("totals")
        #: The control totals of the rows this shard wrote (as of its checkpoint when
        #: resumed); set when the shard's writer opens.
        self.totals: ControlTotals | None = ControlTotals.from_dict(kept) if kept else None

    @property
    def rows(self) -> int:
        """Rows of the shard so far: its checkpoint's and those rendered since."""
        return self.cp.rows_written + self.live_rows
