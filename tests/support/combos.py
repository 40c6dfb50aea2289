"""Reading delivered exports back for the combination tests (test_file_combos*.py).

A delivered file is unpacked (:func:`unpack`: gzip, or the ZIP's entries in order
without ``manifest.json``) and each file is read with its format's real reader
(:func:`read_table`: ``csv`` with the file's options, ``openpyxl``, ``json`` per line,
``pyarrow``). :func:`canonical` turns a row as a reader gives it into the text the
plain CSV export holds for the same values, after checking that each value has the
type its format promises (JSON Lines: integers as numbers, decimals and dates as
strings; Parquet: ``int``, ``Decimal``, ``date``; XLSX: numbers and dates), so rows of
every format compare with the plain CSV's.

The data: ORDERS of :data:`RANGE` at the test scale, 22 orders over 4 days (6, 6, 3, 7),
so a sharded export runs 4 day shards. The range holds a comment that starts with
``-`` (the CSV formula guard writes it ``'-ray ...``), one with ``;`` and two with
``,`` (quoted under those delimiters).
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import openpyxl
import pyarrow.parquet as pq

from export_center.columns import Column, ColumnType
from export_center.writers.csv import needs_formula_guard
from providers.samples import ORDERS_COLUMNS

RANGE = {"from": "1992-01-23", "to": "1992-01-26"}
"""Four days of ORDERS: 22 orders at the test scale, four day shards."""
RANGE_ROWS = 22
RANGE_SHARDS = 4
GUARDED_COMMENT = "-ray among the accounts. blithely even gifts thrash against the carefu"
"""The comment in :data:`RANGE` that a spreadsheet would read as a formula."""
SEMICOLON_COMMENT = "bold requests; blit"

CHOSEN: list[Any] = [
    {"key": "o_totalprice", "title": "Amount"},
    "o_orderkey",
    "o_orderdate",
    {"key": "c_name", "title": "客户"},
    "o_comment",
]
"""The chosen columns: reordered, two renamed (one in Chinese)."""
CHOSEN_KEYS = ["o_totalprice", "o_orderkey", "o_orderdate", "c_name", "o_comment"]
CHOSEN_TITLES = ["Amount", "Order key", "Order date", "客户", "Comment"]

DECLARED = {c.key: c for c in ORDERS_COLUMNS}
DECLARED_KEYS = [c.key for c in ORDERS_COLUMNS]
DECLARED_TITLES = [c.title for c in ORDERS_COLUMNS]

CODECS = {"utf-8-bom": "utf-8-sig", "utf-8": "utf-8", "gb18030": "gb18030"}
BOM = b"\xef\xbb\xbf"
MANIFEST = "manifest.json"


def sha256(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Delivered:
    """One file of a download: the download itself, or one entry of its ZIP."""

    name: str
    data: bytes


def unpack(data: bytes, file_name: str) -> list[Delivered]:
    """The files a download holds: a ZIP's entries in ZIP order (``manifest.json``,
    which must be the last entry, left out), a ``.gz``'s content, or the file itself."""
    if file_name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
            assert names[-1] == MANIFEST, names
            return [Delivered(name, archive.read(name)) for name in names[:-1]]
    if file_name.endswith(".gz"):
        assert data[:2] == b"\x1f\x8b", "not gzip"
        return [Delivered(file_name[: -len(".gz")], gzip.decompress(data))]
    return [Delivered(file_name, data)]


def zip_manifest(data: bytes) -> dict[str, Any]:
    """The parsed ``manifest.json`` of a delivered ZIP."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        loaded = json.loads(archive.read(MANIFEST).decode("utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def rezip(data: bytes, order: Sequence[int]) -> bytes:
    """The ZIP ``data`` written again with its entries in ``order`` (indexes into its
    entry list), each entry's bytes unchanged."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        infos = source.infolist()
        for index in order:
            target.writestr(infos[index], source.read(infos[index]))
    return out.getvalue()


@dataclass(frozen=True)
class Table:
    """One file as its reader gives it.

    Attributes:
        head: the header titles (CSV, XLSX; empty for a CSV without header), the
            objects' keys (JSON Lines) or the field names (Parquet).
        rows: the data rows, values as the reader gives them.
        titles: Parquet's field ``title`` metadata (the header titles), else empty.
        sheets: the worksheets of a workbook (1 for the other formats).
    """

    head: list[str]
    rows: list[list[Any]]
    titles: list[str]
    sheets: int = 1


def csv_text(data: bytes, encoding: str) -> str:
    """A CSV file's text: a BOM exactly when ``utf-8-bom``, decoded strictly."""
    assert data.startswith(BOM) == (encoding == "utf-8-bom"), data[:8]
    return data.decode(CODECS[encoding])


def read_csv_table(
    data: bytes, *, encoding: str = "utf-8-bom", delimiter: str = ",", header: bool = True
) -> Table:
    """A CSV file read with ``csv.reader`` (strict) under its options."""
    records = list(
        csv.reader(
            io.StringIO(csv_text(data, encoding), newline=""), delimiter=delimiter, strict=True
        )
    )
    if not header:
        return Table([], records, [])
    assert records, "no header row"
    return Table(records[0], records[1:], [])


def read_xlsx_table(data: bytes) -> Table:
    """A workbook read with openpyxl: every sheet starts with the same header row."""
    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
    try:
        head: list[str] = []
        rows: list[list[Any]] = []
        for sheet in book.worksheets:
            values = [list(row) for row in sheet.iter_rows(values_only=True)]
            assert values, f"sheet {sheet.title} is empty"
            assert not head or values[0] == head, (values[0], head)
            head = values[0]
            rows.extend(values[1:])
        sheets = len(book.worksheets)
    finally:
        book.close()
    return Table(head, rows, [], sheets)


