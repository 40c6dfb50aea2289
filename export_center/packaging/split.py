"""Where a split export cuts its parts: the row rule and the two byte rules.

A part ends after ``maxRowsPerFile`` data rows, or by ``maxBytesPerFile`` as follows;
with both set, whichever comes first. Every rule depends on the sequence of rows only,
never on how they were batched.

* Formats whose rows render on their own (:func:`row_additive`: CSV, JSON
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
  and the trailer are written: **exact cap by trial**. The part takes its rows in blocks
  of :data:`BLOCK_ROWS` counted from its first row (the package gathers whole blocks
  whatever the batches) and asks its writer to take each block only if the part,
  closed right after, would be at most ``maxBytesPerFile``
  (:class:`SizedWriter`). XLSX tells that size exactly from a copy of the open
  sheet's deflate state plus the ZIP records still to come (``writers.xlsx_size``);
  Parquet encodes its buffered rows as a trial row group (``writers.parquet_size``:
  exact while the part has one row group, an upper bound after), checking at 1, 2,
  4... blocks and before each row group is written, and gives back the rows past the
  last count that fits. So each part's bytes (as extracted from the ZIP) are
  <= ``maxBytesPerFile``, and a part ends at a multiple of :data:`BLOCK_ROWS` rows
  unless its first block does not fit: then it holds the most rows that fit (a row
  that does not fit in an empty part fails the export with ``FILE_TOO_LARGE``).
  A byte-split XLSX part is one sheet: it also ends when its sheet is full
  (1,048,575 rows, or ``sheet_row_limit``). The cap holds whatever the data; that a
  part holds the *most* blocks that fit assumes a file grows with its rows (the
  Parquet bisection). Costs, measured on 200,000 rows cut into 2 MB parts: about a
  third more time than unsplit for either format; XLSX parts are deflated by zlib
  instead of ISA-L (the copyable state), a few percent larger.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from export_center.columns import Column
from export_center.packaging.streams import CountingSink
from export_center.values import DecimalColumn, DecimalText
from export_center.writers.base import ExportWriter
from export_center.writers.formats import FileFormat, SizedWriter
from export_center.writers.xlsx import slice_column

__all__ = [
    "BLOCK_ROWS",
    "ByteMeter",
    "SizedWriter",
    "join_batches",
    "open_sized_writer",
    "row_additive",
    "slice_batch",
]


def row_additive(file_format: FileFormat) -> bool:
    """Whether the format's file is a head followed by each row's bytes as rendered
    alone (CSV, JSON Lines): the format table's ``parts_sum_to_file``. The others are
    compressed and cut by trial (:func:`open_sized_writer`)."""
    return file_format.parts_sum_to_file


BLOCK_ROWS = 1_000
"""Rows of a block: a compressed part is checked block by block (the XLSX chunk)."""

# ``SizedWriter`` (the writer of a part cut by trial) is the format table's protocol,
# named here too for the package, which opens and drives it.


def open_sized_writer(
    file_format: FileFormat,
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    sheet_row_limit: int | None,
) -> SizedWriter:
    """The writer of a byte-split part of a compressed format (not :func:`row_additive`):
    the format table's ``open_sized`` (XLSX with ``size_checks``, zlib's deflate whose
    state can be copied; Parquet as it is). No size cap: the package caps the delivered
    bytes.

    Raises:
        ValueError: a format without such a writer (a row-additive one).
    """
    if file_format.open_sized is None:
        raise ValueError(f"format {file_format.name} is not cut by trial")
    return file_format.open_sized(
        stream, columns, time_zone=time_zone, sheet_row_limit=sheet_row_limit
    )


def slice_batch(columns: Sequence[Sequence[Any]], start: int, stop: int) -> list[Sequence[Any]]:
    """Rows ``start..stop-1`` of a column-major batch (``DecimalColumn`` marks kept)."""
    return [slice_column(values, start, stop) for values in columns]


def _join_column(pieces: Sequence[Sequence[Any]]) -> Sequence[Any]:
    if len(pieces) == 1:
        return pieces[0]
    if all(type(piece) is DecimalColumn for piece in pieces):
        return DecimalColumn(value for piece in pieces for value in piece)
    joined: list[Any] = []
    for piece in pieces:
        if type(piece) is DecimalColumn:  # its plain texts keep their meaning one by one
            joined.extend(None if v is None else DecimalText(v) for v in piece)
        else:
            joined.extend(piece)
    return joined


def join_batches(batches: Sequence[Sequence[Sequence[Any]]]) -> list[Sequence[Any]]:
    """Column-major batches one after the other as one batch (``DecimalColumn`` kept,
    or its texts marked one by one as ``DecimalText`` when joined with other values)."""
    return [_join_column([batch[i] for batch in batches]) for i in range(len(batches[0]))]


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
