"""The day-shard planner: half-open windows in the export's time zone (DST days of 23
and 25 hours, no gap, no overlap), grouping under ``max_shards``, and the registry's
``shards`` mapping."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from zoneinfo import ZoneInfo

import pytest

from export_center.attempt.shards import local_midnight, plan_shards
from export_center.registry import ExportType, RegistryError, ShardSpec, parse_registry

BASE = ExportType(
    code="EVENTS",
    title="Events",
    provider_url="http://provider.local",
    provider_path="/internal/exports/v1/EVENTS/batches",
    required_permission="export:events:create",
    app_scope="PLATFORM",
    enabled=True,
    max_rows=1000,
    batch_size=100,
    max_attempts=3,
    date_range=("from", "to"),
    shards=ShardSpec(by="day", max_shards=64, parallel=4),
)


def _hours(start: str, end: str) -> float:
    return (
        dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)
    ).total_seconds() / 3600


@pytest.mark.parametrize(
    ("first", "last", "hours"),
    [("2024-03-09", "2024-03-11", [24, 23, 24]), ("2024-11-02", "2024-11-04", [24, 25, 24])],
)
def test_dst_days_are_23_and_25_hours_without_gap_or_overlap(
    first: str, last: str, hours: list[int]
) -> None:
    shards = plan_shards(BASE, {"from": first, "to": last}, "America/New_York")
    assert [s.key for s in shards] == [
        (dt.date.fromisoformat(first) + dt.timedelta(days=i)).isoformat() for i in range(3)
    ]
    assert [_hours(s.start, s.end) for s in shards] == hours
    for before, after in zip(shards, shards[1:], strict=False):
        assert before.end == after.start  # half-open: one ends where the next starts
    assert dt.datetime.fromisoformat(shards[0].start) == dt.datetime(
        int(first[:4]), int(first[5:7]), int(first[8:]), tzinfo=ZoneInfo("America/New_York")
    )


def test_every_instant_of_the_range_falls_in_exactly_one_window() -> None:
    shards = plan_shards(BASE, {"from": "2024-03-01", "to": "2024-11-30"}, "America/New_York")
    start = dt.datetime.fromisoformat(shards[0].start)
    end = dt.datetime.fromisoformat(shards[-1].end)
    moment = start
    windows = [
        (dt.datetime.fromisoformat(s.start), dt.datetime.fromisoformat(s.end)) for s in shards
    ]
    while moment < end:
        assert sum(a <= moment < b for a, b in windows) == 1, moment
        moment += dt.timedelta(minutes=37)


def test_a_long_range_groups_days_under_max_shards() -> None:
    etype = replace(BASE, shards=ShardSpec(max_shards=4))
    shards = plan_shards(etype, {"from": "2024-01-01", "to": "2024-01-10"}, "UTC")
    assert [s.key for s in shards] == [
        "2024-01-01..2024-01-03",
        "2024-01-04..2024-01-06",
        "2024-01-07..2024-01-08",
        "2024-01-09..2024-01-10",
    ]
    narrowed = shards[1].parameters(
        {"from": "2024-01-01", "to": "2024-01-10", "x": 1}, ("from", "to")
    )
    assert narrowed == {"from": "2024-01-04", "to": "2024-01-06", "x": 1}
    described = shards[3].describe(len(shards))
    assert described == {
        "id": "2024-01-09..2024-01-10",
        "index": 3,
        "count": 4,
        "from": "2024-01-09T00:00:00+00:00",
        "to": "2024-01-11T00:00:00+00:00",
    }


@pytest.mark.parametrize(
    "parameters",
    [{}, {"from": "2024-01-01"}, {"to": "2024-01-01"}, {"from": "2024-02-01", "to": "2024-01-01"}],
)
def test_without_both_dates_the_export_is_one_shard(parameters: dict[str, str]) -> None:
    [only] = plan_shards(BASE, parameters, "UTC")
    assert (only.key, only.first, only.describe(1)) == ("all", None, None)
    assert only.parameters(parameters, ("from", "to")) == parameters


def test_a_type_without_shards_is_one_shard() -> None:
    [only] = plan_shards(
        replace(BASE, shards=None), {"from": "2024-01-01", "to": "2024-01-03"}, "UTC"
    )
    assert only.key == "all"


def test_a_zone_that_skips_midnight_starts_the_day_after_the_gap() -> None:
    # America/Santiago sprang forward at 00:00 on 2024-09-08: the day starts at 01:00.
    start = local_midnight(dt.date(2024, 9, 8), ZoneInfo("America/Santiago"))
    assert (start.hour, start.minute) == (1, 0)
    assert start.utcoffset() == dt.timedelta(hours=-3)


YAML = """
EVENTS:
  provider_url: http://provider.local
  provider_path: /internal/exports/v1/EVENTS/batches
  required_permission: export:events:create
  app_scope: PLATFORM
  parameters:
    - {name: from, type: date}
    - {name: to, type: date}
  date_range: [from, to]
"""


def test_registry_reads_the_shards_mapping() -> None:
    registry = parse_registry(
        YAML + "  shards: {by: day, max_shards: 10, parallel: 2}\n",
        source="t.yaml",
        allowed_hosts={"provider.local"},
    )
    etype = registry.get("EVENTS")
    assert etype is not None and etype.shards == ShardSpec("day", 10, 2)


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        ("{by: hour}", "only 'day'"),
        ("{by: day, parallel: 0}", "parallel: must be an integer in 1..16"),
        ("{by: day, max_shards: 5000}", "max_shards: must be an integer in 1..1,000"),
        ("{by: day, width: 2}", "unknown keys ['width']"),
        ("[day]", "must be a mapping"),
    ],
)
def test_registry_refuses_bad_shards(shards: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_registry(
            YAML + f"  shards: {shards}\n", source="t.yaml", allowed_hosts={"provider.local"}
        )


def test_registry_refuses_shards_without_a_date_range() -> None:
    text = YAML.replace("  date_range: [from, to]\n", "") + "  shards: {by: day}\n"
    with pytest.raises(RegistryError, match="needs a date_range"):
        parse_registry(text, source="t.yaml", allowed_hosts={"provider.local"})


@pytest.mark.parametrize(
    ("first", "last", "zone"),
    [
        ("0001-01-01", "9999-12-31", "UTC"),
        ("9999-12-31", "9999-12-31", "UTC"),
        ("0001-01-01", "0001-01-01", "Asia/Shanghai"),
        ("9999-12-30", "9999-12-31", "America/New_York"),
    ],
)
def test_a_range_at_the_ends_of_the_calendar_is_one_exact_shard(
    first: str, last: str, zone: str
) -> None:
    [only] = plan_shards(BASE, {"from": first, "to": last}, zone)
    assert only.key == "all"
    assert only.parameters({"from": first, "to": last}, ("from", "to")) == {
        "from": first,
        "to": last,
    }


def test_a_range_just_inside_the_calendar_still_splits() -> None:
    shards = plan_shards(BASE, {"from": "9999-12-28", "to": "9999-12-30"}, "UTC")
    assert [s.key for s in shards] == ["9999-12-28", "9999-12-29", "9999-12-30"]