def read_jsonl_table(data: bytes) -> Table:
    """A JSON Lines file: one object per LF-ended line, every object with the same keys
    in the same order."""
    text = data.decode("utf-8")
    assert text.endswith("\n") or not text
    objects = [json.loads(line) for line in text.split("\n")[:-1]]
    keys = list(objects[0]) if objects else []
    assert all(list(item) == keys for item in objects)
    return Table(keys, [[item[k] for k in keys] for item in objects], [])


def read_parquet_table(data: bytes) -> Table:
    """A Parquet file read with pyarrow (its field names and ``title`` metadata)."""
    table = pq.read_table(io.BytesIO(data))
    titles = [(f.metadata or {}).get(b"title", b"").decode("utf-8") for f in table.schema]
    columns = [table.column(name).to_pylist() for name in table.column_names]
    rows = [list(row) for row in zip(*columns, strict=True)]
    return Table(list(table.column_names), rows, titles)


def read_table(fmt: str, data: bytes, csv_options: dict[str, Any] | None = None) -> Table:
    """One file of format ``fmt`` read with its real reader (CSV with ``csv_options``:
    the API's ``encoding``, ``delimiter``, ``header``)."""
    if fmt == "csv":
        options = csv_options or {}
        return read_csv_table(
            data,
            encoding=options.get("encoding", "utf-8-bom"),
            delimiter=options.get("delimiter", ","),
            header=options.get("header", True),
        )
    readers = {"xlsx": read_xlsx_table, "jsonl": read_jsonl_table, "parquet": read_parquet_table}
    return readers[fmt](data)


def _unguard(text: str) -> str:
    """A CSV STRING cell as the value it stands for (the formula guard's ``'`` off)."""
    return text[1:] if text.startswith("'") and needs_formula_guard(text[1:]) else text


def _scaled(number: Decimal, column: Column) -> str:
    scale = column.scale if column.scale is not None else 0
    return format(number.quantize(Decimal(1).scaleb(-scale)), "f")


def _kinds(fmt: str) -> dict[ColumnType, tuple[type, ...]]:
    """The Python types a reader of ``fmt`` gives for each column type."""
    if fmt == "csv":
        return dict.fromkeys(ColumnType, (str,))
    if fmt == "jsonl":
        return {
            ColumnType.INTEGER: (int,),
            ColumnType.DECIMAL: (str,),
            ColumnType.DATE: (str,),
            ColumnType.STRING: (str,),
        }
    if fmt == "parquet":
        return {
            ColumnType.INTEGER: (int,),
            ColumnType.DECIMAL: (Decimal,),
            ColumnType.DATE: (dt.date,),
            ColumnType.STRING: (str,),
        }
    return {  # xlsx: numbers, date cells, text
        ColumnType.INTEGER: (int,),
        ColumnType.DECIMAL: (float, int),
        ColumnType.DATE: (dt.datetime,),
        ColumnType.STRING: (str,),
    }


def canonical(fmt: str, keys: Sequence[str], row: Sequence[Any]) -> list[str]:
    """A row read from a file of ``fmt`` as the plain CSV's cell texts.

    Checks first that each value has the type ``fmt`` promises for its column's type
    (:func:`_kinds`); DECIMAL text keeps its scale exactly (JSON Lines strings and
    Parquet decimals compare digit for digit; XLSX numbers are doubles, quantized to the
    declared scale). STRING cells of a CSV lose the formula guard's ``'``.
    """
    assert len(row) == len(keys), (row, keys)
    kinds = _kinds(fmt)
    out: list[str] = []
    for key, value in zip(keys, row, strict=True):
        column = DECLARED[key]
        kind = ColumnType(column.type)
        assert isinstance(value, kinds[kind]) and not isinstance(value, bool), (fmt, key, value)
        if fmt == "csv":
            out.append(_unguard(value) if kind is ColumnType.STRING else value)
        elif kind is ColumnType.INTEGER:
            out.append(str(value))
        elif kind is ColumnType.DECIMAL:
            number = Decimal(repr(value)) if fmt == "xlsx" else Decimal(value)
            out.append(_scaled(number, column) if fmt == "xlsx" else format(number, "f"))
        elif kind is ColumnType.DATE:
            out.append(value.date().isoformat() if fmt == "xlsx" else str(value))
        else:
            out.append(value)
    return out


def project(rows: Sequence[Sequence[str]], keys: Sequence[str]) -> list[list[str]]:
    """Rows of every declared column (the plain CSV's order) cut to ``keys``."""
    picks = [DECLARED_KEYS.index(key) for key in keys]
    return [[row[i] for i in picks] for row in rows]


def expected_totals(keys: Sequence[str], rows: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The control totals of canonical ``rows``: exact sums of the INTEGER and DECIMAL
    columns, min/max of the DATE columns (none of the chosen cells is empty)."""
    columns: dict[str, Any] = {}
    for index, key in enumerate(keys):
        kind = ColumnType(DECLARED[key].type)
        values = [row[index] for row in rows]
        if kind is ColumnType.INTEGER:
            columns[key] = {"sum": str(sum(int(v) for v in values)), "nulls": 0}
        elif kind is ColumnType.DECIMAL:
            columns[key] = {"sum": format(sum(Decimal(v) for v in values), "f"), "nulls": 0}
        elif kind is ColumnType.DATE:
            columns[key] = {"min": min(values), "max": max(values), "nulls": 0}
    return {"rowCount": len(rows), "columns": columns}
