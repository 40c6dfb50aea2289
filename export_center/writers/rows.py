"""The rows part: a shard's typed rows stored losslessly, for formats whose parts cannot
be concatenated (Parquet) or whose file is re-cut after the shards (split, compressed).

:class:`RowsPartWriter` is a part writer (``parts.CheckpointedWriter``: checkpoints,
resume, the size cap on the part) that stores each row as one line of JSON, an array
of the row's values in column order, and :func:`read_rows_parts` gives the rows back,
column-major in batches, with the exact values the writer got: a re-render through any
file writer is the single writer's file.

Line format (UTF-8, one ``[...]`` + LF per row; the column types say how to read):

* A value of its column's own Python type is stored plainly: STRING ``str`` as a JSON
  string, INTEGER ``int`` within 64 bits as a number, BOOLEAN ``true``/``false``,
  DECIMAL ``DecimalText`` (and every value of a ``DecimalColumn``) as its text, DATE
  ``date`` as ``"YYYY-MM-DD"``, DATETIME ``datetime`` as ``isoformat()`` (its own
  offset, so the instant is kept; a naive one stays naive); None ``null``.
* Any other value is tagged by its Python type, ``{"<tag>": text}``: ``d`` Decimal
  (``str(value)``, so ``Decimal("1.10")`` and ``Decimal("0E-8")`` come back with their
  exponent, NaN too), ``x`` DecimalText, ``i`` int (beyond 64 bits, or an int in another
  column), ``s`` str, ``b`` bool, ``f`` float (``repr``), ``D`` date, ``t`` datetime.
  Column values are never JSON objects (``export_center.values`` refuses them), so a
  tag is never confused with a value. A value of another type (a list, bytes) cannot
  be stored and fails the writer, naming row and column.
* Lone surrogates survive: a row that holds one is written by ``json.dumps`` with
  ``ensure_ascii`` (``"\\ud800"``), every other row by orjson.

Read back, a plain DECIMAL text is a ``DecimalText`` and a batch column of them a
``DecimalColumn``, as ``BatchConverter.columns_of`` makes them.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any, BinaryIO

import orjson

from export_center.columns import Column, ColumnType
from export_center.values import BoundedCache, DecimalColumn, DecimalText
from export_center.writers.base import DATE_CACHE_SIZE, WriterStats
from export_center.writers.parts import CheckpointedWriter

__all__ = ["READ_BATCH_ROWS", "RowsPartWriter", "read_rows_parts"]

READ_BATCH_ROWS = 5_000
"""Rows per batch that :func:`read_rows_parts` yields (the ORDERS page size)."""

_INT64 = (-(2**63), 2**63 - 1)

_NATIVE: dict[ColumnType, type] = {
    ColumnType.STRING: str,
    ColumnType.INTEGER: int,
    ColumnType.BOOLEAN: bool,
    ColumnType.DECIMAL: DecimalText,
    ColumnType.DATE: _dt.date,
    ColumnType.DATETIME: _dt.datetime,
}
"""The Python type each column type stores plainly."""


def _tagged(value: Any) -> Any:
    """A value that is not its column's own type, tagged by its Python type.

    Raises:
        TypeError: a type that cannot be stored losslessly.
    """
    kind = type(value)
    if kind is DecimalText:
        return {"x": str(value)}
    if kind is str:
        return {"s": value}
    if kind is bool:
        return {"b": value}
    if kind is int:
        return {"i": str(value)}
    if kind is Decimal:
        return {"d": str(value)}
    if kind is float:
        return {"f": repr(value)}
    if kind is _dt.datetime:
        return {"t": value.isoformat()}
    if kind is _dt.date:
        return {"D": value.isoformat()}
    raise TypeError(f"a {kind.__name__} value cannot be stored in a rows part")


_UNTAG: dict[str, Callable[[Any], Any]] = {
    "x": DecimalText,
    "s": str,
    "b": bool,
    "i": int,
    "d": Decimal,
    "f": float,
    "t": _dt.datetime.fromisoformat,
    "D": _dt.date.fromisoformat,
}


def _untag(value: dict[str, Any]) -> Any:
    ((tag, text),) = value.items()
    return _UNTAG[tag](text)


class RowsPartWriter(CheckpointedWriter):
    """Store one shard's typed rows losslessly (see the module docstring).

    Args:
        stream: binary output of the part (or of its current segment); not closed.
        columns: the export's columns, in file order.
        time_zone: IANA name of the export time zone (checked only: the values keep
            their own offsets; the file writer applies the zone).
        max_bytes: cap on the part's bytes (``resume_from.bytes`` included), None for none.
        resume_from: the stats of the part's last checkpoint when the shard resumes.

    Attributes:
        content_type: ``application/octet-stream`` (a rows part is no file format).
        extension: ``rows-part``.

    Raises:
        ValueError: no columns; from ``write_columns``, a value that cannot be stored
            (its message names the part's row, 1-based, and the column key).
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """

    content_type = "application/octet-stream"
    extension = "rows-part"

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
        resume_from: WriterStats | None = None,
    ):
        super().__init__(
            stream, columns, time_zone=time_zone, max_bytes=max_bytes, resume_from=resume_from
        )
        self._types = [ColumnType(c.type) for c in self._columns]

    def _encode(self, index: int, values: Sequence[Any]) -> Sequence[Any]:
        """One column of a batch as JSON-able values (plain or tagged)."""
        column_type = self._types[index]
        native = _NATIVE[column_type]
        if column_type is ColumnType.DECIMAL and type(values) is DecimalColumn:
            return values
        kinds = set(map(type, values))
        if kinds == {native}:
            if column_type is ColumnType.DATE or column_type is ColumnType.DATETIME:
                return [v.isoformat() for v in values]
            if native is not int or _INT64[0] <= min(values) and max(values) <= _INT64[1]:
                return values
        out: list[Any] = []
        value: Any
        for row, value in enumerate(values, start=self._stats.rows + 1):
            if value is None:
                out.append(None)
            elif type(value) is native and native is not int:
                plain: Any = value
                is_moment = column_type in (ColumnType.DATE, ColumnType.DATETIME)
                out.append(plain.isoformat() if is_moment else plain)
            elif type(value) is int and native is int and _INT64[0] <= value <= _INT64[1]:
                out.append(value)
            else:
                try:
                    out.append(_tagged(value))
                except TypeError as exc:
                    key = self._keys[index]
                    raise ValueError(f"row {row}, column {key}: {exc}") from None
        return out

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Encode the batch column by column, then one JSON line per row, one write."""
        encoded = [self._encode(i, values) for i, values in enumerate(columns)]
        lines = []
        dumps = orjson.dumps
        for row in zip(*encoded, strict=True):
            try:
                lines.append(dumps(row))
            except orjson.JSONEncodeError:  # a lone surrogate: \\uXXXX escapes keep it
                text = json.dumps(row, ensure_ascii=True, separators=(",", ":"))
                lines.append(text.encode("ascii"))
        lines.append(b"")
        self._counting.write(b"\n".join(lines))
        self._stats.rows += len(columns[0])

    def _finish(self) -> None:
        """Flush the output (a rows part has no trailer)."""
        self._counting.flush()


def _loads(line: bytes) -> list[Any]:
    try:
        row: list[Any] = orjson.loads(line)
    except orjson.JSONDecodeError:  # escapes of lone surrogates
        row = json.loads(line)
    return row


def _decoder(column_type: ColumnType) -> Callable[[list[Any]], list[Any]]:
    """The function turning one stored column of a batch back into typed values."""
    native = _NATIVE[column_type]

    def tagged_or_none(v: Any) -> Any:
        return None if v is None else _untag(v) if type(v) is dict else v

    if column_type is ColumnType.DECIMAL:

        def decimals(values: list[Any]) -> list[Any]:
            if set(map(type, values)) == {str}:
                return DecimalColumn(values)
            return [DecimalText(v) if type(v) is str else tagged_or_none(v) for v in values]

        return decimals

    if column_type is ColumnType.DATE:
        day = BoundedCache(_dt.date.fromisoformat, DATE_CACHE_SIZE).__getitem__

        def dates(values: list[Any]) -> list[Any]:
            return [day(v) if type(v) is str else tagged_or_none(v) for v in values]

        return dates

    if column_type is ColumnType.DATETIME:
        parse = _dt.datetime.fromisoformat

        def datetimes(values: list[Any]) -> list[Any]:
            return [parse(v) if type(v) is str else tagged_or_none(v) for v in values]

        return datetimes

    def plain(values: list[Any]) -> list[Any]:
        if set(map(type, values)) == {native}:
            return values
        return [tagged_or_none(v) for v in values]

    return plain


def _lines(parts: Iterable[Iterable[bytes]]) -> Iterator[bytes]:
    """Every row line of the parts in order, whatever the chunk boundaries.

    Raises:
        ValueError: a part that does not end with a complete line.
    """
    for index, part in enumerate(parts, start=1):
        tail = b""
        for chunk in part:
            data = tail + bytes(chunk)
            *complete, tail = data.split(b"\n")
            yield from complete
        if tail:
            raise ValueError(f"the rows part of shard {index} ends inside a row")


def read_rows_parts(
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    *,
    batch_rows: int = READ_BATCH_ROWS,
) -> Iterator[list[list[Any]]]:
    """The rows stored by :class:`RowsPartWriter`, back as column-major typed batches.

    Args:
        columns: the export's columns, as given to the part writers.
        parts: per shard in shard order, its segments in order (bytes-like chunks, read
            lazily); a chunk may end anywhere, each part must end at a row's end.
        batch_rows: the most rows per batch (>= 1); batches are cut by count only,
            across parts, so a file writer gets the same rows whatever the sharding.

    Yields:
        Batches for ``ExportWriter.write_columns``: one list per column, of the exact
        values written (``Decimal("1.10")`` stays ``Decimal("1.10")``, an aware
        datetime keeps its instant, lone surrogates stay).

    Raises:
        ValueError: a part ending inside a row, a line that is not a row of
            ``len(columns)`` values, or ``batch_rows < 1``.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
    decoders = [_decoder(ColumnType(c.type)) for c in columns]
    width = len(columns)
    rows: list[list[Any]] = []

    def batch() -> list[list[Any]]:
        if any(len(row) != width for row in rows):
            raise ValueError(f"a stored row does not hold {width} values")
        stored = [list(values) for values in zip(*rows, strict=True)]
        return [decode(values) for decode, values in zip(decoders, stored, strict=True)]

    for line in _lines(parts):
        rows.append(_loads(line))
        if len(rows) == batch_rows:
            yield batch()
            rows = []
    if rows:
        yield batch()
