"""DATETIME in the export time zone (CASES E13) around DST transitions, CSV and XLSX.

Rule: an aware datetime is written as its wall time in the export zone; a wall time
that occurs twice there (the repeated hour of a DST fall-back) carries its UTC offset,
``2024-11-03 01:30:00-04:00`` / ``2024-11-03 01:30:00-05:00``. CSV writes that text;
XLSX writes it as a text cell and every other value as a date serial. The
spring-forward gap cannot occur for aware inputs: the wall times jump over it.
Files are read back with the ``csv`` module and openpyxl.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from openpyxl import load_workbook

from export_center.columns import ColumnType
from export_center.values import coerce
from export_center.writers.base import has_fixed_offset, wall_clock
from tests.unit.writer_helpers import cols, write_columns_file, write_file

AT = cols(("at", ColumnType.DATETIME))


def utc(*fields: int) -> dt.datetime:
    return dt.datetime(*fields, tzinfo=dt.UTC)  # type: ignore[misc]


# (moment in UTC, expected CSV text) per export zone; an offset marks a repeated wall time.
CASES: dict[str, list[tuple[dt.datetime, str]]] = {
    "America/New_York": [
        # fall-back 2024-11-03 02:00 EDT -> 01:00 EST: 01:00-01:59:59 occurs twice
        (utc(2024, 11, 3, 4, 59, 59), "2024-11-03 00:59:59"),
        (utc(2024, 11, 3, 5, 0), "2024-11-03 01:00:00-04:00"),
        (utc(2024, 11, 3, 5, 30), "2024-11-03 01:30:00-04:00"),
        (utc(2024, 11, 3, 5, 59, 59, 999_999), "2024-11-03 01:59:59.999999-04:00"),
        (utc(2024, 11, 3, 6, 0), "2024-11-03 01:00:00-05:00"),
        (utc(2024, 11, 3, 6, 30), "2024-11-03 01:30:00-05:00"),
        (utc(2024, 11, 3, 6, 59, 59), "2024-11-03 01:59:59-05:00"),
        (utc(2024, 11, 3, 7, 0), "2024-11-03 02:00:00"),
        (utc(2024, 11, 3, 17, 0), "2024-11-03 12:00:00"),
        # spring-forward 2024-03-10 02:00 EST -> 03:00 EDT: no 02:xx wall time
        (utc(2024, 3, 10, 6, 59, 59), "2024-03-10 01:59:59"),
        (utc(2024, 3, 10, 7, 0), "2024-03-10 03:00:00"),
        (utc(2024, 3, 10, 7, 30), "2024-03-10 03:30:00"),
        # other years' transitions and an ordinary day
        (utc(2023, 11, 5, 5, 15), "2023-11-05 01:15:00-04:00"),
        (utc(2023, 11, 5, 6, 15), "2023-11-05 01:15:00-05:00"),
        (utc(2024, 7, 4, 16, 0), "2024-07-04 12:00:00"),
    ],
    "Europe/Berlin": [
        # fall-back 2024-10-27 03:00 CEST -> 02:00 CET: 02:00-02:59:59 occurs twice
        (utc(2024, 10, 26, 23, 59, 59), "2024-10-27 01:59:59"),
        (utc(2024, 10, 27, 0, 0), "2024-10-27 02:00:00+02:00"),
        (utc(2024, 10, 27, 0, 30), "2024-10-27 02:30:00+02:00"),
        (utc(2024, 10, 27, 0, 59, 59), "2024-10-27 02:59:59+02:00"),
        (utc(2024, 10, 27, 1, 0), "2024-10-27 02:00:00+01:00"),
        (utc(2024, 10, 27, 1, 30), "2024-10-27 02:30:00+01:00"),
        (utc(2024, 10, 27, 1, 59, 59), "2024-10-27 02:59:59+01:00"),
        (utc(2024, 10, 27, 2, 0), "2024-10-27 03:00:00"),
        # spring-forward 2024-03-31 02:00 CET -> 03:00 CEST: no 02:xx wall time
        (utc(2024, 3, 31, 0, 59, 59), "2024-03-31 01:59:59"),
        (utc(2024, 3, 31, 1, 0), "2024-03-31 03:00:00"),
        (utc(2024, 3, 31, 1, 30), "2024-03-31 03:30:00"),
        (utc(2024, 1, 15, 11, 0), "2024-01-15 12:00:00"),
    ],
    "Asia/Shanghai": [
        # the same UTC moments: no DST today, so no offset anywhere
        (utc(2024, 11, 3, 5, 30), "2024-11-03 13:30:00"),
        (utc(2024, 11, 3, 6, 30), "2024-11-03 14:30:00"),
        (utc(2024, 10, 27, 0, 30), "2024-10-27 08:30:00"),
        (utc(2024, 3, 10, 7, 0), "2024-03-10 15:00:00"),
        (utc(2024, 3, 1, 4, 0), "2024-03-01 12:00:00"),  # CASES E13
        # Shanghai had DST until 1991: its last fall-back repeated 01:00-01:59:59
        (utc(1991, 9, 14, 15, 30), "1991-09-15 00:30:00"),
        (utc(1991, 9, 14, 16, 30), "1991-09-15 01:30:00+09:00"),
        (utc(1991, 9, 14, 17, 30), "1991-09-15 01:30:00+08:00"),
        (utc(1991, 9, 14, 18, 30), "1991-09-15 02:30:00"),
    ],
    "UTC": [
        (utc(2024, 11, 3, 5, 30), "2024-11-03 05:30:00"),
        (utc(2024, 11, 3, 6, 30), "2024-11-03 06:30:00"),
        (utc(2024, 10, 27, 0, 30), "2024-10-27 00:30:00"),
        (utc(2024, 3, 10, 7, 0), "2024-03-10 07:00:00"),
        (utc(1991, 9, 14, 16, 30), "1991-09-14 16:30:00"),
    ],
}
ZONES = list(CASES)


def is_repeated(text: str) -> bool:
    """The expected text carries an offset (``...-04:00``): a repeated wall time."""
    return len(text) > 19 and text[-6] in "+-" and text[-3] == ":"


def csv_cells(data: bytes) -> list[str]:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    return [row[0] for row in rows[1:]]


def xlsx_cells(data: bytes, count: int) -> list[Any]:
    ws = load_workbook(io.BytesIO(data)).active
    return [ws.cell(row=row, column=1) for row in range(2, count + 2)]


@pytest.mark.parametrize("zone", ZONES)
def test_wall_clock_marks_exactly_the_repeated_wall_times(zone: str) -> None:
    wall = wall_clock(zone)
    for moment, text in CASES[zone]:
        local, repeated = wall(moment)
        assert repeated is is_repeated(text), (zone, moment)
        expected = dt.datetime.fromisoformat(text)
        assert local.replace(tzinfo=None) == expected.replace(tzinfo=None)
        # The same instant (== across zones is False for a repeated time, PEP 495).
        assert local.astimezone(dt.UTC) == moment
        if repeated:
            assert local.isoformat(" ") == text
            assert local.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("zone", ZONES)
def test_csv_writes_repeated_wall_times_with_their_offset(zone: str) -> None:
    moments: list[Any] = [m for m, _ in CASES[zone]] + [None]
    data, _ = write_columns_file("csv", AT, [[moments[:4]], [moments[4:]]], time_zone=zone)
    assert csv_cells(data) == [text for _, text in CASES[zone]] + [""]


@pytest.mark.parametrize("zone", ZONES)
def test_xlsx_writes_repeated_wall_times_as_text_and_the_rest_as_dates(zone: str) -> None:
    moments: list[Any] = [m for m, _ in CASES[zone]] + [None]
    data, _ = write_columns_file("xlsx", AT, [[moments[:4]], [moments[4:]]], time_zone=zone)
    cells = xlsx_cells(data, len(moments))
    for (_, text), cell in zip(CASES[zone], cells, strict=False):
        if is_repeated(text):
            assert (cell.value, cell.data_type) == (text, "s")
        else:
            wall = dt.datetime.fromisoformat(text)
            assert (cell.value, cell.data_type, cell.is_date) == (wall, "d", True)
            assert cell.number_format == "yyyy-mm-dd hh:mm:ss"
    assert cells[-1].value is None


def test_provider_values_of_the_repeated_hour_stay_distinguishable() -> None:
    # Provider ISO text, as values.coerce reads it; the export zone is America/New_York.
    raw = [
        "2024-11-03T01:30:00-04:00",
        "2024-11-03T01:30:00-05:00",
        "2024-11-03T05:30:00Z",
        "2024-11-03T06:30:00",  # naive: UTC by contract
        "2024-11-03T12:00:00-05:00",
    ]
    rows = [{"at": coerce(v, ColumnType.DATETIME)} for v in raw]
    expected = [
        "2024-11-03 01:30:00-04:00",
        "2024-11-03 01:30:00-05:00",
        "2024-11-03 01:30:00-04:00",
        "2024-11-03 01:30:00-05:00",
        "2024-11-03 12:00:00",
    ]
    data, _ = write_file("csv", AT, [rows], time_zone="America/New_York")
    assert csv_cells(data) == expected
    data, _ = write_file("xlsx", AT, [rows], time_zone="America/New_York")
    cells = xlsx_cells(data, len(rows))
    assert [(c.value, c.data_type) for c in cells[:4]] == [(t, "s") for t in expected[:4]]
    assert (cells[4].value, cells[4].is_date) == (dt.datetime(2024, 11, 3, 12), True)


def test_values_given_in_the_export_zone_itself_are_normalised() -> None:
    # astimezone keeps a datetime that already has the export zone as it is; a wall
    # time in the gap or a fold=1 outside a fall-back must not pass through unchecked.
    ny = ZoneInfo("America/New_York")
    values: list[Any] = [
        dt.datetime(2024, 11, 3, 1, 30, tzinfo=ny),  # fold=0: the first 01:30
        dt.datetime(2024, 11, 3, 1, 30, tzinfo=ny, fold=1),  # the second 01:30
        dt.datetime(2024, 3, 10, 2, 30, tzinfo=ny),  # in the gap: 07:30Z = 03:30 EDT
        dt.datetime(2024, 1, 2, 12, 0, tzinfo=ny, fold=1),  # fold means nothing here
        dt.datetime(2024, 11, 3, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
    ]
    data, _ = write_columns_file("csv", AT, [[values]], time_zone="America/New_York")
    assert csv_cells(data) == [
        "2024-11-03 01:30:00-04:00",
        "2024-11-03 01:30:00-05:00",
        "2024-03-10 03:30:00",
        "2024-01-02 12:00:00",
        "2024-11-03 01:30:00-05:00",
    ]


def test_naive_datetimes_are_written_as_given() -> None:
    values: list[Any] = [dt.datetime(2024, 11, 3, 1, 30), dt.datetime(2024, 3, 10, 2, 30)]
    data, _ = write_columns_file("csv", AT, [[values]], time_zone="America/New_York")
    assert csv_cells(data) == ["2024-11-03 01:30:00", "2024-03-10 02:30:00"]
    data, _ = write_columns_file("xlsx", AT, [[values]], time_zone="America/New_York")
    assert [c.value for c in xlsx_cells(data, 2)] == values


def test_a_repeated_wall_time_in_another_column_type_follows_the_same_rule() -> None:
    # A datetime in a STRING column takes the per-value path of both writers.
    moment = utc(2024, 11, 3, 6, 30)
    data, _ = write_columns_file("csv", cols("s"), [[[moment]]], time_zone="America/New_York")
    assert csv_cells(data) == ["2024-11-03 01:30:00-05:00"]
    data, _ = write_columns_file("xlsx", cols("s"), [[[moment]]], time_zone="America/New_York")
    cell = xlsx_cells(data, 1)[0]
    assert (cell.value, cell.data_type) == ("2024-11-03 01:30:00-05:00", "s")


@pytest.mark.parametrize(
    ("zone", "fixed"),
    [
        ("UTC", True),
        ("Etc/UTC", True),
        ("Etc/GMT-8", True),
        ("America/New_York", False),
        ("Europe/Berlin", False),
        ("Asia/Shanghai", False),  # local mean time until 1901, DST 1940s and 1986-1991
        ("Asia/Kolkata", False),
    ],
)
def test_only_fixed_offset_zones_skip_the_check(zone: str, fixed: bool) -> None:
    assert has_fixed_offset(zone) is fixed


def test_year_9999_beyond_the_zone_keeps_its_offset() -> None:
    # 9999-12-31T23:00Z is year 10000 in Berlin: written with its own offset, not lost.
    moment = utc(9999, 12, 31, 23, 0)
    data, _ = write_columns_file("csv", AT, [[[moment]]], time_zone="Europe/Berlin")
    assert csv_cells(data) == ["9999-12-31 23:00:00+00:00"]
    data, _ = write_columns_file("xlsx", AT, [[[moment]]], time_zone="Europe/Berlin")
    assert xlsx_cells(data, 1)[0].value == "9999-12-31 23:00:00+00:00"
