"""The settings group of quotas over time: ``EXPORT_CENTER_QUOTAS__*``.

Four defaults, each unset (no limit) unless given: tasks created and rows exported per
calendar day, per user and per tenant. A platform operator overrides them per tenant or
per user (``export_quota`` rows: admin API ``/api/v1/admin/quotas``, CLI
``export-center quotas``). The day is the calendar day in the export time zone
(``EXPORT_CENTER_TASK__TIME_ZONE``): tenants have no zone of their own yet.
:mod:`export_center.settings` assembles the group into
:class:`~export_center.settings.Settings`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["QuotaSettings"]


class QuotaSettings(BaseModel):
    """Per-day quotas; None (unset) is no limit, 0 allows nothing."""

    user_tasks_per_day: int | None = Field(
        None, ge=0, description="Exports one user may create per day; unset: no limit"
    )
    user_rows_per_day: int | None = Field(
        None,
        ge=0,
        description="Rows one user's exports may write per day (succeeded exports, counted "
        "when they finish); a create is refused once they are used up; unset: no limit",
    )
    tenant_tasks_per_day: int | None = Field(
        None, ge=0, description="Exports all users of a tenant may create per day; unset: no limit"
    )
    tenant_rows_per_day: int | None = Field(
        None,
        ge=0,
        description="Rows all exports of a tenant may write per day; unset: no limit",
    )
