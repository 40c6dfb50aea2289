"""Bodies and answers of ``/api/v1/schedules`` (issue 24, "The interface": the field
names are fixed)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from export_center.api.notify_schemas import NotifyTargets
from export_center.api.schemas import ExportCreate
from export_center.writers.formats import DEFAULT_FORMAT

__all__ = [
    "RunPublic",
    "RunsPublic",
    "ScheduleCreate",
    "SchedulePublic",
    "SchedulesPublic",
    "ScheduleUpdate",
]

_EXAMPLE: dict[str, Any] = {
    "name": "Last week's orders",
    "export": {"exportType": "ORDERS", "format": DEFAULT_FORMAT.name, "parameters": {}},
    "cron": "0 8 * * MON",
    "timezone": "Asia/Shanghai",
    "window": "previous_week",
    "notify": [{"channel": "page"}],
}


#: A ``window`` in a body: declared a name or ``{"lastNDays": N}`` in the OpenAPI
#: document; any JSON is let through to the schedule's check, so a wrong shape is
#: ``INVALID_WINDOW`` on ``window`` like every other window mistake.
WindowChoice = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {"lastNDays": {"type": "integer"}}},
                {"type": "null"},
            ]
        }
    ),
]


class ScheduleCreate(BaseModel):
    """Body of ``POST /api/v1/schedules``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})

    name: str = Field(min_length=1, max_length=200, description="Shown in the schedule list")
    export: ExportCreate = Field(description="The create body of the export, without requestId")
    cron: str = Field(
        min_length=1, max_length=120, description="5-field cron: minute hour day month weekday"
    )
    timezone: str = Field(min_length=1, max_length=64, description="IANA time zone of the cron")
    window: WindowChoice = Field(
        default=None,
        description="previous_day, previous_week, previous_month, month_to_date or "
        '{"lastNDays": N}',
    )
    startAt: datetime | None = Field(default=None, description="No fire before (ISO 8601)")
    endAt: datetime | None = Field(default=None, description="No fire after (ISO 8601)")
    notify: NotifyTargets = Field(
        default=None, description="Notification targets of its runs (as a create's notify)"
    )


class ScheduleUpdate(BaseModel):
    """Body of ``PATCH /api/v1/schedules/{id}``: the fields to change (null clears an
    optional one)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    export: ExportCreate | None = None
    cron: str | None = Field(default=None, min_length=1, max_length=120)
    timezone: str | None = Field(default=None, min_length=1, max_length=64)
    window: WindowChoice = None
    startAt: datetime | None = None
    endAt: datetime | None = None
    notify: NotifyTargets = None


class SchedulePublic(BaseModel):
    """A schedule as its owner (or a download-all reader) sees it."""

    scheduleId: int
    name: str
    owner: str
    export: dict[str, Any]
    cron: str
    timezone: str
    window: str | dict[str, Any] | None
    startAt: datetime | None
    endAt: datetime | None
    notify: list[dict[str, Any]] | None
    state: str = Field(description="active, paused or ended")
    pauseReason: str | None
    nextFireTimes: list[str] = Field(
        description="The next five fire times, ISO 8601 with the zone's offset"
    )
    createdAt: datetime
    updatedAt: datetime


class SchedulesPublic(BaseModel):
    """``GET /api/v1/schedules``: the caller's schedules, newest first."""

    items: list[SchedulePublic]


class RunPublic(BaseModel):
    """One run: a fire (or several coalesced missed fires, ``fires``), its task and the
    task's state now (``state`` lowercase as for exports; ``failed`` when the fire
    created no task, with ``code`` and ``message``)."""

    fireTime: str = Field(description="The fire instant, ISO 8601 with the zone's offset")
    firedAt: datetime
    taskId: str | None
    state: str
    rows: int | None
    fires: int
    manual: bool
    outcome: str = Field(
        description="created; duplicate (an identical export was still running: the run "
        "is that task); failed"
    )
    windowFrom: str | None
    windowTo: str | None
    code: str | None
    message: str | None


class RunsPublic(BaseModel):
    """``GET /api/v1/schedules/{id}/runs``: newest first."""

    items: list[RunPublic]
