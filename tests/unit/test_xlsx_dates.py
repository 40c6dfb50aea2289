"""XLSX DATE and DATETIME serials against openpyxl's own conversion (1900 date system).

Excel counts the fictitious 1900-02-29 as serial 60: 1900-01-01 is 1, 1900-02-28 is 59,
1900-03-01 is 61. Days before 1900-01-01 cannot be shown by Excel and stay ISO text.
Each file is read back with openpyxl: the value and that the cell is a date cell.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from typing import Any

import pytest
from openpyxl import load_workbook
from openpyxl.utils.datetime import from_excel, to_excel

from export_center.columns import ColumnType
from tests.unit.writer_helpers import cols, write_columns_file

EARLY_DAYS = [dt.date(1900, 1, 1) + dt.timedelta(days=n) for n in range(90)]
"""Every day from 1900-01-01 to 1900-03-31."""

SPREAD_DAYS = [
    dt.date(1900, 1, 1) + dt.timedelta(days=n)
    for n in range(0, (dt.date(9999, 12, 31) - dt.date(1900, 1, 1)).days, 997)
] + [
    dt.date(1904, 1, 1),
    dt.date(1970, 1, 1),
    dt.date(2000, 2, 29),
    dt.date(2024, 2, 29),
    dt.date(2100, 3, 1),
    dt.date(9999, 12, 31),
]
"""Dates every 997 days up to 9999 plus leap days and the last day Excel shows."""

BEFORE_1900 = [dt.date(1899, 12, 31), dt.date(1899, 12, 30), dt.date(1800, 2, 28), dt.date(1, 1, 1)]


def sheet_values(data: bytes) -> list[str | None]:
    """The ``<v>`` text of A2, A3, ... (None for a cell without one)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        xml = archive.read("xl/worksheets/sheet1.xml").decode()
    cells = re.findall(r'<c r="A(\d+)"[^>]*>(.*?)</c>', xml)
    return [(m.group(1) if (m := re.search("<v>([^<]*)</v>", body)) else None) for _, body in cells]


def read_back(data: bytes, count: int) -> list[Any]:
    ws = load_workbook(io.BytesIO(data)).active
    return [ws.cell(row=row, column=1) for row in range(2, count + 2)]


def test_every_day_from_1900_01_01_to_1900_03_31_is_a_date_serial() -> None:
    data, _ = write_columns_file("xlsx", cols(("day", ColumnType.DATE)), [[EARLY_DAYS]])
    serials = sheet_values(data)[1:]  # A1 is the header
    assert serials == [str(int(to_excel(day))) for day in EARLY_DAYS]
    assert serials[:2] == ["1", "2"]
    assert serials[58:60] == ["59", "61"]  # 1900-02-28, 1900-03-01: 60 is never written
    for day, cell in zip(EARLY_DAYS, read_back(data, len(EARLY_DAYS)), strict=True):
        assert cell.value == dt.datetime(day.year, day.month, day.day)
        assert (cell.data_type, cell.is_date, cell.number_format) == ("d", True, "yyyy-mm-dd")
    assert from_excel(59) == dt.datetime(1900, 2, 28)
    assert from_excel(61) == dt.datetime(1900, 3, 1)


def test_a_spread_of_dates_up_to_9999_12_31() -> None:
    data, _ = write_columns_file("xlsx", cols(("day", ColumnType.DATE)), [[SPREAD_DAYS]])
    serials = sheet_values(data)[1:]
    assert serials == [str(int(to_excel(day))) for day in SPREAD_DAYS]
    assert serials[-1] == "2958465"
    for day, cell in zip(SPREAD_DAYS, read_back(data, len(SPREAD_DAYS)), strict=True):
        assert cell.value == dt.datetime(day.year, day.month, day.day)
        assert cell.is_date and cell.data_type == "d"


