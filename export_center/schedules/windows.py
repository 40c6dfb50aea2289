"""Relative windows: the date range a schedule's run exports, resolved at fire time.

A window is one of ``"previous_day"``, ``"previous_week"``, ``"previous_month"``,
``"month_to_date"`` or ``{"lastNDays": N}`` (1 <= N <= 366). It is resolved in the
schedule's time zone at the fire instant: "today" is the local date of the fire
instant there, and the result is two dates, both inclusive (the registry's
``date_range`` rule), written into the type's ``date_range`` parameters (for ORDERS
``from`` and ``to``) as ISO dates:

* ``previous_day``: yesterday .. yesterday;
* ``previous_week``: Monday .. Sunday of the week before today's week (ISO weeks);
* ``previous_month``: the 1st .. the last day of the month before today's month;
* ``month_to_date``: the 1st of today's month .. today;
* ``{"lastNDays": N}``: the N whole days before today (today - N .. yesterday).

Because the result is dates of the local calendar, a 23-hour or a 25-hour day is one
day like any other; the dates are then read in the task's time zone, which is the
schedule's zone unless the export body names another.

Errors: ``INVALID_WINDOW`` (shape, unknown name, N out of range) and
``WINDOW_NOT_SUPPORTED`` (the type has no ``date_range``), both 422 on ``window``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from export_center.errors import ValidationFailed
from export_center.registry import ExportType

__all__ = [
    "NAMED_WINDOWS",
    "Window",
    "parse_window",
    "resolve_window",
    "window_from_json",
    "window_parameters",
]

#: The named windows; ``{"lastNDays": N}`` is the one with a number.
NAMED_WINDOWS = ("previous_day", "previous_week", "previous_month", "month_to_date")
#: Bounds of ``lastNDays``.
LAST_N_DAYS_MAX = 366


@dataclass(frozen=True, slots=True)
class Window:
    """A checked window: ``name`` is one of :data:`NAMED_WINDOWS` or ``lastNDays``
    (then ``days`` is N)."""

    name: str
    days: int | None = None

    def to_api(self) -> str | dict[str, int]:
        """The API's form: the name, or ``{"lastNDays": N}``."""
        return {"lastNDays": self.days or 0} if self.name == "lastNDays" else self.name

    def to_json(self) -> str:
        """The stored form (``export_schedule.window_json``)."""
        return json.dumps(self.to_api(), separators=(",", ":"))


def _invalid(message: str) -> ValidationFailed:
    return ValidationFailed(message, code="INVALID_WINDOW", field="window")


def parse_window(value: Any) -> Window | None:
    """Check the body's ``window`` (None: no window).

    Raises:
        ValidationFailed: ``INVALID_WINDOW``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value not in NAMED_WINDOWS:
            raise _invalid(
                f'window must be one of {", ".join(NAMED_WINDOWS)} or {{"lastNDays": N}}, '
                f"got {value!r}"
            )
        return Window(value)
    if isinstance(value, dict) and set(value) == {"lastNDays"}:
        days = value["lastNDays"]
        if isinstance(days, int) and not isinstance(days, bool) and 1 <= days <= LAST_N_DAYS_MAX:
            return Window("lastNDays", days)
        raise _invalid(f"lastNDays must be a whole number from 1 to {LAST_N_DAYS_MAX}")
    raise _invalid(f'window must be one of {", ".join(NAMED_WINDOWS)} or {{"lastNDays": N}}')


def window_from_json(text: str | None) -> Window | None:
    """The window :meth:`Window.to_json` stored (None for none)."""
    return None if not text else parse_window(json.loads(text))


def check_window_type(window: Window | None, etype: ExportType) -> None:
    """Refuse a window on a type without a date range.

    Raises:
        ValidationFailed: ``WINDOW_NOT_SUPPORTED``.
    """
    if window is not None and not etype.date_range:
        raise ValidationFailed(
            f"{etype.code} exports have no date range, so a schedule of them cannot "
            "have a window; remove window",
            code="WINDOW_NOT_SUPPORTED",
            field="window",
        )


def _month_start(day: date) -> date:
    return day.replace(day=1)


def resolve_window(window: Window, fire: datetime, zone: ZoneInfo) -> tuple[date, date]:
    """The inclusive ``(first, last)`` dates of ``window`` for a fire at ``fire`` (an
    aware instant), with "today" the local date of ``fire`` in ``zone`` (rules in the
    module docstring)."""
    today = fire.astimezone(zone).date()
    yesterday = today - timedelta(days=1)
    if window.name == "previous_day":
        return yesterday, yesterday
    if window.name == "previous_week":
        monday = today - timedelta(days=today.weekday() + 7)
        return monday, monday + timedelta(days=6)
    if window.name == "previous_month":
        last = _month_start(today) - timedelta(days=1)
        return _month_start(last), last
    if window.name == "month_to_date":
        return _month_start(today), today
    days = window.days or 1
    return today - timedelta(days=days), yesterday


def window_parameters(
    window: Window, etype: ExportType, fire: datetime, zone: ZoneInfo
) -> dict[str, str]:
    """The type's ``date_range`` parameters for the window at ``fire``, e.g.
    ``{"from": "2026-03-08", "to": "2026-03-08"}``.

    Raises:
        ValidationFailed: ``WINDOW_NOT_SUPPORTED``.
    """
    check_window_type(window, etype)
    assert etype.date_range is not None
    first, last = resolve_window(window, fire, zone)
    lo, hi = etype.date_range
    return {lo: first.isoformat(), hi: last.isoformat()}
