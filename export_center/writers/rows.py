"""The rows part: a shard's typed rows stored losslessly, for files that are re-cut or
compressed after the shards (split, gzip, zip).

:class:`RowsPartWriter` is a part writer (``parts.CheckpointedWriter``: checkpoints,
resume, the size cap on the part) that stores each batch as one line of JSON, the
batch's columns in order, and :func:`read_rows_parts` gives the rows back,
column-major in batches, with the exact values the writer got: a re-render through any
file writer is the single writer's file.

Line format (UTF-8, one ``[[...],[...],...]`` + LF per batch: one JSON array per
column, all of the batch's length; the column types say how to read):

* A value of its column's own Python type is stored plainly: STRING ``str`` as a JSON
  string, INTEGER ``int`` within 64 bits as a number, BOOLEAN ``true``/``false``,
  DECIMAL ``DecimalText`` (and every value of a ``DecimalColumn``) as its text, DATE
  ``date`` as ``"YYYY-MM-DD"``, DATETIME ``datetime`` as ISO 8601 with its own offset
  (``2024-03-01T08:00:00.000001+08:00``, so the instant is kept; a naive one stays
  naive); None ``null``.
* Any other value is tagged by its Python type, ``{"<tag>": text}``: ``d`` Decimal
  (``str(value)``, so ``Decimal("1.10")`` and ``Decimal("0E-8")`` come back with their
  exponent, NaN too), ``x`` DecimalText, ``i`` int (beyond 64 bits, or an int in another
  column), ``s`` str, ``b`` bool, ``f`` float (``repr``), ``D`` date, ``t`` datetime.
  Column values are never JSON objects (``export_center.values`` refuses them), so a
  tag is never confused with a value. A value of another type (a list, bytes) cannot
  be stored and fails the writer, naming row and column.
* Lone surrogates survive: UTF-8 cannot hold them, so a string that has one, in any
  column, is tagged ``z`` with the hex digits of its UTF-8 bytes encoded with
  ``surrogatepass`` (``"a\\ud800"`` is ``{"z": "61eda080"}``). JSON's own ``\\ud800``
  escape would not do: a reader joins a high and a low surrogate escaped one after the
  other into one character.

Speed (``bench.parts``, 405,000 ORDERS rows, CPU seconds): orjson encodes and decodes
whole columns in C, dates and datetimes included, so a batch costs a few Python calls
per column, not per value: written 0.62 -> 0.27, read back 2.82 -> 0.45 (with one more
column, DATETIME: 1.87 -> 0.44 and 4.14 -> 0.54) against one JSON array per row before.
orjson writes a datetime's offset in whole minutes; a column holding an offset with
seconds (a zone's local mean time before 1900, ``+08:05:43``) is written with
``isoformat`` instead, which keeps them.

Read back, a plain DECIMAL text is a ``DecimalText`` and a batch column of them a
``DecimalColumn``, as ``BatchConverter.columns_of`` makes them.
"""

from __future__ import annotations

import datetime as _dt
import itertools
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
_MINUTE = _dt.timedelta(minutes=1)
_NONE = type(None)

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


def _surrogates_text(hex_digits: str) -> str:
    return bytes.fromhex(hex_digits).decode("utf-8", "surrogatepass")


