"""Relative windows resolved in the schedule's zone at the fire instant."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from export_center.errors import ValidationFailed
from export_center.registry import ExportType
from export_center.schedules.windows import (
    Window,
    parse_window,
    resolve_window,
    window_from_json,
    window_parameters,
)

NY = ZoneInfo("America/New_York")
SH = ZoneInfo("Asia/Shanghai")


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_previous_day_in_new_york_on_the_23_hour_day() -> None:
    # 2026-03-08 has 23 hours in New York. A fire at 00:30 EDT on 03-09 (04:30 UTC)
    # exports 03-08; a fire at 23:30 EDT on 03-08 (03:30 UTC on 03-09) exports 03-07,
    # although the UTC date is already 03-09.
    day = Window("previous_day")
    assert resolve_window(day, at(2026, 3, 9, 4, 30), NY) == (date(2026, 3, 8), date(2026, 3, 8))
    assert resolve_window(day, at(2026, 3, 9, 3, 30), NY) == (date(2026, 3, 7), date(2026, 3, 7))


def test_previous_day_in_new_york_on_the_25_hour_day() -> None:
    # 2026-11-01 has 25 hours. 00:30 EST on 11-02 is 05:30 UTC; 23:30 EST on 11-01 is
    # 04:30 UTC on 11-02.
    day = Window("previous_day")
    assert resolve_window(day, at(2026, 11, 2, 5, 30), NY) == (date(2026, 11, 1),) * 2
    assert resolve_window(day, at(2026, 11, 2, 4, 30), NY) == (date(2026, 10, 31),) * 2
    # 01:30 happens twice on 11-01; either instant is the same local day.
    assert resolve_window(day, at(2026, 11, 1, 5, 30), NY) == (date(2026, 10, 31),) * 2
    assert resolve_window(day, at(2026, 11, 1, 6, 30), NY) == (date(2026, 10, 31),) * 2


def test_previous_week_is_monday_to_sunday() -> None:
    # Monday 2026-12-07 08:00 in Shanghai is 00:00 UTC.
    week = Window("previous_week")
    assert resolve_window(week, at(2026, 12, 7, 0), SH) == (date(2026, 11, 30), date(2026, 12, 6))
    # A Sunday: the week before this week (Mon 11-23 .. Sun 11-29).
    assert resolve_window(week, at(2026, 12, 6, 2), SH) == (date(2026, 11, 23), date(2026, 11, 29))
    # Across the year: Monday 2027-01-04 -> 2026-12-28 .. 2027-01-03.
    assert resolve_window(week, at(2027, 1, 4, 1), SH) == (date(2026, 12, 28), date(2027, 1, 3))


def test_month_windows_across_years_and_february() -> None:
    month = Window("previous_month")
    assert resolve_window(month, at(2027, 1, 1, 1), SH) == (date(2026, 12, 1), date(2026, 12, 31))
    assert resolve_window(month, at(2028, 3, 1, 1), SH) == (date(2028, 2, 1), date(2028, 2, 29))
    # 23:30 UTC on 2026-12-31 is already 2027-01-01 in Shanghai.
    assert resolve_window(month, at(2026, 12, 31, 23, 30), SH) == (
        date(2026, 12, 1),
        date(2026, 12, 31),
    )
    mtd = Window("month_to_date")
    assert resolve_window(mtd, at(2026, 12, 15, 1), SH) == (date(2026, 12, 1), date(2026, 12, 15))
    assert resolve_window(mtd, at(2027, 1, 1, 1), SH) == (date(2027, 1, 1), date(2027, 1, 1))


def test_last_n_days() -> None:
    w = parse_window({"lastNDays": 7})
    assert w == Window("lastNDays", 7)
    assert resolve_window(w, at(2026, 3, 2, 12), NY) == (date(2026, 2, 23), date(2026, 3, 1))
    assert window_from_json(w.to_json()) == w


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        {"lastNDays": 0},
        {"lastNDays": 367},
        {"lastNDays": "7"},
        {"lastNDays": True},
        {"lastNDays": 3, "x": 1},
        7,
        [],
    ],
)
def test_bad_window(value: Any) -> None:
    with pytest.raises(ValidationFailed) as err:
        parse_window(value)
    assert (err.value.code, err.value.field) == ("INVALID_WINDOW", "window")


def _type(date_range: tuple[str, str] | None) -> ExportType:
    return ExportType(
        code="T",
        title="T",
        provider_url="self",
        provider_path="/p",
        required_permission="p",
        app_scope="PLATFORM",
        enabled=True,
        max_rows=10,
        batch_size=10,
        max_attempts=1,
        date_range=date_range,
    )


def test_window_parameters_use_the_date_range_names() -> None:
    params = window_parameters(
        Window("previous_day"), _type(("from", "to")), at(2026, 3, 9, 4, 30), NY
    )
    assert params == {"from": "2026-03-08", "to": "2026-03-08"}
    with pytest.raises(ValidationFailed) as err:
        window_parameters(Window("previous_day"), _type(None), at(2026, 3, 9), NY)
    assert err.value.code == "WINDOW_NOT_SUPPORTED"


def test_a_run_is_named_after_its_period_and_the_base_is_cut_never_the_period() -> None:
    from export_center.schedules.definition import run_task_name

    assert run_task_name("Weekly orders", ["2026-11-29", "2026-11-29"]) == (
        "Weekly orders 2026-11-29"
    )
    assert run_task_name("每周订单", ["2026-11-23", "2026-11-29"]) == (
        "每周订单 2026-11-23~2026-11-29"
    )
    long = run_task_name("x" * 100, ["2026-11-23", "2026-11-29"])
    assert len(long) == 100 and long.endswith(" 2026-11-23~2026-11-29")
    # A cut that ends on a space leaves no double space before the period.
    assert run_task_name("a" * 88 + " " + "b" * 20, ["2026-11-29"]) == "a" * 88 + " 2026-11-29"
