"""Splitting one export into day shards: the plan every attempt of a task shares.

A type with ``shards: {by: day}`` in the registry splits the days of its ``date_range``
(the two inclusive date parameters, e.g. ``from``/``to``) into windows of whole days in
the export's time zone. Each window is half-open, ``[start of its first day, start of
the day after its last day)``, so a 23-hour spring-forward day and a 25-hour fall-back
day neither leave a gap nor overlap their neighbours. A range longer than
``max_shards`` days groups consecutive days so there are at most ``max_shards`` windows
(the first ones one day longer when the days do not divide evenly).

A shard's provider request carries the export's parameters with the date range
narrowed to the window's days, so a provider that knows nothing of shards still answers
exactly the shard's rows, plus ``shard`` = ``{"id", "index", "count", "from", "to"}``
(``from``/``to`` ISO 8601 instants with their UTC offset) for providers that filter on
timestamps. An export without both dates, or whose range is empty, runs as one shard
with the parameters unchanged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from export_center.registry import ExportType

__all__ = ["Shard", "local_midnight", "plan_shards"]


@dataclass(frozen=True, slots=True)
class Shard:
    """One window of a sharded export.

    Attributes:
        no: 0-based position; the file holds the shards in this order.
        key: ``2024-03-10`` for one day, ``2024-03-10..2024-03-12`` for several,
            ``all`` for the single shard of an unsplit export.
        first: the window's first day (None for ``all``).
        last: its last day, inclusive (None for ``all``).
        start: ISO instant where the window starts (inclusive; empty for ``all``).
        end: ISO instant where it ends (exclusive; empty for ``all``).
    """

    no: int
    key: str
    first: dt.date | None
    last: dt.date | None
    start: str
    end: str

    def parameters(
        self, parameters: Mapping[str, Any], date_range: tuple[str, str] | None
    ) -> dict[str, Any]:
        """The export's parameters with the date range narrowed to this window."""
        narrowed = dict(parameters)
        if date_range is not None and self.first is not None and self.last is not None:
            narrowed[date_range[0]] = self.first.isoformat()
            narrowed[date_range[1]] = self.last.isoformat()
        return narrowed

    def describe(self, count: int) -> dict[str, Any] | None:
        """The ``shard`` object of the provider request (None for ``all``)."""
        if self.first is None:
            return None
        return {
            "id": self.key,
            "index": self.no,
            "count": count,
            "from": self.start,
            "to": self.end,
        }


def local_midnight(day: dt.date, zone: ZoneInfo) -> dt.datetime:
    """The first instant of ``day`` in ``zone`` (aware).

    Where midnight does not exist (a zone that springs forward at 00:00) the day starts
    at the first wall time after the gap, e.g. 01:00.
    """
    naive = dt.datetime.combine(day, dt.time())
    for minutes in range(0, 24 * 60, 15):
        wall = naive + dt.timedelta(minutes=minutes)
        aware = wall.replace(tzinfo=zone, fold=0)
        back = aware.astimezone(dt.UTC).astimezone(zone)
        if back.replace(tzinfo=None) == wall:
            return aware
    return naive.replace(tzinfo=zone)  # pragma: no cover - no zone skips a whole day


def _date(value: Any) -> dt.date | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


def plan_shards(etype: ExportType, parameters: Mapping[str, Any], time_zone: str) -> list[Shard]:
    """The shards of one export, in file order.

    Args:
        etype: the export type (its ``shards`` and ``date_range``).
        parameters: the task's parameters (dates as ``YYYY-MM-DD``).
        time_zone: the export's IANA time zone.

    Returns:
        One :class:`Shard` per window; a single ``all`` shard when the type does not
        split, a date is missing, the range is empty, or it reaches past the dates an
        instant can have (0001-01-01 or 9999-12-31 in a zone away from UTC).
    """
    whole = [Shard(0, "all", None, None, "", "")]
    spec, names = etype.shards, etype.date_range
    if spec is None or names is None:
        return whole
    first, last = _date(parameters.get(names[0])), _date(parameters.get(names[1]))
    if first is None or last is None or last < first:
        return whole
    days = (last - first).days + 1
    count = min(days, spec.max_shards)
    size, extra = divmod(days, count)
    zone = ZoneInfo(time_zone)
    shards = []
    day = first
    try:
        for no in range(count):
            span = size + (1 if no < extra else 0)
            end_day = day + dt.timedelta(days=span - 1)
            key = day.isoformat() if span == 1 else f"{day.isoformat()}..{end_day.isoformat()}"
            start = local_midnight(day, zone).isoformat()
            end = local_midnight(end_day + dt.timedelta(days=1), zone).isoformat()
            shards.append(Shard(no, key, day, end_day, start, end))
            day = end_day + dt.timedelta(days=1)
    except OverflowError:
        # A range that touches year 1 or 9999: its windows' instants do not exist as
        # Python datetimes. One shard with the parameters as given is still exact.
        return whole
    return shards
