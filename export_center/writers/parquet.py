"""Streaming Parquet writer (pyarrow, the optional extra ``parquet``).

pyarrow is imported when a writer opens, never at import time, so the service runs
without the extra; ``formats.FileFormat.available`` says whether it is installed.

Schema: one field per column, named by the column *key*; the header title (language
or rename) is the field's metadata ``title`` (UTF-8), so data never depends on the
language. Types by column type:

=========  ==========================================================================
STRING     ``string`` (UTF-8; a lone surrogate becomes U+FFFD and is counted)
INTEGER    ``int64``; a value outside int64 fails the export naming row and column
DECIMAL    ``decimal128(precision, scale)`` from ``Column.precision``/``scale``.
           Undeclared (rule :func:`decimal_type`): ``decimal128(38, 18)``, the range
           of the provider's plain decimals (20 integer and 18 fraction digits); only
           a precision: scale 0 (SQL's ``DECIMAL(p)``); only a scale: precision 38. A
           value is never rounded: more fraction digits than the scale, or more digits
           than the precision, fails the export naming row and column. NaN/Infinity
           are null and counted in ``invalid_numbers``.
BOOLEAN    ``bool``
DATE       ``date32``
DATETIME   ``timestamp("us", tz=<export time zone>)``: the instant, exact to the
           microsecond; readers show it in the export zone
=========  ==========================================================================

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
pyarrow itself costs about 36 MB once per process (its libraries and the Parquet
writer's first use). Figures below: peak RSS growth of writing 405,000 ORDERS rows in
a process that had not loaded pyarrow (``bench.formats``: 106 MB before these
choices, 51 MB with them; CSV 2 MB). Two more choices beside the row group size:

* The allocator: :func:`load_pyarrow` sets ``ARROW_DEFAULT_MEMORY_POOL=system``
  (glibc ``malloc``) unless the operator set it, before pyarrow's first import in the
  process; the variable is read once, at that import, and the Parquet writer's
  internals allocate from that default pool whatever the Python calls pass. With
  pyarrow's default, mimalloc, freed row-group buffers stay resident: 98 MB against
  72 MB with 65,536-row groups, 73 against 51 with 16,384.
* Decimals are converted from ``decimal.Decimal`` objects, not cast from strings: the
  first cast loads Arrow's compute kernels, about 10 MB resident for good. The
  conversion is exact and refuses the same values (rescaling that would lose digits,
  more digits than the precision); it takes about as long as the cast.

Shards: Parquet parts cannot be concatenated, so a sharded export stores its rows in
rows parts (``writers.rows``) and :func:`assemble_parquet` writes them through
:class:`ParquetWriter`: the same file as one writer given all rows.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from decimal import Context, Decimal
from typing import Any, BinaryIO

from export_center.columns import Column, ColumnType
from export_center.errors import PermanentExportError
from export_center.values import DecimalColumn, DecimalText
from export_center.writers.base import StreamingWriter, WriterStats, check_columns
from export_center.writers.parquet_size import OneGroupFile, SizeBound, one_group_file
from export_center.writers.rows import read_rows_parts

__all__ = [
    "ROW_GROUP_ROWS",
    "UNDECLARED_DECIMAL",
    "ParquetWriter",
    "assemble_parquet",
    "decimal_type",
    "load_pyarrow",
]

ROW_GROUP_ROWS = 16_384
"""Rows per row group (the last group holds the rest). The writer's memory grows with it
(module docstring): 16,384 rows of 405,000 ORDERS rows peak at 15 MB over pyarrow's own
36 MB, 65,536 at 36 MB; the file is 7.6 % larger (26.4 MB against 24.5 MB)."""

MEMORY_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
"""pyarrow's environment variable naming its default allocator (read at its import)."""

MEMORY_POOL = "system"
"""The allocator :func:`load_pyarrow` chooses when the operator named none."""

UNDECLARED_DECIMAL = (38, 18)
"""``(precision, scale)`` of a DECIMAL column that declares neither."""