_UNTAG: dict[str, Callable[[Any], Any]] = {
    "z": _surrogates_text,
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


def _without_surrogates(value: Any) -> Any:
    """An encoded value, a string with a lone surrogate (plain or tagged ``s``) tagged ``z``."""
    text = value.get("s") if type(value) is dict else value
    if type(text) is str:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return {"z": text.encode("utf-8", "surrogatepass").hex()}
    return value


def _whole_minutes(values: Sequence[Any]) -> bool:
    """True when no datetime of ``values`` (None allowed) has an offset with seconds."""
    present = [v for v in values if v is not None]
    offsets = set(map(_dt.datetime.utcoffset, present))
    return all(offset is None or not offset % _MINUTE for offset in offsets)


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
        """One column of a batch as values orjson writes as the line format says.

        The common case, every value of the column's own type or None, passes the
        column as it is (orjson writes dates and datetimes itself); only a column with
        other values is tagged value by value.
        """
        column_type = self._types[index]
        native = _NATIVE[column_type]
        if type(values) is DecimalColumn:
            return values
        kinds = set(map(type, values))
        nulls = _NONE in kinds
        kinds.discard(_NONE)
        if kinds <= {native}:
            if native is int and kinds:
                present = [v for v in values if v is not None] if nulls else values
                if _INT64[0] <= min(present) and max(present) <= _INT64[1]:
                    return values
            elif native is not _dt.datetime or not kinds or _whole_minutes(values):
                return values
        out: list[Any] = []
        value: Any
        for row, value in enumerate(values, start=self._stats.rows + 1):
            own = type(value) is native  # a bool, no narrowing of value's type
            if value is None:
                out.append(None)
            elif not own or native is int and not _INT64[0] <= value <= _INT64[1]:
                try:
                    out.append(_tagged(value))
                except TypeError as exc:
                    key = self._keys[index]
                    raise ValueError(f"row {row}, column {key}: {exc}") from None
            elif native is _dt.datetime:  # isoformat keeps an offset's seconds
                out.append(value.isoformat())
            else:
                out.append(value)
        return out

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Encode the batch column by column, then one JSON line, one write."""
        encoded = [self._encode(i, values) for i, values in enumerate(columns)]
        try:
            line = orjson.dumps(encoded)
        except orjson.JSONEncodeError:  # a lone surrogate (UTF-8 has none)
            line = b"[" + b",".join(map(_dumps_column, encoded)) + b"]"
        self._counting.write(line + b"\n")
        self._stats.rows += len(columns[0])

    def _finish(self) -> None:
        """Flush the output (a rows part has no trailer)."""
        self._counting.flush()


def _dumps_column(values: Sequence[Any]) -> bytes:
    """One encoded column as JSON, its strings with lone surrogates tagged ``z``."""
    try:
        return orjson.dumps(values)
    except orjson.JSONEncodeError:
        return orjson.dumps(list(map(_without_surrogates, values)))


def _tagged_or_none(v: Any) -> Any:
    return None if v is None else _untag(v) if type(v) is dict else v


def _decoder(column_type: ColumnType) -> Callable[[list[Any]], list[Any]]:
    """The function turning one stored column of a batch back into typed values."""
    native = _NATIVE[column_type]
    tagged_or_none = _tagged_or_none

    if column_type is ColumnType.DECIMAL:

        def decimals(values: list[Any]) -> list[Any]:
            if set(map(type, values)) == {str}:
                return DecimalColumn(values)
            return [DecimalText(v) if type(v) is str else tagged_or_none(v) for v in values]

        return decimals

    if column_type is ColumnType.DATE or column_type is ColumnType.DATETIME:
        if column_type is ColumnType.DATE:
            parse: Callable[[str], Any] = BoundedCache(
                _dt.date.fromisoformat, DATE_CACHE_SIZE
            ).__getitem__
        else:
            parse = _dt.datetime.fromisoformat

        def moments(values: list[Any]) -> list[Any]:
            if set(map(type, values)) == {str}:
                return list(map(parse, values))
            return [parse(v) if type(v) is str else tagged_or_none(v) for v in values]

        return moments

    def plain(values: list[Any]) -> list[Any]:
        if set(map(type, values)) <= {native, _NONE}:
            return values
        return [tagged_or_none(v) for v in values]

    return plain


def _lines(parts: Iterable[Iterable[bytes]]) -> Iterator[bytes]:
    """Every batch line of the parts in order, whatever the chunk boundaries (a line's
    pieces are joined once, when its end arrives).

    Raises:
        ValueError: a part that does not end with a complete line.
    """
    for index, part in enumerate(parts, start=1):
        pieces: list[bytes] = []
        for chunk in part:
            data = bytes(chunk)
            end = data.rfind(b"\n")
            if end < 0:
                if data:
                    pieces.append(data)
                continue
            if pieces:
                pieces.append(data[:end])
                complete = b"".join(pieces)
            else:
                complete = data[:end]
            yield from complete.split(b"\n")
            pieces = [data[end + 1 :]] if end + 1 < len(data) else []
        if pieces:
            raise ValueError(f"the rows part of shard {index} ends inside a batch")


def _slice(column: list[Any], start: int, stop: int) -> list[Any]:
    piece = column[start:stop]
    return DecimalColumn(piece) if type(column) is DecimalColumn else piece


def _joined(pieces: list[list[Any]]) -> list[Any]:
    """One column of several stored batches: a ``DecimalColumn`` when every piece is one,
    else a list (plain texts of a ``DecimalColumn`` then become ``DecimalText``)."""
    if len(pieces) == 1:
        return pieces[0]
    marked = [type(p) is DecimalColumn for p in pieces]
    if all(marked):
        return DecimalColumn(itertools.chain.from_iterable(pieces))
    if any(marked):
        pieces = [
            list(map(DecimalText, p)) if m else p for p, m in zip(pieces, marked, strict=True)
        ]
    return list(itertools.chain.from_iterable(pieces))


def _rebatched(batches: Iterator[list[list[Any]]], batch_rows: int) -> Iterator[list[list[Any]]]:
    """The rows of ``batches`` in batches of exactly ``batch_rows`` (the last the rest)."""
    pending: list[list[list[Any]]] = []
    count = 0
    for batch in batches:
        rows = len(batch[0])
        if not rows:
            continue
        if not pending and rows == batch_rows:
            yield batch
            continue
        pending.append(batch)
        count += rows
        while count >= batch_rows:
            head, rest, room = [], [], batch_rows
            for piece in pending:
                size = len(piece[0])
                if room >= size:
                    head.append(piece)
                    room -= size
                elif room:
                    head.append([_slice(c, 0, room) for c in piece])
                    rest.append([_slice(c, room, size) for c in piece])
                    room = 0
                else:
                    rest.append(piece)
            yield [_joined(list(column)) for column in zip(*head, strict=True)]
            pending, count = rest, count - batch_rows
    if pending:
        yield [_joined(list(column)) for column in zip(*pending, strict=True)]


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
            lazily); a chunk may end anywhere, each part must end at a batch's end.
        batch_rows: the most rows per batch (>= 1); batches are cut by count only,
            across parts, so a file writer gets the same rows whatever the sharding.

    Yields:
        Batches for ``ExportWriter.write_columns``: one list per column, of the exact
        values written (``Decimal("1.10")`` stays ``Decimal("1.10")``, an aware
        datetime keeps its instant and offset, lone surrogates stay).

    Raises:
        ValueError: a part ending inside a batch, a line that is not ``len(columns)``
            arrays of one length, or ``batch_rows < 1``.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
    decoders = [_decoder(ColumnType(c.type)) for c in columns]
    width = len(columns)

    def decoded() -> Iterator[list[list[Any]]]:
        for line in _lines(parts):
            stored = orjson.loads(line)
            if (
                type(stored) is not list
                or len(stored) != width
                or any(type(values) is not list for values in stored)
                or len(set(map(len, stored))) != 1
            ):
                raise ValueError(f"a stored batch is not {width} columns of one length")
            yield [decode(values) for decode, values in zip(decoders, stored, strict=True)]

    yield from _rebatched(decoded(), batch_rows)
