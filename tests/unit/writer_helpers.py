"""Helpers shared by the CSV and XLSX writer tests."""

from __future__ import annotations

import contextlib
import io
import time
import types
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from unittest import mock

from openpyxl import load_workbook
from openpyxl.workbook.workbook import Workbook

from export_center.columns import Column, ColumnType
from export_center.writers import WriterStats, open_writer, xlsx_parts


def cols(*specs: str | tuple[str, ColumnType]) -> list[Column]:
    """Columns whose title equals their key; a bare name is a STRING column."""
    out = []
    for spec in specs:
        key, kind = (spec, ColumnType.STRING) if isinstance(spec, str) else spec
        out.append(Column(key, key, kind))
    return out


def write_file(
    fmt: str,
    columns: list[Column],
    batches: Sequence[Sequence[Mapping[str, Any]]],
    **options: Any,
) -> tuple[bytes, WriterStats]:
    """Write ``batches`` of rows with ``write_rows``; return the bytes and the stats."""
    out = io.BytesIO()
    writer = open_writer(fmt, out, columns, **options)
    for batch in batches:
        writer.write_rows(batch)
    stats = writer.close()
    assert not out.closed  # close() never closes the caller's stream
    return out.getvalue(), stats


def write_columns_file(
    fmt: str,
    columns: list[Column],
    batches: Sequence[Sequence[Sequence[Any]]],
    **options: Any,
) -> tuple[bytes, WriterStats]:
    """Write column-major ``batches`` with ``write_columns`` (the pipeline's form)."""
    out = io.BytesIO()
    writer = open_writer(fmt, out, columns, **options)
    for batch in batches:
        writer.write_columns(batch)
    stats = writer.close()
    return out.getvalue(), stats


@contextlib.contextmanager
def frozen_package_time() -> Iterator[None]:
    """Freeze the two clocks of an XLSX package, so two files can be compared byte for byte.

    The ZIP entries' modification times (``zipfile`` reads ``time.time()``) and
    ``docProps/core.xml``'s creation time are "now"; within the block they are one
    fixed moment.
    """
    written = xlsx_parts._written_at()
    clock = types.SimpleNamespace(time=lambda: 1_700_000_000.0, localtime=time.localtime)
    with (
        mock.patch.object(zipfile, "time", clock),
        mock.patch.object(xlsx_parts, "_written_at", lambda: written),
    ):
        yield


#: Cells that spreadsheet programs would run as formulas (CASES E06): the first eleven
#: start with a formula character (after blanks or line breaks), the last two hide one
#: behind a delimiter or a quote.
FORMULA_LIKE = [
    "=1+1",
    "+1+1",
    "-1+1",
    "@SUM(1,1)",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
    " =1+1",
    "\u00a0=1+1",
    "\uff1d1+1",
    "=cmd|' /C calc'!A0",
    "a,=1+1",
    'x";=1+1',
]


def write_xlsx(
    columns: list[Column],
    batches: Sequence[Sequence[Mapping[str, Any]]],
    **options: Any,
) -> tuple[bytes, WriterStats]:
    """The XLSX bytes and writer stats of ``batches`` written with ``options``."""
    return write_file("xlsx", columns, batches, **options)


def workbook(data: bytes) -> Workbook:
    """The workbook of XLSX bytes, read by openpyxl in full (not read-only) mode."""
    return load_workbook(io.BytesIO(data), read_only=False)


def sheet_xml(data: bytes) -> dict[str, bytes]:
    """Every worksheet part of XLSX bytes by its name, after a CRC check of the ZIP."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {
            name: archive.read(name)
            for name in archive.namelist()
            if name.startswith("xl/worksheets/sheet")
        }


def utf16_units(text: str) -> int:
    """The length of ``text`` in UTF-16 code units (what Excel counts in a cell)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2
