"""Each format's file read back with its real reader: one :class:`FileReader` per format.

A reader gives the *data rows* of a file (header rows left out), one list of cells per
row in the columns' order, each cell as the file holds it, and the *text* a user sees
of such a cell. ``packaging.reading`` recounts a delivered file from the rows (``export-
center verify``); ``api.preview_render`` shows the preview's sample cells by the texts.
The format table names each format's reader (``FileFormat.reader``).

The readers and what a cell is:

* CSV (:data:`CSV_READER`): Python's ``csv`` in strict mode with the file's encoding
  (``utf-8-bom`` read as ``utf-8-sig``), delimiter and header option; every cell is
  the field's text (``""`` when empty). Its text is itself (formula guard included).
* XLSX (:data:`XLSX_READER`): openpyxl (read-only), every sheet, each sheet's first row
  (its header) left out, a row shorter than the columns padded with None (a sheet
  leaves out empty trailing cells). A number with a fraction is a ``Decimal``: exact
  as ``Decimal(repr(float))`` (the writer writes a number only when a float holds its
  at most 15 significant digits) and given the decimals its number format shows
  (``#,##0.00`` makes 3.1 into 3.10; digits beyond them are kept, never rounded); a
  date cell whose number format has no hours is a ``date``, another a naive
  ``datetime`` of wall time in milliseconds. Texts: ``TRUE``/``FALSE``, a date
  ``YYYY-MM-DD``, a date-time ``YYYY-MM-DD HH:MM:SS[.ffffff]``, a decimal positional.
* JSON Lines (:data:`JSONL_READER`): ``json`` per line (lines split at LF only, since
  a JSON string may hold U+2028 and the like as themselves), a number with a fraction
  a ``Decimal``, cells picked by the column keys. Texts are JSON's, strings without
  quotes: ``true``, ``null`` as ``""``, a decimal positional.
* Parquet (:data:`PARQUET_READER`): pyarrow, 10,000 rows at a time; fields picked by
  column key (or title); cells as pyarrow gives them (``Decimal``, ``date``, aware
  ``datetime``). Texts as JSON Lines', a datetime ISO 8601 with its offset.

Truncation (:class:`TruncatedFile`): a CSV file, its BOM aside, is empty or ends with
LF (both line endings end so) outside a quoted field; a JSON Lines file is empty or
ends with LF. A file cut inside its last row breaks that rule. XLSX and Parquet files
end with a directory their readers require, so a cut one is unreadable.
"""

from __future__ import annotations

import codecs
import csv as _csv
import datetime as _dt
import decimal
import io
import json
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any, Protocol

from export_center.columns import Column
from export_center.filespec import CsvOptions

__all__ = [
    "CSV_READER",
    "JSONL_READER",
    "PARQUET_READER",
    "XLSX_READER",
    "CsvReader",
    "FileReader",
    "JsonlReader",
    "ParquetReader",
    "TruncatedFile",
    "UnreadableFile",
    "XlsxReader",
]

_CODECS = {"utf-8-bom": "utf-8-sig", "utf-8": "utf-8", "gb18030": "gb18030"}
"""The codec that reads each CSV ``encoding`` option (``utf-8-sig`` drops the BOM)."""

_PARQUET_BATCH = 10_000
_JSON = json.JSONDecoder(parse_float=Decimal)
"""One decoder for every line (``json.loads`` with an option builds one per call)."""
_WIDE = decimal.Context(prec=80)  # quantize a float's digits plus 15 decimals exactly


class UnreadableFile(ValueError):
    """The bytes cannot be read as the format's file (not that format, a bad value,
    a row of another width); the message says where."""


class TruncatedFile(UnreadableFile):
    """The file ends inside its last row: it was cut (the message starts ``truncated``)."""


class FileReader(Protocol):
    """Reads one format's file back (rules in the module docstring)."""

    def rows(self, data: bytes, columns: Sequence[Column], csv: CsvOptions) -> Iterator[list[Any]]:
        """The file's data rows, lazily, in file order.

        Args:
            data: the whole file (not compressed).
            columns: the file's columns in order (keys pick JSON and Parquet cells;
                the count pads XLSX rows).
            csv: the CSV options the file was written with (other formats ignore them).

        Yields:
            One list of cells per data row, as the file holds them.

        Raises:
            TruncatedFile: the file ends inside a row.
            UnreadableFile: the file is not of the format (and the reader's own errors,
                which the caller treats the same).
        """
        ...

    def text(self, value: Any) -> str:
        """The text a user sees of one cell :meth:`rows` gave (``""`` for None)."""
        ...


