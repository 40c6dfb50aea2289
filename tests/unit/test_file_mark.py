"""The mark of an XLSX file (task id, requester, creation time; the optional footer):
written by the streaming writer and by the writer cut by bytes, whose told size stays
the written size; unmarked files have neither custom properties nor a footer; texts are
escaped (an ``&`` in a user id is doubled for the footer codes and XML-escaped)."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from typing import Any

import openpyxl

from export_center.packaging.split import open_sized_writer
from export_center.writers.file_mark import FileMark, marked
from export_center.writers.formats import FORMATS
from tests.unit.test_formats import COLUMNS, ROWS, _columns, _file
from tests.unit.writer_helpers import frozen_package_time

XLSX = FORMATS["xlsx"]
MARK = FileMark("exp_01TEST", "t1/a&b<c>", dt.datetime(2026, 12, 2, 9, 30, tzinfo=dt.UTC), True)


def _book(data: bytes) -> Any:
    return openpyxl.load_workbook(io.BytesIO(data))


def test_a_marked_file_names_its_task_requester_and_time_and_prints_the_footer() -> None:
    with marked(MARK):
        data, _ = _file(XLSX, ROWS)
    book = _book(data)
    assert book.properties.identifier == "exp_01TEST"
    assert (
        book.properties.description == "Export Center exp_01TEST · t1/a&b<c> · 2026-12-02T09:30:00Z"
    )
    custom = {p.name: p.value for p in book.custom_doc_props.props}
    assert custom["ExportCenterTaskId"] == "exp_01TEST"
    assert custom["ExportCenterRequester"] == "t1/a&b<c>"
    assert book.active.oddFooter.left.text == MARK.line.replace("&", "&&")
    assert [[c.value for c in row] for row in book.active.iter_rows()][1][0] == "r0"


def test_an_unmarked_file_has_no_custom_properties_and_no_footer() -> None:
    data, _ = _file(XLSX, ROWS)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert "docProps/custom.xml" not in archive.namelist()
        assert b"headerFooter" not in archive.read("xl/worksheets/sheet1.xml")
    with marked(FileMark(MARK.task_no, MARK.requester, MARK.created_at, footer=False)):
        quiet, _ = _file(XLSX, ROWS)
    assert _book(quiet).active.oddFooter.left.text is None
    assert _book(quiet).properties.identifier == "exp_01TEST"


def test_the_size_told_by_the_writer_cut_by_bytes_is_the_size_of_a_marked_file() -> None:
    def sized_file(rows: list[dict[str, Any]], cap: int) -> tuple[bytes, Any]:
        out = io.BytesIO()
        with frozen_package_time(), marked(MARK):
            sized = open_sized_writer(XLSX, out, COLUMNS, time_zone="UTC", sheet_row_limit=None)
            back = sized.write_within(_columns(rows), cap, step=1)
            sized.close()
        return out.getvalue(), back

    two, back = sized_file(ROWS[:2], 10**6)
    assert back is None
    data, back = sized_file(ROWS, len(two))
    assert back is not None and [list(c) for c in back] == _columns(ROWS[2:])
    assert data == two
    assert _book(data).active.oddFooter.left.text == MARK.line.replace("&", "&&")
