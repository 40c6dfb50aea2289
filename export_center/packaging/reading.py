"""Read a delivered file back with real readers and recount it (for ``verify``).

:func:`recount` reads one file (the bytes of a download, or of one part of a ZIP) with
the reader of its format from the format table (``FileFormat.reader``,
``writers.readers``: ``csv`` with the manifest's encoding, delimiter and header;
openpyxl for XLSX, every sheet, each with its header row; ``json`` per line for JSON
Lines; pyarrow for Parquet), ``gzip`` first for a ``.gz``. It gives the data rows and
the :class:`ControlTotals` of the values as the file holds them:

* CSV: wall times without an offset are in the manifest's ``timeZone``.
* XLSX: numbers are exact decimals (see ``writers.readers``); date-times hold
  milliseconds (the format's ``time_resolution_us``), so :func:`same_instant` compares
  them to the millisecond.

A file cut inside its last row (CSV, JSON Lines) or a gzip stream without its end is
:class:`TruncatedFile`; any other reader error is :class:`UnreadableFile`.
"""

from __future__ import annotations

import datetime as _dt
import gzip
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from export_center.columns import Column, ColumnType
from export_center.filespec import FileSpec
from export_center.packaging.totals import TOTALLED_TYPES, ControlTotals, exact_decimal
from export_center.writers.formats import find_format
from export_center.writers.readers import TruncatedFile, UnreadableFile

__all__ = ["TruncatedFile", "UnreadableFile", "recount", "same_instant", "time_resolution_us"]

_BATCH = 10_000


def _datetime(value: Any, zone: ZoneInfo) -> _dt.datetime:
    if isinstance(value, str):
        value = _dt.datetime.fromisoformat(value.strip())
    if not isinstance(value, _dt.datetime):
        raise ValueError(f"not a date-time: {value!r}")
    return value.replace(tzinfo=zone) if value.tzinfo is None else value


def _date(value: Any) -> _dt.date:
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    return _dt.date.fromisoformat(str(value).strip())


def _number(value: Any, integer: bool) -> Any:
    if isinstance(value, float):  # a float's shortest text is its exact decimal
        value = Decimal(repr(value))
    if isinstance(value, Decimal):  # read as a number (XLSX, a JSON fraction)
        if not integer:
            return value
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        raise ValueError(f"not an integer: {value}")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    return int(text) if integer else exact_decimal(text)


def _typed(kind: ColumnType, value: Any, zone: ZoneInfo) -> Any:
    if value is None or value == "":
        return None
    if kind is ColumnType.INTEGER:
        return _number(value, True)
    if kind is ColumnType.DECIMAL:
        return exact_decimal(_number(value, False))
    if kind is ColumnType.DATE:
        return _date(value)
    if kind is ColumnType.DATETIME:
        return _datetime(value, zone)
    return None


def _rows(
    data: bytes, file_format: str, columns: Sequence[Column], options: Mapping[str, Any]
) -> Iterator[list[Any]]:
    found = find_format(file_format)
    if found is None:
        raise UnreadableFile(f"no reader for format {file_format!r}")
    csv = FileSpec.from_json({"options": options}).csv
    return found.reader.rows(data, columns, csv)


def time_resolution_us(file_format: str) -> int:
    """The finest step of a date-time in a file of a manifest's ``format``, in
    microseconds (the format table's; 1 for a name it does not know)."""
    found = find_format(file_format)
    return 1 if found is None else found.time_resolution_us


def recount(
    data: bytes,
    *,
    file_format: str,
    columns: Sequence[Column],
    options: Mapping[str, Any],
    time_zone: str,
    gzipped: bool = False,
) -> ControlTotals:
    """The control totals of one file, read from its bytes alone.

    Args:
        data: the file's bytes.
        file_format: ``csv``, ``xlsx``, ``jsonl`` or ``parquet``.
        columns: the manifest's columns (key, title, type) in file order.
        options: the manifest's options (CSV encoding, delimiter, header).
        time_zone: the manifest's time zone (wall times without an offset).
        gzipped: the bytes are gzip of the file.

    Returns:
        :class:`ControlTotals` with the data rows counted.

    Raises:
        UnreadableFile: the bytes are not a readable file of the format, a row has
            another number of cells, or a totalled cell is not its type.
    """
    zone = ZoneInfo(time_zone)
    totals = ControlTotals(columns)
    kinds = [ColumnType(c.type) for c in columns]
    wanted = [i for i, kind in enumerate(kinds) if kind in TOTALLED_TYPES]
    width = len(columns)
    batch: list[list[Any]] = [[] for _ in columns]
    pending = 0
    try:
        if gzipped:
            try:
                data = gzip.decompress(data)
            except EOFError:
                raise TruncatedFile("truncated: the gzip stream ends before its end") from None
        for number, row in enumerate(_rows(data, file_format, columns, options), start=1):
            if len(row) < width or any(v not in (None, "") for v in row[width:]):
                raise UnreadableFile(f"row {number} has {len(row)} cells, expected {width}")
            for index in wanted:
                try:
                    batch[index].append(_typed(kinds[index], row[index], zone))
                except (ValueError, ArithmeticError) as exc:
                    raise UnreadableFile(
                        f"row {number}, column {columns[index].key}: {row[index]!r} is not "
                        f"{kinds[index]} ({exc})"
                    ) from None
            pending += 1
            if pending == _BATCH:
                _flush(totals, batch, wanted, pending)
                pending = 0
        _flush(totals, batch, wanted, pending)
    except UnreadableFile:
        raise
    except Exception as exc:  # every reader's own error: the file is not readable
        raise UnreadableFile(f"cannot read the file as {file_format}: {exc}") from None
    return totals


def _flush(totals: ControlTotals, batch: list[list[Any]], wanted: list[int], count: int) -> None:
    """Count ``count`` gathered rows (the columns not totalled are None)."""
    for index, values in enumerate(batch):
        if index not in wanted:
            values[:] = [None] * count
    totals.add(batch)
    for values in batch:
        values.clear()


def same_instant(expected: str | None, found: str | None, *, step_us: int = 1) -> bool:
    """Whether two ISO texts of a min/max name the same day or instant.

    Args:
        expected: the manifest's text (``2024-01-01`` or ``2024-01-01T08:00:00.123456+08:00``).
        found: the text recounted from the file.
        step_us: the file's date-time resolution in microseconds (1,000 for XLSX):
            the expected instant is truncated to it, the found one rounded to the
            nearest step (a reader's float serial lands within half a step).
    """
    if expected is None or found is None:
        return expected == found
    if "T" not in expected and " " not in expected:
        return expected == found
    first = _dt.datetime.fromisoformat(expected)
    second = _dt.datetime.fromisoformat(found)
    if step_us > 1:
        first -= _dt.timedelta(microseconds=first.microsecond % step_us)
        second += _dt.timedelta(microseconds=step_us // 2)
        second -= _dt.timedelta(microseconds=second.microsecond % step_us)
    return first == second
