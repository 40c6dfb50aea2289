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


@pytest.mark.parametrize(
    "cron", ["", "* * * *", "61 * * * *", "0 8 * * FUNDAY", "0 0 31 2 *", "x" * 130]
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