VALUE_CODE = "VALUE_NOT_REPRESENTABLE"
"""Failure code of a value the Parquet type of its column cannot hold exactly."""

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_INT64 = (-(2**63), 2**63 - 1)


def load_pyarrow() -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``, imported on first use with the allocator of the
    module docstring: before pyarrow's first import in the process,
    ``ARROW_DEFAULT_MEMORY_POOL`` is set to :data:`MEMORY_POOL` unless already set.
    Every module that imports pyarrow should do it through this function, since the
    first import fixes the allocator for the whole process.

    Returns:
        The two modules.

    Raises:
        ModuleNotFoundError: the extra ``parquet`` is not installed.
    """
    if "pyarrow" not in sys.modules:
        os.environ.setdefault(MEMORY_POOL_VARIABLE, MEMORY_POOL)
    return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")


def decimal_type(column: Column) -> tuple[int, int]:
    """The ``(precision, scale)`` of a DECIMAL column's ``decimal128`` (module docstring).

    Raises:
        ValueError: a declared precision outside 1..38 or scale outside 0..precision.
    """
    precision, scale = column.precision, column.scale
    if precision is None and scale is None:
        precision, scale = UNDECLARED_DECIMAL
    elif precision is None:
        precision = 38
    elif scale is None:
        scale = 0
    assert precision is not None and scale is not None
    if not 1 <= precision <= 38 or not 0 <= scale <= precision:
        raise ValueError(
            f"column {column.key}: DECIMAL({precision}, {scale}) is outside decimal128"
        )
    return precision, scale


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
        self._types = [ColumnType(c.type) for c in self._columns]
        self._arrow_types = [self._arrow_type(c, time_zone) for c in self._columns]
        self._schema = pa.schema(
            [
                pa.field(c.key, t, nullable=True, metadata={"title": c.title})
                for c, t in zip(self._columns, self._arrow_types, strict=True)
            ]
        )
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

    def _arrow_type(self, column: Column, time_zone: str) -> Any:
        pa = self._pa
        kind = ColumnType(column.type)
        if kind is ColumnType.DECIMAL:
            return pa.decimal128(*decimal_type(column))
        return {
            ColumnType.STRING: pa.string(),
            ColumnType.INTEGER: pa.int64(),
            ColumnType.BOOLEAN: pa.bool_(),
            ColumnType.DATE: pa.date32(),
            ColumnType.DATETIME: pa.timestamp("us", tz=time_zone),
        }[kind]

    # --- values to Arrow ----------------------------------------------------------------

    def _refuse(self, index: int, offset: int, value: Any, why: str) -> PermanentExportError:
        row = self._stats.rows + self._buffered + offset + 1
        key = self._keys[index]
        return PermanentExportError(
            f"row {row}, column {key}: {why}: {value!r} (Parquet cannot hold it exactly)",
            code=VALUE_CODE,
        )

    def _array(self, index: int, values: list[Any]) -> Any:
        """One column of a batch as an Arrow array of its field's type."""
        kind = self._types[index]
        arrow_type = self._arrow_types[index]
        pa = self._pa
        if kind is ColumnType.STRING:
            return self._strings(values)
        if kind is ColumnType.INTEGER:
            for offset, v in enumerate(values):
                if v is not None and (type(v) is not int or not _INT64[0] <= v <= _INT64[1]):
                    if type(v) is int:
                        raise self._refuse(index, offset, v, "outside int64")
                    raise self._refuse(index, offset, v, "not an integer")
            return pa.array(values, arrow_type)
        if kind is ColumnType.DECIMAL:
            return self._decimals(index, values)
        return pa.array(values, arrow_type)

    def _strings(self, values: list[Any]) -> Any:
        pa = self._pa
        if type(values) is not list or not all(type(v) is str or v is None for v in values):
            values = [None if v is None else str(v) for v in values]
        try:
            return pa.array(values, pa.string())
        except UnicodeEncodeError:
            clean = []
            for v in values:
                if v is not None:
                    v, replaced = _SURROGATE_RE.subn("\ufffd", v)
                    self._stats.replaced_surrogates += replaced
                clean.append(v)
            return pa.array(clean, pa.string())

    def _decimals(self, index: int, values: list[Any]) -> Any:
        """DECIMAL values through their exact text, as ``Decimal`` objects into decimal128
        (never rounded; no cast, see the module docstring)."""
        pa = self._pa
        if type(values) is DecimalColumn or set(map(type, values)) == {DecimalText}:
            texts: list[Any] = values
        else:
            texts = [self._decimal_text(index, offset, v) for offset, v in enumerate(values)]
        numbers = [None if text is None else Decimal(text) for text in texts]
        try:
            return pa.array(numbers, self._arrow_types[index])
        except pa.ArrowInvalid:
            precision, scale = self._arrow_types[index].precision, self._arrow_types[index].scale
            for offset, text in enumerate(texts):
                if text is not None and not _fits(Decimal(text), precision, scale):
                    why = f"more digits than DECIMAL({precision}, {scale})"
                    raise self._refuse(index, offset, text, why) from None
            raise

    def _decimal_text(self, index: int, offset: int, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, DecimalText):
            return str(value)
        if isinstance(value, bool):
            raise self._refuse(index, offset, value, "not a decimal")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                self._stats.invalid_numbers += 1
                return None
            value = Decimal(repr(value))
        if isinstance(value, Decimal):
            if not value.is_finite():
                self._stats.invalid_numbers += 1
                return None
            return format(value, "f")
        raise self._refuse(index, offset, value, "not a decimal")

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
        """Write the first ``rows`` buffered rows as one row group; keep the rest."""
        table = self._buffered_table()
        group = table.slice(0, rows).combine_chunks()
        self._writer.write_table(group, row_group_size=rows)
        rest = table.slice(rows)
        self._buffer = [[chunk for chunk in column.chunks if len(chunk)] for column in rest.columns]
        self._buffered -= rows
        self._stats.rows += rows

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
        arrays = [
            self._array(i, values if isinstance(values, list) else list(values))
            for i, values in enumerate(columns)
        ]
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


