"""Fire times of a 5-field cron expression in an IANA time zone.

Parsing and stepping are APScheduler 3's ``CronTrigger.from_crontab`` (no cron parser of
our own); this module adds the zone check, the error codes, one rule for the days the
clocks change, and the two places where APScheduler reads a crontab differently from
cron itself (POSIX ``crontab``, Vixie cron), so that an expression means here what it
means in every crontab:

* **Day-of-week numbers.** In cron, 0 and 7 are Sunday, 1 is Monday, 6 is Saturday;
  APScheduler counts 0 as Monday. The day-of-week field is rewritten to weekday names
  (``1-5`` becomes ``mon,tue,wed,thu,fri``; ``*/2`` becomes ``sun,tue,thu,sat``) before
  APScheduler reads it; names (``MON-FRI``) mean what they say in both.
* **Day of month and day of week together.** When both fields are restricted (neither
  starts with ``*``), cron fires on a day that matches **either** ("0 8 1 * MON": the 1st
  of each month and every Monday); APScheduler would want both. Such an expression is
  read as two triggers, one per field, and fires at the earlier of the two.

Daylight-saving rule (pinned by ``tests/unit/test_schedule_cron.py``):

* **A wall time that does not exist** (spring forward: 02:30 in ``Europe/Berlin`` on
  2026-03-29) fires **once**, at the instant the wall time would have with the offset in
  force before the switch: 02:30+01:00 = 01:30 UTC, which the clocks show as 03:30 CEST.
  This is APScheduler's own answer (zoneinfo, ``fold=0``).
* **A wall time that happens twice** (fall back: 02:30 on 2026-10-25) fires **once, at
  its first occurrence** (02:30+02:00 = 00:30 UTC); APScheduler would fire at both, the
  second one (``fold=1``) is dropped. An expression whose hour field is ``*`` (it runs
  every hour or more often) keeps both: there the repeated hour is real elapsed time
  (Vixie cron's rule for such jobs).
* Fire instants are strictly increasing: an instant equal to the previous one is
  dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

from export_center.api.params import validate_time_zone
from export_center.errors import ValidationFailed

__all__ = [
    "CronSchedule",
    "cron_weekdays",
    "fire_times",
    "next_fire_after",
    "parse_cron",
    "zone_of",
]

#: The longest cron text a schedule keeps (the column's width).
CRON_MAX_LENGTH = 120
#: Weekday names by cron number (0 is Sunday; 7 is Sunday again).
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_WEEKDAY_HELP = (
    "the day-of-week field takes 0-7 (0 and 7 are Sunday) or MON-SUN, as single days, "
    "ranges (1-5), lists (1,3,5) and steps (*/2)"
)


def _weekday(token: str) -> int:
    text = token.strip().lower()
    if text.isdigit() and int(text) <= 7:
        return int(text)
    if text in _WEEKDAYS:
        return _WEEKDAYS.index(text)
    raise ValueError(f"{token!r}: {_WEEKDAY_HELP}")


def cron_weekdays(field: str) -> str:
    """The day-of-week field of a crontab (cron numbering: 0 and 7 are Sunday) as the
    weekday names APScheduler reads the same way: ``"1-5"`` -> ``"mon,tue,wed,thu,fri"``;
    ``"*"`` stays ``"*"``.

    Raises:
        ValueError: a value outside 0-7 and the names, a backwards range, a bad step.
    """
    if field == "*":
        return field
    days: set[int] = set()
    for item in field.split(","):
        span, slash, step_text = item.partition("/")
        if slash and not (step_text.isdigit() and int(step_text) >= 1):
            raise ValueError(f"{item!r}: a step is a whole number from 1")
        step = int(step_text) if slash else 1
        if span == "*":
            low, high = 0, 6
        elif "-" in span:
            first, last = span.split("-", 1)
            low, high = _weekday(first), _weekday(last)
            if low > high:
                raise ValueError(f"{item!r}: a range goes from the earlier day to the later")
        else:
            low = _weekday(span)
            high = 7 if slash else low
        days.update(day % 7 for day in range(low, high + 1, step))
    return ",".join(_WEEKDAYS[day] for day in sorted(days))


def _triggers(text: str, zone: ZoneInfo) -> list[CronTrigger]:
    """APScheduler triggers of a 5-field crontab read as cron reads it (module
    docstring): one trigger, or two when both day fields are restricted."""
    minute, hour, dom, month, dow = text.split()
    dow = cron_weekdays(dow)
    if dom.startswith("*") or dow.startswith("*"):
        return [CronTrigger.from_crontab(f"{minute} {hour} {dom} {month} {dow}", timezone=zone)]
    return [
        CronTrigger.from_crontab(f"{minute} {hour} {dom} {month} *", timezone=zone),
        CronTrigger.from_crontab(f"{minute} {hour} * {month} {dow}", timezone=zone),
    ]


def zone_of(name: str, *, field: str = "timezone") -> ZoneInfo:
    """The IANA zone ``name`` (exact spelling, as task time zones: ``Asia/Shanghai``).

    Raises:
        ValidationFailed: ``UNKNOWN_TIME_ZONE`` on ``field``.
    """
    unknown = ValidationFailed(
        f"{field} must be an IANA time zone name such as Asia/Shanghai or UTC, got {name!r}",
        code="UNKNOWN_TIME_ZONE",
        field=field,
    )
    try:
        validate_time_zone(name, "UTC")
        return ZoneInfo(name)
    except (ValidationFailed, ZoneInfoNotFoundError, ValueError):
        raise unknown from None


class CronSchedule:
    """A parsed cron expression in a zone.

    Args:
        expr: five fields, ``minute hour day month day-of-week`` (``"0 8 * * MON"``).
        tz: IANA zone name the fields are read in.

    Raises:
        ValidationFailed: ``INVALID_CRON`` (field ``cron``) or ``UNKNOWN_TIME_ZONE``
            (field ``timezone``).
    """

    def __init__(self, expr: str, tz: str) -> None:
        self.zone = zone_of(tz)
        self.expr = expr
        text = expr.strip() if isinstance(expr, str) else ""
        if not text or len(text) > CRON_MAX_LENGTH or len(text.split()) != 5:
            raise ValidationFailed(
                "cron must have five fields: minute hour day month day-of-week, "
                f"e.g. '0 8 * * MON', got {expr!r}",
                code="INVALID_CRON",
                field="cron",
            )
        try:
            self.triggers = _triggers(text, self.zone)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationFailed(
                f"cron {expr!r} is not valid: {exc}", code="INVALID_CRON", field="cron"
            ) from None
        hour = next(f for f in self.triggers[0].fields if f.name == "hour")
        self._hourly = str(hour) == "*"
        # An expression that can never fire (e.g. "0 0 31 2 *") is refused too.
        if self.next_after(datetime.now(UTC)) is None:
            raise ValidationFailed(f"cron {expr!r} never fires", code="INVALID_CRON", field="cron")

    def _raw_after(self, after: datetime) -> datetime | None:
        # Step in UTC: arithmetic on a zoned datetime is wall-clock arithmetic and
        # would lose the fold of a repeated hour.
        start = after.astimezone(UTC) + timedelta(microseconds=1)
        found = [t.get_next_fire_time(None, start) for t in self.triggers]
        times = [t.astimezone(UTC) for t in found if t is not None]
        got = min(times) if times else None
        # Through UTC: a zoned datetime of a non-existent wall time (02:30+01:00 on the
        # spring switch) becomes the wall time the clocks show (03:30+02:00).
        return None if got is None else got.astimezone(UTC).astimezone(self.zone)

    def _repeat(self, at: datetime) -> bool:
        """True for the second occurrence of a wall time the fall-back repeats."""
        if at.fold != 1 or self._hourly:
            return False
        return at.replace(fold=0).utcoffset() != at.utcoffset()

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after`` (aware), in the zone, or None when
        the expression never fires again (APScheduler looks ahead a few years)."""
        # All comparisons in UTC: two datetimes of one zone compare by wall time and
        # ignore the fold, so 02:00+01:00 (fold 1) would not be after 02:00+02:00.
        floor = after.astimezone(UTC)
        cursor = floor
        while True:
            got = self._raw_after(cursor)
            if got is None:
                return None
            got_utc = got.astimezone(UTC)
            if got_utc > floor and not self._repeat(got):
                return got
            cursor = max(got_utc, cursor + timedelta(seconds=1))

    def iter_after(self, after: datetime) -> Iterator[datetime]:
        """Fire times strictly after ``after``, in order, in the zone."""
        at: datetime | None = after
        while at is not None:
            at = self.next_after(at)
            if at is not None:
                yield at


def parse_cron(expr: str, tz: str) -> CronSchedule:
    """:class:`CronSchedule` of ``expr`` in ``tz`` (raises as it does)."""
    return CronSchedule(expr, tz)


def fire_times(cron: str, tz: str, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire times strictly after ``after`` (an aware datetime), as
    aware datetimes in ``tz`` (ISO 8601 with the zone's offset when formatted); fewer
    when the expression stops firing.

    Raises:
        ValidationFailed: ``INVALID_CRON``, ``UNKNOWN_TIME_ZONE``.
    """
    out: list[datetime] = []
    for at in parse_cron(cron, tz).iter_after(after):
        out.append(at)
        if len(out) >= count:
            break
    return out


def next_fire_after(cron: str, tz: str, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after`` in ``tz``, None if none.

    Raises:
        ValidationFailed: ``INVALID_CRON``, ``UNKNOWN_TIME_ZONE``.
    """
    return parse_cron(cron, tz).next_after(after)
