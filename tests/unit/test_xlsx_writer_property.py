"""Streaming XLSX writer: any rows of every column type, split over sheets at any size,
read back with openpyxl cell by cell (hypothesis)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from tests.unit.writer_helpers import (
    sheet_xml,
    utf16_units,
    workbook,
    write_xlsx,
)

EXPORT_ZONE = "Asia/Shanghai"
ZONE = ZoneInfo(EXPORT_ZONE)
ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
EXCEL_ESCAPE = re.compile("_(?=x[0-9A-Fa-f]{4}_)")

PROPERTY_COLUMNS = [
    Column("s", "S", ColumnType.STRING),
    Column("i", "I", ColumnType.INTEGER),
    Column("d", "D", ColumnType.DECIMAL),
    Column("b", "B", ColumnType.BOOLEAN),
    Column("day", "Day", ColumnType.DATE),
    Column("at", "At", ColumnType.DATETIME),
]

texts = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
    st.text(st.sampled_from("ab =+-@\t\r\n\x00\x07\x16\ufffe\uffff😀中_x0041&<>\"'"), max_size=30),
    st.sampled_from(["x" * 40_000, "😀" * 20_000, "a" + "😀" * 16_383, "=1+1", "000123", ""]),
)
integers = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([0, 999_999_999_999_999, -999_999_999_999_999, 10**15, 9912140633506421]),
)
decimals = st.builds(
    lambda digits, places: Decimal(digits).scaleb(-places),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.integers(min_value=0, max_value=12),
) | st.sampled_from(
    [Decimal("-5.00"), Decimal("0.00000001"), Decimal("182210.40"), Decimal("1E+3")]
)
dates = st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(9999, 12, 31))
zones = st.sampled_from([None, dt.UTC, ZoneInfo("America/New_York"), ZoneInfo("Asia/Kolkata")])
datetimes = st.datetimes(
    min_value=dt.datetime(1900, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=zones
)
rows_strategy = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "s": st.none() | texts,
            "i": st.none() | integers,
            "d": st.none() | decimals,
            "b": st.none() | st.booleans(),
            "day": st.none() | dates,
            "at": st.none() | datetimes,
        },
    ),
    min_size=1,
    max_size=12,
)


def expected_text(text: str) -> str | None:
    text = ILLEGAL.sub("\ufffd", text)
    units = text.encode("utf-16-le", "surrogatepass")[: 2 * 32767]
    if len(units) >= 2 and 0xD8 <= units[-1] <= 0xDB:
        units = units[:-2]
    text = units.decode("utf-16-le", "surrogatepass")
    # openpyxl does not decode _xHHHH_ in inline strings (Excel does).
    return EXCEL_ESCAPE.sub("_x005F_", text) or None


def significant_digits(text: str) -> int:
    return len(text.lstrip("-").replace(".", "").strip("0"))


def check_cell(key: str, value: Any, cell: Any) -> None:
    got = cell.value
    if value is None:
        assert got is None
    elif key == "s":
        assert got == expected_text(value)
        if got is not None:
            assert cell.data_type == "s"
            assert utf16_units(got) <= 32767
    elif key == "i":
        if abs(value) < 10**15:
            assert (got, cell.data_type) == (value, "n")
        else:
            assert (got, cell.data_type) == (str(value), "s")
    elif key == "d":
        text = format(value, "f")
        if significant_digits(text) > 15:
            assert (got, cell.data_type) == (text, "s")
        else:
            assert cell.data_type == "n"
            assert isinstance(got, int | float)
            assert got == pytest.approx(float(value), rel=1e-9, abs=1e-300)
    elif key == "b":
        assert (got, cell.data_type) == (value, "b")
    elif key == "day":
        assert got == dt.datetime(value.year, value.month, value.day)
        assert cell.is_date
    elif key == "at":
        wall = value
        if value.tzinfo is not None:
            local = value.astimezone(ZONE)
            if local.utcoffset() != local.replace(fold=1 - local.fold).utcoffset():
                # A wall time repeated by a fall-back (Shanghai had DST in 1986-1991).
                assert (got, cell.data_type) == (local.isoformat(" "), "s")
                return
            wall = local.replace(tzinfo=None)
        assert cell.is_date and cell.data_type == "d"
        assert abs(got - wall) <= dt.timedelta(milliseconds=1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows_strategy, split=st.integers(min_value=1, max_value=12))
def test_property_every_cell_reads_back(rows: list[dict[str, Any]], split: int) -> None:
    batches = [rows[:split], rows[split:]]
    data, stats = write_xlsx(PROPERTY_COLUMNS, batches, time_zone=EXPORT_ZONE, sheet_row_limit=7)
    assert stats.rows == len(rows)
    assert stats.invalid_numbers == 0
    assert b"<f>" not in b"".join(sheet_xml(data).values())
    wb = workbook(data)
    assert len(wb.worksheets) == (len(rows) + 6) // 7
    read_back: list[tuple[Any, ...]] = []
    for sheet_index, ws in enumerate(wb.worksheets):
        assert [c.value for c in ws[1]] == [c.title for c in PROPERTY_COLUMNS]
        in_sheet = min(7, len(rows) - sheet_index * 7)
        for number in range(2, in_sheet + 2):
            read_back.append(tuple(ws.cell(row=number, column=c) for c in range(1, 7)))
    assert len(read_back) == len(rows)
    for row, row_cells in zip(rows, read_back, strict=True):
        for column, cell in zip(PROPERTY_COLUMNS, row_cells, strict=True):
            check_cell(column.key, row.get(column.key), cell)
