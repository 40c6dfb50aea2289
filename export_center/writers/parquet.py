"""Streaming Parquet writer (pyarrow, the optional extra ``parquet``).

pyarrow is imported when a writer opens, never at import time, so the service runs
without the extra; ``formats.FileFormat.available`` says whether it is installed.

Schema and values: ``writers.parquet_arrays`` (one field per column, named by the
column *key*, the header title in the field's metadata ``title``, so data never
depends on the language; STRING ``string``, INTEGER ``int64``, DECIMAL
``decimal128(precision, scale)`` never rounded, BOOLEAN ``bool``, DATE ``date32``,
DATETIME ``timestamp("us", tz=<export time zone>)``).

Row groups hold :data:`ROW_GROUP_ROWS` rows each (the last one the rest), cut by row
count alone, however the batches arrive: each batch becomes Arrow arrays at once
(compact, no Python objects kept), at most one row group is buffered, and a full group
is written from contiguous arrays, so the bytes depend only on the row sequence (and
the pyarrow version, named in the file's ``created_by``). Compression is Snappy,
dictionary encoding and statistics pyarrow's defaults. The size cap is enforced on the
bytes as pyarrow writes them (``base.CountingStream``).

Memory (rule: flat, and close to CSV's). Writing a row group holds about three times
its Arrow data (the buffered batches or their contiguous copy, and the encoded column
chunks, kept until each chunk's dictionary page is written), so the peak grows with
:data:`ROW_GROUP_ROWS`; 16,384 rows of 12 ORDERS columns is about 2.6 MB of data.
pyarrow itself costs about 40 MB once per process (``import pyarrow`` 23 MB of its
libraries' pages and 8 MB of objects, ``pyarrow.parquet`` 9 MB more, the first write
3 MB). Three choices beside the row group size:

* The allocator: :func:`load_pyarrow` sets ``ARROW_DEFAULT_MEMORY_POOL=system``
  (glibc ``malloc``) unless the operator set it, before pyarrow's first import in the
  process; the variable is read once, at that import, and the Parquet writer's
  internals allocate from that default pool whatever the Python calls pass. With
  pyarrow's default, mimalloc, freed row-group buffers stay resident: 98 MB against
  72 MB with 65,536-row groups, 73 against 51 with 16,384 (writer alone).
* After each row group the writer gives the memory freed back to the system
  (``MemoryPool.release_unused``: glibc's ``malloc_trim``). Arrow's pool peaks at
  6.7 MB for 16,384-row groups, but the freed buffers of a group (and the Python
  bytes of the IPC batches it came from) stay resident and the next group's land
  beside them: the export of 405,000 orders end to end peaked at 203 MB without it,
  193 with it (CSV: 147), for about 4 ms per group (0.1 CPU-s per 405,000 rows).
* Decimals are converted from ``decimal.Decimal`` objects, not cast from strings (the
  first cast loads Arrow's compute kernels, about 10 MB resident for good).

Shards: Parquet files cannot be concatenated, so a sharded export stores each shard's
rows as Arrow IPC record batches (``writers.parquet_parts``), converted once in the
shard; the assembler feeds them to :meth:`ParquetWriter.write_record_batch`, the same
row-group buffer, so the file is the one a single writer makes of all rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, BinaryIO

from export_center.columns import Column
from export_center.writers.base import StreamingWriter, check_columns
from export_center.writers.parquet_arrays import (
    UNDECLARED_DECIMAL,
    ArrowColumns,
    decimal_type,
    load_pyarrow,
)
from export_center.writers.parquet_size import OneGroupFile, SizeBound, one_group_file

__all__ = [
    "ROW_GROUP_ROWS",
    "UNDECLARED_DECIMAL",
    "ParquetWriter",
    "decimal_type",
    "load_pyarrow",
]

ROW_GROUP_ROWS = 16_384
"""Rows per row group (the last group holds the rest). Measured end to end on 405,000
orders (``bench.file_formats``' export, peak RSS with the release after each group,
file size): 16,384 rows 193 MB and 24.7 MB, 8,192 rows 188 MB and 25.9 MB (+4.7 %:
every group repeats the dictionaries of columns such as ``c_name``); CSV 147 MB. Both
meet the goal (within 50 MB of CSV's); 16,384 is kept, because the larger file is a
cost every user downloads, the 5 MB only the worker's for a moment. 8,192 is the
lever if the margin goes (65,536 rows: 21.0 MB, about 20 MB more RSS)."""


class ParquetWriter(StreamingWriter):
    """Stream rows into a Parquet file (see the module docstring for the rules).

    Args:
        stream: binary output (need not be seekable); it is not closed.
        columns: the export's columns, in file order (keys name the fields, titles go
            into the field metadata).
        time_zone: IANA name of the export time zone, the DATETIME fields' zone.
        max_bytes: file size cap in bytes (None = unlimited); ``errors.FileTooLarge``
            is raised while writing.

    Attributes:
        content_type: ``application/vnd.apache.parquet``.
        extension: ``parquet``.

    Raises:
        ModuleNotFoundError: pyarrow is not installed (the extra ``parquet``).
        ValueError: no columns, or a declared DECIMAL outside decimal128.
        FileTooLarge: ``max_bytes`` is smaller than the file's first bytes.
        PermanentExportError: from ``write_columns``, code ``VALUE_NOT_REPRESENTABLE``:
            a value outside its Parquet type (message: row, 1-based over the file, and
            column key).
    """

    content_type = "application/vnd.apache.parquet"
    extension = "parquet"

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
    ):
        pa, pq = load_pyarrow()
        super().__init__(stream, columns, time_zone=time_zone, max_bytes=max_bytes)
        self._pa = pa
        self._pool = pa.default_memory_pool()
        self._arrow = ArrowColumns(pa, self._columns, time_zone, self._stats)
        self._arrow_types = self._arrow.types
        self._schema = self._arrow.schema
        self._buffer: list[list[Any]] = [[] for _ in self._columns]  # Arrow chunks
        self._buffered = 0
        self._stats.sheets = 1
        self._pq = pq
        self._writer: Any = None
        self._writer = self._guarded_open()
        self._bound: SizeBound | None = None  # set by the first write_within
        self._checked = 0  # leading buffered rows known to fit (write_within)
        self._probe = 0  # buffered rows at which write_within checks next
        self._last: OneGroupFile | None = None  # the last trial
        self._full = False  # write_within gave rows back: no more rows

    def _open(self, sink: Any) -> Any:
        """pyarrow's writer on ``sink`` with this file's schema and options."""
        return self._pq.ParquetWriter(sink, self._schema, compression="snappy")

    def _guarded_open(self) -> Any:
        try:
            return self._open(self._counting)
        except BaseException:
            self._fail()
            raise

    @property
    def schema(self) -> Any:
        """The file's Arrow schema (``pyarrow.Schema``, ``writers.parquet_arrays``)."""
        return self._schema

    # --- StreamingWriter hooks ----------------------------------------------------------

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Convert the batch to Arrow arrays, buffer them, write every full row group."""
        if self._bound is not None:
            raise ValueError("write_columns on a Parquet writer used with write_within")
        self._buffer_batch(columns)
        while self._buffered >= ROW_GROUP_ROWS:
            self._write_group(ROW_GROUP_ROWS)

    def _buffered_table(self) -> Any:
        """The buffered rows as one ``pyarrow.Table`` (chunked as they came)."""
        pa = self._pa
        chunked = [
            pa.chunked_array(chunks, t)
            for chunks, t in zip(self._buffer, self._arrow_types, strict=True)
        ]
        return pa.Table.from_arrays(chunked, schema=self._schema)

    def _write_group(self, rows: int) -> None:
        """Write the first ``rows`` buffered rows as one row group; keep the rest; give
        the memory freed back to the system (module docstring)."""
        table = self._buffered_table()
        group = table.slice(0, rows).combine_chunks()
        self._writer.write_table(group, row_group_size=rows)
        rest = table.slice(rows)
        self._buffer = [[chunk for chunk in column.chunks if len(chunk)] for column in rest.columns]
        self._buffered -= rows
        self._stats.rows += rows
        del table, group, rest
        self._pool.release_unused()

    # --- rows already in Arrow (a sharded file, writers.parquet_parts) -------------------

    def write_record_batch(self, batch: Any) -> None:
        """Append rows already converted to Arrow: a part's IPC record batch.

        Rule: the batch's arrays join the row-group buffer of :meth:`write_columns`, and
        a row group is written from contiguous copies of whatever chunks it holds, so
        the file's bytes are those the same rows as Python values give.

        Args:
            batch: a ``pyarrow.RecordBatch`` of exactly :attr:`schema` (metadata too).

        Raises:
            ValueError: the writer is closed or failed, was used with
                :meth:`write_within`, or the batch has another schema (the writer
                then fails).
            FileTooLarge: the file grew past ``max_bytes``.
        """
        if self._closed or self._failed:
            raise ValueError("write to a closed or failed PARQUET writer")
        self._guarded(self._buffer_record_batch, batch)

    def _buffer_record_batch(self, batch: Any) -> None:
        if self._bound is not None:
            raise ValueError("write_record_batch on a Parquet writer used with write_within")
        if not batch.schema.equals(self._schema, check_metadata=True):
            raise ValueError(
                f"a record batch of another schema ({batch.schema}) than the file's "
                f"({self._schema})"
            )
        if not batch.num_rows:
            return
        for chunks, array in zip(self._buffer, batch.columns, strict=True):
            chunks.append(array)
        self._buffered += batch.num_rows
        while self._buffered >= ROW_GROUP_ROWS:
            self._write_group(ROW_GROUP_ROWS)

    # --- a part of a byte split (packaging.split) ----------------------------------------

    def write_within(
        self, columns: Sequence[Sequence[Any]], max_bytes: int, *, step: int
    ) -> list[Sequence[Any]] | None:
        """Append a batch while the file, closed with the rows kept, stays within
        ``max_bytes``; when it would not, keep the most rows that fit and give back the
        rest (rows of earlier calls included).

        Rule: the rows are buffered (as for :meth:`write_columns`) and the size of the
        file closed with them is checked (``writers.parquet_size``: exact while no row
        group is written, a bound after) when the buffered rows reach 1, 2, 4, 8...
        times the rows of the first check, before a full row group is written, and at
        :meth:`fit_within`. When a check fails, the file keeps the most leading rows
        that fit, found by bisection among the counts that end the file at a multiple
        of ``step`` rows; only a file of no row at all keeps the most rows that fit at
        any count (at least one, or none when not even one row fits). The bisection
        takes the file's size to grow with its rows. Every row group written was
        checked first, so the closed file is at most ``max_bytes``.

        Args:
            columns: one batch, column-major, as :meth:`write_columns` takes it.
            max_bytes: the most bytes the closed file may take.
            step: the row multiple the file should end at (the package's block).

        Returns:
            None while every row is kept, else the rows given back, column-major, as
            Python values (Decimal, date, aware datetime...); the file is then full.

        Raises:
            ValueError: closed or failed, a badly shaped batch, or a writer that was
                given rows by :meth:`write_columns` first.
            PermanentExportError: ``VALUE_NOT_REPRESENTABLE``, as ``write_columns``.
        """
        if self._closed or self._failed:
            raise ValueError("write to a closed or failed PARQUET writer")
        check_columns(columns, len(self._keys))
        result: list[list[Sequence[Any]] | None] = [None]

        def write() -> None:
            self._start_bound()
            if self._full:
                raise ValueError("write_within on a full Parquet file (it gave rows back)")
            if len(columns[0]):
                self._buffer_batch(columns)
            result[0] = self._settle(max_bytes, step, final=False)

        self._guarded(write)
        return result[0]

    def fit_within(self, max_bytes: int, *, step: int) -> list[Sequence[Any]] | None:
        """Before close: check the rows not checked yet (see :meth:`write_within`).

        Returns:
            None when the file closed now fits ``max_bytes``, else the rows given back.
        """
        if self._closed or self._failed:
            raise ValueError("fit_within on a closed or failed PARQUET writer")
        result: list[list[Sequence[Any]] | None] = [None]

        def fit() -> None:
            self._start_bound()
            result[0] = self._settle(max_bytes, step, final=True)

        self._guarded(fit)
        return result[0]

    def _start_bound(self) -> None:
        if self._bound is not None:
            return
        if self._stats.rows or self._buffered:
            raise ValueError("write_within on a Parquet writer given rows by write_columns")
        empty = one_group_file(self._pa, self._open, self._buffered_table().slice(0, 0))
        self._bound = SizeBound(len(self._columns), empty)

    def _buffer_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Convert a batch to Arrow arrays and buffer them (no row group written)."""
        first_row = self._stats.rows + self._buffered + 1
        arrays = self._arrow.arrays(columns, first_row)
        for chunks, array in zip(self._buffer, arrays, strict=True):
            chunks.append(array)
        self._buffered += len(columns[0])

    def _settle(self, max_bytes: int, step: int, *, final: bool) -> list[Sequence[Any]] | None:
        while self._buffered >= ROW_GROUP_ROWS:
            if not self._fits(ROW_GROUP_ROWS, max_bytes):
                return self._cut(ROW_GROUP_ROWS, max_bytes, step)
            trial = self._last
            assert self._bound is not None and trial is not None
            self._write_group(ROW_GROUP_ROWS)
            self._bound.written(trial)
            self._checked = self._probe = 0
        if self._buffered > self._checked and (final or self._buffered >= self._probe):
            if not self._fits(self._buffered, max_bytes):
                return self._cut(self._buffered, max_bytes, step)
            self._checked = self._buffered
            self._probe = 2 * self._buffered
        return None

    def _fits(self, rows: int, max_bytes: int) -> bool:
        """Whether the file closed with the first ``rows`` buffered rows fits."""
        assert self._bound is not None
        group = self._buffered_table().slice(0, rows).combine_chunks()
        self._last = one_group_file(self._pa, self._open, group)
        return self._bound.size(self._counting.count, self._last) <= max_bytes

    def _cut(self, failing: int, max_bytes: int, step: int) -> list[Sequence[Any]]:
        """Keep the most buffered rows that fit (fewer than ``failing``); give back the rest."""
        base = self._stats.rows  # rows in written row groups
        low = self._checked  # fits (0 rows always does: the groups were checked)
        first = low + ((-(base + low)) % step or step)
        candidates = range(first, failing, step)
        kept = low
        lo, hi = 0, len(candidates)  # bisection: candidates[:lo] fit, [hi:] do not
        while lo < hi:
            middle = (lo + hi) // 2
            if self._fits(candidates[middle], max_bytes):
                kept, lo = candidates[middle], middle + 1
            else:
                hi = middle
        if kept == 0 and base == 0:  # no row yet: the most rows that fit at all
            lo, hi = 1, min(failing, step)  # fewer than `step` rows; hi does not fit
            while lo < hi:
                middle = (lo + hi) // 2
                if self._fits(middle, max_bytes):
                    kept, lo = middle, middle + 1
                else:
                    hi = middle
        table = self._buffered_table()
        rest = table.slice(kept)
        back: list[Sequence[Any]] = [rest.column(i).to_pylist() for i in range(table.num_columns)]
        kept_table = table.slice(0, kept)
        self._buffer = [[c for c in column.chunks if len(c)] for column in kept_table.columns]
        self._buffered = self._checked = kept
        self._full = True
        return back

    def _finish(self) -> None:
        """Write the last row group and the footer; flush the output."""
        if self._buffered:
            self._write_group(self._buffered)
        self._writer.close()
        self._counting.flush()

    def _fail(self) -> None:
        """Stop the writer after an error; pyarrow's writer is closed into nowhere."""
        super()._fail()
        writer, self._writer = self._writer, None
        self._buffer = [[] for _ in self._columns]
        if writer is not None:
            with contextlib.suppress(Exception):  # the file is abandoned anyway
                writer.close()
