"""Fire times of a 5-field cron expression in an IANA time zone.

Parsing and stepping are APScheduler 3's ``CronTrigger.from_crontab`` (no cron parser of
our own); this module adds the zone check, the error codes and one rule for the days
the clocks change.

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

__all__ = ["CronSchedule", "fire_times", "next_fire_after", "parse_cron", "zone_of"]

#: The longest cron text a schedule keeps (the column's width).
CRON_MAX_LENGTH = 120


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
            self.trigger = CronTrigger.from_crontab(text, timezone=self.zone)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationFailed(
                f"cron {expr!r} is not valid: {exc}", code="INVALID_CRON", field="cron"
            ) from None
        hour = next(f for f in self.trigger.fields if f.name == "hour")
        self._hourly = str(hour) == "*"
        # An expression that can never fire (e.g. "0 0 31 2 *") is refused too.
        if self.next_after(datetime.now(UTC)) is None:
            raise ValidationFailed(f"cron {expr!r} never fires", code="INVALID_CRON", field="cron")

    def _raw_after(self, after: datetime) -> datetime | None:
        # Step in UTC: arithmetic on a zoned datetime is wall-clock arithmetic and
        # would lose the fold of a repeated hour.
        start = after.astimezone(UTC) + timedelta(microseconds=1)
        got = self.trigger.get_next_fire_time(None, start)
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