def _json_text(value: Any) -> str:
    """A cell as JSON shows it, strings without quotes and null as ``""``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, _dt.date):  # a datetime too: ISO 8601, with its offset if any
        return value.isoformat()
    return json.dumps(value, ensure_ascii=False)


class CsvReader:
    """CSV by Python's ``csv`` (strict), with the file's encoding, delimiter and header."""

    def rows(self, data: bytes, columns: Sequence[Column], csv: CsvOptions) -> Iterator[list[Any]]:
        """The records after the header (if any): lists of field texts.

        Raises:
            TruncatedFile: not empty and not ending with LF, or ending inside quotes.
            UnreadableFile: an encoding outside the options.
        """
        codec = _CODECS.get(csv.encoding)
        if codec is None:
            raise UnreadableFile(f"no CSV encoding {csv.encoding!r}")
        start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        if len(data) > start and not data.endswith(b"\n"):  # no copy of the file
            ending = "CRLF" if csv.line_ending == "crlf" else "LF"
            raise TruncatedFile(f"truncated: the last row does not end with {ending}")
        return self._records(data, codec, csv)

    @staticmethod
    def _records(data: bytes, codec: str, csv: CsvOptions) -> Iterator[list[Any]]:
        text = io.TextIOWrapper(io.BytesIO(data), encoding=codec, newline="")
        reader = _csv.reader(text, delimiter=csv.delimiter, strict=True)
        try:
            if csv.header:
                next(reader, None)
            yield from reader
        except _csv.Error as exc:
            if str(exc) == "unexpected end of data":
                raise TruncatedFile("truncated: the file ends inside a quoted field") from None
            raise UnreadableFile(f"line {reader.line_num}: {exc}") from None

    def text(self, value: Any) -> str:
        """The field itself."""
        return "" if value is None else str(value)


def _places(number_format: str | None) -> int:
    """The decimals a number format shows (``#,##0.00``: 2; ``General``: 0)."""
    decimals = str(number_format or "").partition(".")[2]
    return len(decimals) - len(decimals.lstrip("0#"))


def _excel_cell(cell: Any) -> Any:
    """One openpyxl read-only cell as the file holds it (rules: module docstring)."""
    value = cell.value
    kind = type(value)
    if kind is float:
        number = Decimal(repr(value))
        if not number.is_finite():
            return value
        places = _places(cell.number_format)
        if places and number.as_tuple().exponent > -places:  # type: ignore[operator]
            number = number.quantize(Decimal(1).scaleb(-places), context=_WIDE)
        return number
    if kind is _dt.datetime and "h" not in str(cell.number_format).lower():
        return value.date()
    return value


class XlsxReader:
    """XLSX by openpyxl (read-only), every sheet, headers left out."""

    def rows(self, data: bytes, columns: Sequence[Column], csv: CsvOptions) -> Iterator[list[Any]]:
        """Each sheet's rows after its first, padded with None to the columns' count."""
        import openpyxl

        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        width = len(columns)
        try:
            for sheet in book.worksheets:
                for row in sheet.iter_rows(min_row=2):
                    cells = [_excel_cell(cell) for cell in row]
                    if len(cells) < width:
                        cells += [None] * (width - len(cells))
                    yield cells
        finally:
            book.close()

    def text(self, value: Any) -> str:
        """``TRUE``/``FALSE``, ``YYYY-MM-DD``, ``YYYY-MM-DD HH:MM:SS``, a number's digits."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, _dt.datetime):
            return value.isoformat(sep=" ")
        if isinstance(value, _dt.date):
            return value.isoformat()
        if isinstance(value, Decimal):
            return format(value, "f")
        if isinstance(value, float):
            return repr(value)
        return str(value)


class JsonlReader:
    """JSON Lines by ``json``, one object per LF-terminated line."""

    def rows(self, data: bytes, columns: Sequence[Column], csv: CsvOptions) -> Iterator[list[Any]]:
        """Each object's values of the column keys (None for a key it lacks).

        Raises:
            TruncatedFile: not empty and not ending with LF.
            UnreadableFile: a line that is not a JSON object.
        """
        if data and not data.endswith(b"\n"):
            raise TruncatedFile("truncated: the last row does not end with LF")
        return self._objects(data, [c.key for c in columns])

    @staticmethod
    def _objects(data: bytes, keys: list[str]) -> Iterator[list[Any]]:
        # A bytes stream's lines end at LF only, one line at a time (no list of them).
        for number, line in enumerate(io.BytesIO(data), start=1):
            if not line.strip():
                continue
            try:
                item = _JSON.decode(line.decode("utf-8"))
            except ValueError as exc:  # not UTF-8, or not JSON
                raise UnreadableFile(f"line {number} is not JSON: {exc}") from None
            if not isinstance(item, dict):
                raise UnreadableFile(f"line {number} is not a JSON object")
            yield [item.get(key) for key in keys]

    def text(self, value: Any) -> str:
        """JSON's text, a string without its quotes (module docstring)."""
        return _json_text(value)


class ParquetReader:
    """Parquet by pyarrow, read 10,000 rows at a time."""

    def rows(self, data: bytes, columns: Sequence[Column], csv: CsvOptions) -> Iterator[list[Any]]:
        """The fields of the column keys (or titles), row by row.

        Raises:
            UnreadableFile: a column the file has no field of.
        """
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

        file = pq.ParquetFile(io.BytesIO(data))
        names = set(file.schema_arrow.names)
        picked = []
        for column in columns:
            if column.key not in names and column.title not in names:
                raise UnreadableFile(f"no field {column.key!r} in the file")
            picked.append(column.key if column.key in names else column.title)
        return self._batches(file, picked)

    @staticmethod
    def _batches(file: Any, picked: list[str]) -> Iterator[list[Any]]:
        if not picked:
            return
        for batch in file.iter_batches(batch_size=_PARQUET_BATCH, columns=picked):
            values = [batch.column(name).to_pylist() for name in picked]
            yield from (list(row) for row in zip(*values, strict=True))

    def text(self, value: Any) -> str:
        """JSON's text, as JSON Lines (module docstring)."""
        return _json_text(value)


CSV_READER = CsvReader()
XLSX_READER = XlsxReader()
JSONL_READER = JsonlReader()
PARQUET_READER = ParquetReader()
