"""Fire times of schedules: APScheduler's cron trigger and the daylight-saving rule
(export_center.schedules.cron docstring), pinned to exact instants."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from export_center.errors import ValidationFailed
from export_center.schedules.cron import fire_times, next_fire_after


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def instants(cron: str, tz: str, after: datetime, count: int) -> list[tuple[str, datetime]]:
    return [(t.isoformat(), t.astimezone(UTC)) for t in fire_times(cron, tz, after, count)]


def test_berlin_spring_forward_fires_once_an_hour_later_on_the_wall() -> None:
    # 2026-03-29: 02:00 CET -> 03:00 CEST, so 02:30 does not exist that day.
    got = instants("30 2 * * *", "Europe/Berlin", utc(2026, 3, 27, 12), 3)
    assert got == [
        ("2026-03-28T02:30:00+01:00", utc(2026, 3, 28, 1, 30)),
        ("2026-03-29T03:30:00+02:00", utc(2026, 3, 29, 1, 30)),
        ("2026-03-30T02:30:00+02:00", utc(2026, 3, 30, 0, 30)),
    ]


def test_berlin_fall_back_fires_once_at_the_first_0230() -> None:
    # 2026-10-25: 03:00 CEST -> 02:00 CET, so 02:30 happens twice (00:30 and 01:30 UTC).
    got = instants("30 2 * * *", "Europe/Berlin", utc(2026, 10, 23, 12), 3)
    assert got == [
        ("2026-10-24T02:30:00+02:00", utc(2026, 10, 24, 0, 30)),
        ("2026-10-25T02:30:00+02:00", utc(2026, 10, 25, 0, 30)),
        ("2026-10-26T02:30:00+01:00", utc(2026, 10, 26, 1, 30)),
    ]
    # Asked from between the two 02:30s, the next fire is the next day's.
    assert next_fire_after("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 31)) == datetime(
        2026, 10, 26, 1, 30, tzinfo=UTC
    )


def test_hourly_keeps_the_repeated_hour_and_skips_the_missing_one() -> None:
    fall = instants("0 * * * *", "Europe/Berlin", utc(2026, 10, 24, 23, 30), 4)
    assert [u for _, u in fall] == [
        utc(2026, 10, 25, 0),
        utc(2026, 10, 25, 1),
        utc(2026, 10, 25, 2),
        utc(2026, 10, 25, 3),
    ]
    assert fall[1][0] == "2026-10-25T02:00:00+01:00"
    spring = instants("0 * * * *", "Europe/Berlin", utc(2026, 3, 28, 23, 30), 3)
    assert [s for s, _ in spring] == [
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]


def test_weekly_in_shanghai() -> None:
    got = fire_times("0 8 * * MON", "Asia/Shanghai", utc(2026, 12, 2), 2)
    assert [t.isoformat() for t in got] == [
        "2026-12-07T08:00:00+08:00",
        "2026-12-14T08:00:00+08:00",
    ]


def weekdays(cron: str, count: int = 7) -> list[str]:
    """The weekdays (Mon..Sun) of the next fires after Wednesday 2026-12-02 00:00 UTC."""
    return [t.strftime("%a") for t in fire_times(cron, "UTC", utc(2026, 12, 2), count)]


@pytest.mark.parametrize(
    ("dow", "days"),
    [
        # Cron numbering: 0 and 7 are Sunday, 1 Monday ... 6 Saturday (APScheduler alone
        # would read 0 as Monday).
        ("0", ["Sun"]),
        ("7", ["Sun"]),
        ("1", ["Mon"]),
        ("6", ["Sat"]),
        ("1-5", ["Mon", "Tue", "Wed", "Thu", "Fri"]),
        ("5-7", ["Fri", "Sat", "Sun"]),
        ("0-6", ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]),
        ("*/2", ["Sun", "Tue", "Thu", "Sat"]),
        ("1-7/3", ["Mon", "Thu", "Sun"]),
        ("1,3,5", ["Mon", "Wed", "Fri"]),
        ("MON-FRI", ["Mon", "Tue", "Wed", "Thu", "Fri"]),
        ("sat,SUN", ["Sat", "Sun"]),
        ("SUN", ["Sun"]),
        ("*", ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]),
    ],
)
def test_day_of_week_means_what_it_means_in_crontab(dow: str, days: list[str]) -> None:
    got = weekdays(f"0 8 * * {dow}", 14)
    assert sorted(set(got)) == sorted(days)
    # Each named day fires once a week: 14 fires cover 14 / len(days) weeks exactly.
    assert len(got) == 14 and all(got.count(d) >= 14 // len(days) for d in days)


def test_day_of_month_and_day_of_week_together_fire_on_either() -> None:
    got = fire_times("0 8 1 * MON", "UTC", utc(2026, 11, 28), 5)
    # Monday 30 Nov, Tuesday 1 Dec (the 1st), then the Mondays of December.
    assert [t.date().isoformat() for t in got] == [
        "2026-11-30",
        "2026-12-01",
        "2026-12-07",
        "2026-12-14",
        "2026-12-21",
    ]
    # One restricted field: that field alone (the 1st of each month).
    assert [t.day for t in fire_times("0 8 1 * *", "UTC", utc(2026, 11, 28), 2)] == [1, 1]
    assert weekdays("0 8 */1 * 1", 3) == ["Mon", "Mon", "Mon"]  # "*/1" counts as "*"


@pytest.mark.parametrize(
    "cron",
    [
        "",
        "* * * *",
        "61 * * * *",
        "0 8 * * FUNDAY",
        "0 0 31 2 *",
        "x" * 130,
        "0 8 * * 8",
        "0 8 * * 5-1",
        "0 8 * * */0",
        "0 8 * * L",
        "0 8 * * MON#2",
    ],
)
def test_invalid_cron(cron: str) -> None:
    with pytest.raises(ValidationFailed) as err:
        fire_times(cron, "UTC", utc(2026, 1, 1), 1)
    assert (err.value.code, err.value.field) == ("INVALID_CRON", "cron")


@pytest.mark.parametrize("tz", ["Mars/Base", "asia/shanghai", "+08:00", ""])
def test_unknown_zone(tz: str) -> None:
    with pytest.raises(ValidationFailed) as err:
        fire_times("0 8 * * *", tz, utc(2026, 1, 1), 1)
    assert (err.value.code, err.value.field) == ("UNKNOWN_TIME_ZONE", "timezone")