_WIDE = Context(prec=100)
"""Room for any DECIMAL value (at most 38 digits): ``normalize`` never rounds here."""


def _fits(value: Decimal, precision: int, scale: int) -> bool:
    """True when ``value`` is exactly a ``DECIMAL(precision, scale)``: at most ``scale``
    fraction digits once trailing zeros go, at most ``precision - scale`` before the point."""
    if not value:
        return True
    exponent = value.normalize(_WIDE).as_tuple().exponent
    assert isinstance(exponent, int)
    integer = max(value.adjusted() + 1, 0)
    return max(0, -exponent) <= scale and integer <= precision - scale


def assemble_parquet(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    *,
    part_stats: WriterStats,
    max_bytes: int | None = None,
    time_zone: str = "UTC",
) -> WriterStats:
    """Write the Parquet file from the shards' rows parts (``writers.rows``).

    Args:
        stream: binary output of the file; it is not closed.
        columns: the export's columns, as given to the part writers.
        parts: per shard in shard order, its segments in order (bytes-like chunks).
        part_stats: ``WriterStats.total`` of every part's last checkpoint; its ``rows``
            must equal the rows found.
        max_bytes: the file's size cap in bytes, None for none (enforced while writing).
        time_zone: the export time zone (the DATETIME fields' zone).

    Returns:
        The file's stats, equal to ``ParquetWriter``'s for the same rows.

    Raises:
        FileTooLarge: the file grew past ``max_bytes``.
        PermanentExportError: a value outside its Parquet type (``VALUE_NOT_REPRESENTABLE``).
        ValueError: a part ending inside a row, or ``part_stats.rows`` differs from the
            rows found. The output is then partial: delete it.
    """
    writer = ParquetWriter(stream, columns, time_zone=time_zone, max_bytes=max_bytes)
    try:
        for batch in read_rows_parts(columns, parts):
            writer.write_columns(batch)
        stats = writer.close()
    except BaseException:
        writer.abort()
        raise
    if stats.rows != part_stats.rows:
        raise ValueError(f"the rows parts hold {stats.rows} rows, their stats {part_stats.rows}")
    return stats
