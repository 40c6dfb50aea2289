"""Read a delivered file back with real readers and recount it (for ``verify``).

:func:`recount` reads one file (the bytes of a download, or of one part of a ZIP) with
the reader of its format: ``csv`` with the manifest's encoding, delimiter and header;
``openpyxl`` (read-only) for XLSX, every sheet, each with its header row; ``json`` per
line for JSON Lines; ``pyarrow`` for Parquet; ``gzip`` first for a ``.gz``. It gives the
data rows and the :class:`ControlTotals` of the values as the file holds them:

* CSV: wall times without an offset are in the manifest's ``timeZone``.
* XLSX: a DECIMAL number is exact as ``Decimal(repr(float))`` (the writer writes a
  number only when it has at most 15 significant digits, which a float holds
  exactly); DATETIME serials hold milliseconds, so :func:`same_totals` compares
  datetimes to the millisecond for XLSX.
"""

from __future__ import annotations

import csv
import datetime as _dt
import gzip
import io
import json
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from export_center.columns import Column, ColumnType
from export_center.packaging.totals import TOTALLED_TYPES, ControlTotals, exact_decimal
from export_center.writers.csv import CsvWriter
from export_center.writers.formats import find_format
from export_center.writers.jsonl import JsonlWriter
from export_center.writers.parquet import ParquetWriter
from export_center.writers.xlsx import XlsxWriter

__all__ = ["ENCODINGS", "UnreadableFile", "is_xlsx", "recount", "same_instant"]

ENCODINGS = {"utf-8-bom": "utf-8-sig", "utf-8": "utf-8", "gb18030": "gb18030"}
"""The Python codec of each CSV ``encoding`` option."""

_BATCH = 10_000


class UnreadableFile(ValueError):
    """The file cannot be read as its format (truncated, not that format, bad value)."""


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
    if isinstance(value, float):  # XLSX numbers: at most 15 significant digits
        number = Decimal(repr(value))
        return int(number) if integer and number == number.to_integral_value() else number
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


def _csv_rows(data: bytes, options: Mapping[str, Any]) -> Iterator[list[Any]]:
    encoding = ENCODINGS.get(str(options.get("encoding", "utf-8-bom")), "utf-8-sig")
    text = io.TextIOWrapper(io.BytesIO(data), encoding=encoding, newline="")
    reader = csv.reader(text, delimiter=str(options.get("delimiter", ",")), strict=True)
    if options.get("header", True):
        next(reader, None)
    yield from reader


def _xlsx_rows(data: bytes) -> Iterator[list[Any]]:
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        for sheet in book.worksheets:
            for row in sheet.iter_rows(min_row=2, values_only=True):
                yield list(row)
    finally:
        book.close()


def _jsonl_rows(data: bytes, keys: Sequence[str]) -> Iterator[list[Any]]:
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            yield [item.get(key) for key in keys]


def _parquet_rows(data: bytes, columns: Sequence[Column]) -> Iterator[list[Any]]:
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    names = table.column_names
    picked = [c.key if c.key in names else c.title for c in columns]
    values = [table.column(name).to_pylist() for name in picked]
    yield from (list(row) for row in zip(*values, strict=True))


def _rows(
    data: bytes, file_format: str, columns: Sequence[Column], options: Mapping[str, Any]
) -> Iterator[list[Any]]:
    found = find_format(file_format)
    kind = None if found is None else found.extension
    if kind == CsvWriter.extension:
        return _csv_rows(data, options)
    if kind == XlsxWriter.extension:
        return _xlsx_rows(data)
    if kind == JsonlWriter.extension:
        return _jsonl_rows(data, [c.key for c in columns])
    if kind == ParquetWriter.extension:
        return _parquet_rows(data, columns)
    raise UnreadableFile(f"no reader for format {file_format!r}")


def is_xlsx(file_format: str) -> bool:
    """Whether a manifest's ``format`` names XLSX (its datetimes hold milliseconds)."""
    found = find_format(file_format)
    return found is not None and found.extension == XlsxWriter.extension


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
            data = gzip.decompress(data)
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


def same_instant(expected: str | None, found: str | None, *, millis: bool) -> bool:
    """Whether two ISO texts of a min/max name the same day or instant (``millis``:
    compare datetimes truncated to the millisecond, XLSX's precision)."""
    if expected is None or found is None:
        return expected == found
    if "T" not in expected and " " not in expected:
        return expected == found
    first = _dt.datetime.fromisoformat(expected)
    second = _dt.datetime.fromisoformat(found)
    if millis:
        first = first.replace(microsecond=first.microsecond // 1000 * 1000)
        second += _dt.timedelta(microseconds=500)  # the reader's serial: nearest ms
        second = second.replace(microsecond=second.microsecond // 1000 * 1000)
    return first == second