def test_dates_before_1900_stay_iso_text() -> None:
    days: list[Any] = [*BEFORE_1900, None, dt.date(1900, 1, 1)]
    data, _ = write_columns_file("xlsx", cols(("day", ColumnType.DATE)), [[days]])
    cells = read_back(data, len(days))
    assert [(c.value, c.data_type) for c in cells[:4]] == [
        ("1899-12-31", "s"),
        ("1899-12-30", "s"),
        ("1800-02-28", "s"),
        ("0001-01-01", "s"),
    ]
    assert cells[4].value is None
    assert (cells[5].value, cells[5].is_date) == (dt.datetime(1900, 1, 1), True)


def test_dates_outside_their_fast_path_follow_the_same_rule() -> None:
    # A date in a STRING column and a datetime in a DATE column take the per-value path.
    values: list[Any] = [dt.date(1900, 2, 28), dt.date(1900, 3, 1), dt.date(1899, 12, 31)]
    data, _ = write_columns_file("xlsx", cols("s"), [[values]])
    cells = read_back(data, 3)
    assert [c.value for c in cells] == [
        dt.datetime(1900, 2, 28),
        dt.datetime(1900, 3, 1),
        "1899-12-31",
    ]
    assert [c.is_date for c in cells] == [True, True, False]


EARLY_TIMES = [dt.time(0, 0), dt.time(12, 34, 56, 789_000), dt.time(23, 59, 59, 999_000)]


@pytest.mark.parametrize("aware", [False, True], ids=["naive", "utc"])
def test_every_datetime_from_1900_01_01_to_1900_03_31_is_a_date_serial(aware: bool) -> None:
    tz = dt.UTC if aware else None
    moments = [
        dt.datetime.combine(day, time, tzinfo=tz) for day in EARLY_DAYS for time in EARLY_TIMES
    ]
    data, _ = write_columns_file("xlsx", cols(("at", ColumnType.DATETIME)), [[moments]])
    serials = sheet_values(data)[1:]
    for moment, serial in zip(moments, serials, strict=True):
        assert serial is not None
        assert float(serial) == pytest.approx(to_excel(moment.replace(tzinfo=None)), abs=1e-10)
    assert float(serials[3 * 58 + 1]) == pytest.approx(59 + (12 * 3600 + 34 * 60 + 56.789) / 86400)
    assert float(serials[3 * 59]) == 61.0  # 1900-03-01 00:00
    for moment, cell in zip(moments, read_back(data, len(moments)), strict=True):
        assert cell.value == moment.replace(tzinfo=None)
        assert cell.is_date and cell.data_type == "d"
        assert cell.number_format == "yyyy-mm-dd hh:mm:ss"


def test_datetimes_spread_up_to_9999_12_31() -> None:
    moments = [
        dt.datetime.combine(day, dt.time(6, 7, 8, 9_000), tzinfo=dt.UTC) for day in SPREAD_DAYS
    ]
    moments[-1] = dt.datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=dt.UTC)
    data, _ = write_columns_file("xlsx", cols(("at", ColumnType.DATETIME)), [[moments]])
    for moment, cell in zip(moments, read_back(data, len(moments)), strict=True):
        assert cell.value == moment.replace(tzinfo=None)
        assert cell.is_date and cell.data_type == "d"


def test_datetimes_before_1900_stay_iso_text() -> None:
    moments: list[Any] = [
        dt.datetime(1899, 12, 31, 23, 59, 59, 999_000),
        dt.datetime(1899, 12, 31, 23, 59, 59, tzinfo=dt.UTC),
        dt.datetime(1900, 1, 1, 3, 0, tzinfo=dt.UTC),  # 1899-12-31 22:00 in New York
        dt.datetime(1900, 1, 1, 5, 0, tzinfo=dt.UTC),  # 1900-01-01 00:00 in New York
    ]
    data, _ = write_columns_file(
        "xlsx", cols(("at", ColumnType.DATETIME)), [[moments]], time_zone="America/New_York"
    )
    cells = read_back(data, len(moments))
    assert [(c.value, c.data_type) for c in cells[:3]] == [
        ("1899-12-31 23:59:59.999000", "s"),
        ("1899-12-31 18:59:59", "s"),
        ("1899-12-31 22:00:00", "s"),
    ]
    assert (cells[3].value, cells[3].is_date) == (dt.datetime(1900, 1, 1), True)
