"""Quotas over time: tasks created and rows exported per calendar day, per user and per
tenant (issue 25, item 4).

The rule:

* **The day** is the calendar day in the export time zone
  (``EXPORT_CENTER_TASK__TIME_ZONE``; tenants have no zone of their own yet), read from
  the database clock: ``[local midnight, next local midnight)``, converted to UTC (a
  day of a daylight-saving change is 23 or 25 hours long).
* **The limits** are the settings ``EXPORT_CENTER_QUOTAS__USER_TASKS_PER_DAY``,
  ``..._USER_ROWS_PER_DAY``, ``..._TENANT_TASKS_PER_DAY`` and ``..._TENANT_ROWS_PER_DAY``
  (unset: no limit), each replaced by the tenant's override (``export_quota`` row with
  ``user_id=''``: the tenant's totals) or the user's (a row for that user: the user's
  limits) where that override names a number.
* **Tasks created** are the tasks of the day in ``export_task`` (any status but
  ``REJECTED``: a request an approver refused, or that expired unapproved, never ran,
  so it gives its slot back; one awaiting approval counts, it may yet run); **rows
  exported** are the rows written by the exports that succeeded that day, counted when
  they finish (:mod:`export_center.repository.quotas`). An idempotent replay, an active
  duplicate returned for a repeated create, and a refused create make no task row, so
  they never count.
* **A create is refused** (429 ``QUOTA_EXCEEDED``, ``Retry-After`` = seconds to the
  next local midnight, when the day's figures start again at 0) when the user or the
  tenant has created as many tasks as allowed, or when the rows of the day already
  reached the user's or the tenant's rows quota (a running export may take the day past
  it: its rows are only known when it ends). The check runs in the create transaction,
  after the requester's create guard row is locked (and the tenant's, when a tenant quota
  applies), so 50 parallel creates at the edge of a quota make exactly the quota.
  Scheduled fires go through the same create and are refused alike (the run records
  ``QUOTA_EXCEEDED``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection

from export_center import metrics
from export_center.errors import TooManyActiveTasks
from export_center.repository import quotas as qrepo
from export_center.repository.guards import lock_scope
from export_center.repository.rows import NewTask
from export_center.settings import Settings

__all__ = [
    "Day",
    "Figure",
    "Limits",
    "QuotaExceeded",
    "QuotaStatus",
    "check_create",
    "day_of",
    "limits_of",
    "status_of",
]


class QuotaExceeded(TooManyActiveTasks):
    """429 ``QUOTA_EXCEEDED``: a daily quota is used up.

    Attributes:
        reason: ``user_tasks``, ``user_rows``, ``tenant_tasks`` or ``tenant_rows``.
        retry_after: seconds to the next day boundary in the quota's zone (the
            ``Retry-After`` header).
    """

    code = "QUOTA_EXCEEDED"

    def __init__(self, message: str, *, reason: str, retry_after: int, message_zh: str):
        super().__init__(message, code="QUOTA_EXCEEDED", retry_after=retry_after)
        self.reason = reason
        self.message_zh = message_zh


@dataclass(frozen=True, slots=True)
class Day:
    """A quota day: ``start`` and ``end`` naive UTC (``end`` excluded), ``now`` the
    database clock (naive UTC) and the zone the day is counted in."""

    start: datetime
    end: datetime
    now: datetime
    zone: ZoneInfo

    @property
    def seconds_left(self) -> int:
        """Whole seconds (at least 1) from ``now`` to ``end``: the ``Retry-After``."""
        return max(1, math.ceil((self.end - self.now).total_seconds()))

    @property
    def resets_at(self) -> datetime:
        """``end`` as an aware time in the zone (``2026-12-03T00:00:00+08:00``)."""
        return self.end.replace(tzinfo=UTC).astimezone(self.zone)


def day_of(now: datetime, zone_name: str) -> Day:
    """The calendar day in ``zone_name`` that holds ``now`` (naive UTC)."""
    zone = ZoneInfo(zone_name)
    local = now.replace(tzinfo=UTC).astimezone(zone)
    start = datetime.combine(local.date(), time(0), tzinfo=zone)
    end = datetime.combine(local.date() + timedelta(days=1), time(0), tzinfo=zone)

    def utc(value: datetime) -> datetime:
        return value.astimezone(UTC).replace(tzinfo=None)

    return Day(utc(start), utc(end), now, zone)


@dataclass(frozen=True, slots=True)
class Limits:
    """The four per-day limits that apply to one user of one tenant (None: no limit)."""

    user_tasks: int | None
    user_rows: int | None
    tenant_tasks: int | None
    tenant_rows: int | None

    @property
    def any(self) -> bool:
        """True when at least one limit is set."""
        values = (self.user_tasks, self.user_rows, self.tenant_tasks, self.tenant_rows)
        return any(v is not None for v in values)


def limits_of(conn: Connection, settings: Settings, tenant_id: str, user_id: str) -> Limits:
    """The limits of ``user_id`` in ``tenant_id`` (``user_id=''``: the tenant's alone):
    the settings, each replaced by a number the tenant's or user's override names."""
    q = settings.quotas
    tenant, user = qrepo.overrides_of(conn, tenant_id, user_id)

    def pick(default: int | None, override: int | None) -> int | None:
        return default if override is None else override

    return Limits(
        user_tasks=pick(q.user_tasks_per_day, user.tasks_per_day if user else None),
        user_rows=pick(q.user_rows_per_day, user.rows_per_day if user else None),
        tenant_tasks=pick(q.tenant_tasks_per_day, tenant.tasks_per_day if tenant else None),
        tenant_rows=pick(q.tenant_rows_per_day, tenant.rows_per_day if tenant else None),
    )


@dataclass(frozen=True, slots=True)
class Figure:
    """One quota as the caller sees it: ``used`` of ``limit``, ``remaining``
    (``limit - used``, never below 0), both None when unlimited; ``resets_at`` the next
    day boundary; ``scope`` ``user`` or ``tenant`` (whose quota it is)."""

    used: int
    limit: int | None
    remaining: int | None
    resets_at: datetime
    scope: str

    def to_json(self) -> dict[str, Any]:
        """``{used, limit, remaining, resetsAt}`` (``resetsAt`` ISO 8601 with offset)."""
        return {
            "used": self.used,
            "limit": self.limit,
            "remaining": self.remaining,
            "resetsAt": self.resets_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class QuotaStatus:
    """``tasks`` and ``rows`` figures of one caller for the current day."""

    tasks: Figure
    rows: Figure
    day: Day

    def to_json(self) -> dict[str, Any]:
        """``{tasks: {used, limit, remaining, resetsAt}, rows: {...}}``."""
        return {"tasks": self.tasks.to_json(), "rows": self.rows.to_json()}


def _stricter(
    user_used: int, user_limit: int | None, tenant_used: int, tenant_limit: int | None, day: Day
) -> Figure:
    """The figure that leaves less: the user's or the tenant's (the user's on a tie or
    when neither is limited)."""
    choices = [("user", user_used, user_limit), ("tenant", tenant_used, tenant_limit)]
    limited = [c for c in choices if c[2] is not None]
    if not limited:
        return Figure(user_used, None, None, day.resets_at, "user")
    scope, used, limit = min(limited, key=lambda c: max(0, (c[2] or 0) - c[1]))
    assert limit is not None
    return Figure(used, limit, max(0, limit - used), day.resets_at, scope)


def status_of(
    conn: Connection, settings: Settings, tenant_id: str, user_id: str | None
) -> QuotaStatus:
    """What is left today for ``user_id`` of ``tenant_id`` (``GET /api/v1/me/quota``):
    for tasks and for rows, the stricter of the user's and the tenant's quota, i.e. the
    one with fewer remaining; ``user_id=None``: the tenant's figures alone (the admin
    API's usage of a tenant)."""
    day = day_of(qrepo.database_now(conn), settings.task.time_zone)
    limits = limits_of(conn, settings, tenant_id, user_id or "")
    tenant = qrepo.usage(conn, tenant_id, None, day.start, day.end)
    if user_id is None:
        return QuotaStatus(
            _stricter(tenant.tasks, None, tenant.tasks, limits.tenant_tasks, day),
            _stricter(tenant.rows, None, tenant.rows, limits.tenant_rows, day),
            day,
        )
    user = qrepo.usage(conn, tenant_id, user_id, day.start, day.end)
    return QuotaStatus(
        _stricter(user.tasks, limits.user_tasks, tenant.tasks, limits.tenant_tasks, day),
        _stricter(user.rows, limits.user_rows, tenant.rows, limits.tenant_rows, day),
        day,
    )


def _count(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _refuse(reason: str, text: str, day: Day, text_zh: str) -> QuotaExceeded:
    metrics.QUOTA_REFUSALS.labels(reason).inc()
    when = day.resets_at.strftime("%Y-%m-%d %H:%M")
    zone = day.zone.key
    return QuotaExceeded(
        f"{text}; the quota starts again at {when} ({zone}), in {day.seconds_left} s",
        message_zh=f"{text_zh}，本次未创建导出。额度将于 {when}（{zone}）恢复，"
        f"还有 {day.seconds_left} 秒",
        reason=reason,
        retry_after=day.seconds_left,
    )


def check_create(conn: Connection, settings: Settings, new: NewTask) -> None:
    """Refuse the create of ``new`` when a daily quota of its requester or tenant is used
    up; call it in the create transaction after the requester's guard row is locked (the
    counts are exact only there). Locks the tenant's guard row when a tenant quota
    applies; otherwise reads only, one query when no limit applies.

    Raises:
        QuotaExceeded: 429 ``QUOTA_EXCEEDED``, ``retry_after`` to the next day boundary.
    """
    limits = limits_of(conn, settings, new.tenant_id, new.requested_by)
    if not limits.any:
        return
    day = day_of(qrepo.database_now(conn), settings.task.time_zone)
    if limits.tenant_tasks is not None or limits.tenant_rows is not None:
        # Other users of the tenant count toward it too: their creates wait here.
        lock_scope(conn, "tenant", new.tenant_id)
        tenant = qrepo.usage(conn, new.tenant_id, None, day.start, day.end)
        if limits.tenant_tasks is not None and tenant.tasks >= limits.tenant_tasks:
            raise _refuse(
                "tenant_tasks",
                f"your organization ({new.tenant_id}) has created {_count(tenant.tasks, 'export')} "
                f"today, its daily quota of {limits.tenant_tasks}",
                day,
                f"贵组织（{new.tenant_id}）今日已创建 {tenant.tasks:,} 个导出，"
                f"已达每日额度 {limits.tenant_tasks:,} 个",
            )
        if limits.tenant_rows is not None and tenant.rows >= limits.tenant_rows:
            raise _refuse(
                "tenant_rows",
                f"your organization's exports ({new.tenant_id}) have written "
                f"{_count(tenant.rows, 'row')} today, its daily quota of "
                f"{_count(limits.tenant_rows, 'row')}",
                day,
                f"贵组织（{new.tenant_id}）今日导出已写入 {tenant.rows:,} 行，"
                f"已达每日额度 {limits.tenant_rows:,} 行",
            )
    if limits.user_tasks is not None or limits.user_rows is not None:
        user = qrepo.usage(conn, new.tenant_id, new.requested_by, day.start, day.end)
        if limits.user_tasks is not None and user.tasks >= limits.user_tasks:
            raise _refuse(
                "user_tasks",
                f"you have created {_count(user.tasks, 'export')} today, your daily quota of "
                f"{limits.user_tasks}",
                day,
                f"您今日已创建 {user.tasks:,} 个导出，已达每日额度 {limits.user_tasks:,} 个",
            )
        if limits.user_rows is not None and user.rows >= limits.user_rows:
            raise _refuse(
                "user_rows",
                f"your exports have written {_count(user.rows, 'row')} today, your daily "
                f"quota of {_count(limits.user_rows, 'row')}",
                day,
                f"您今日的导出已写入 {user.rows:,} 行，已达每日额度 {limits.user_rows:,} 行",
            )
