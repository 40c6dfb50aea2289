"""Where a split export cuts its parts: the row rule and the two byte rules.

A part ends after ``maxRowsPerFile`` data rows, or by ``maxBytesPerFile`` as follows;
with both set, whichever comes first. Every rule depends on the sequence of rows only,
never on how they were batched.

* Formats whose rows render on their own (:data:`ROW_ADDITIVE_FORMATS`: CSV, JSON
  Lines), so a part's bytes are its head (BOM and header row) plus the sum of its
  rows' bytes: **exact cap**. A row joins the current part when the part's bytes with
  that row are at most ``maxBytesPerFile``; otherwise it starts the next part. A row
  that does not fit in an empty part (head plus row above the cap) fails the export
  with ``FILE_TOO_LARGE`` instead of writing an oversized part. Each part's bytes
  (uncompressed, as extracted from the ZIP) are therefore <= ``maxBytesPerFile``.
  Rows are measured by rendering them with a second writer of the same format into a
  counting sink (:class:`ByteMeter`), one batch at a time, so this costs one more
  rendering of each row.
* Compressed formats (XLSX, Parquet), whose bytes are known only once the compressor
  and the trailer are written: **target**. The part is checked after every
  :data:`BLOCK_ROWS` of its rows (an XLSX chunk: the writer compresses whole chunks);
  it ends at the first check at which the bytes it has put out reach
  :func:`byte_target` (7/8 of ``maxBytesPerFile``). The eighth kept back is the room
  for what is still inside the compressor and the trailer. The guarantees, tested:
  every part but the last has put out at least the target at its end (so its final
  size is >= the target) and had not at the check before; a part's final size can
  pass ``maxBytesPerFile`` only when one block of rows plus the compressor's backlog
  and the trailer take more than that eighth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from export_center.packaging.streams import CountingSink
from export_center.writers.base import ExportWriter
from export_center.writers.xlsx import slice_column

__all__ = [
    "BLOCK_ROWS",
    "ROW_ADDITIVE_FORMATS",
    "ByteMeter",
    "byte_target",
    "slice_batch",
]

ROW_ADDITIVE_FORMATS = frozenset({"csv", "jsonl"})
"""Formats whose file is a head followed by each row's bytes as rendered alone."""

BLOCK_ROWS = 1_000
"""Rows between two byte checks of a compressed part (the XLSX writer's chunk)."""


def byte_target(max_bytes_per_file: int) -> int:
    """The bytes out at which a compressed part ends: ``max - max // 8``."""
    return max_bytes_per_file - max_bytes_per_file // 8


def slice_batch(columns: Sequence[Sequence[Any]], start: int, stop: int) -> list[Sequence[Any]]:
    """Rows ``start..stop-1`` of a column-major batch (``DecimalColumn`` marks kept)."""
    return [slice_column(values, start, stop) for values in columns]


class ByteMeter:
    """Measures the bytes rows take in a row-additive format.

    Args:
        open_writer: opens the format's writer on a stream exactly as the parts are
            opened (same columns, time zone and CSV options).

    Attributes:
        head: the bytes of an empty part (BOM and header row for CSV; 0 for JSON Lines).
    """

    def __init__(self, open_writer: Callable[[BinaryIO], ExportWriter]):
        self._sink = CountingSink()
        self._writer = open_writer(self._sink)  # type: ignore[arg-type]
        self.head = self._sink.count

    def size(self, columns: Sequence[Sequence[Any]]) -> int:
        """The bytes the rows of ``columns`` take (0 for an empty batch)."""
        before = self._sink.count
        self._writer.write_columns(columns)
        return self._sink.count - before

    def fit(self, columns: Sequence[Sequence[Any]], room: int) -> int:
        """The most leading rows of ``columns`` whose bytes are <= ``room``.

        One rendering of the batch when it fits whole; else a binary search over its
        prefixes (row sizes add up, so the prefix sizes grow with the prefix).
        """
        count = len(columns[0]) if columns else 0
        if count == 0 or self.size(columns) <= room:
            return count
        low, high = 0, count  # size(low rows) <= room < size(high rows)
        while high - low > 1:
            middle = (low + high) // 2
            if self.size(slice_batch(columns, 0, middle)) <= room:
                low = middle
            else:
                high = middle
        return low

    def close(self) -> None:
        """Drop the measuring writer."""
        self._writer.abort()
