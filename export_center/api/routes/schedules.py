"""``/api/v1/schedules``: scheduled exports (issue 24). Thin routes over
:mod:`export_center.schedules.service`.

POST (201, ``scheduleId`` and ``nextFireTimes``), GET list (the caller's), GET detail,
PATCH (change fields), ``POST /{id}/pause``, ``/{id}/resume``, ``/{id}/run`` (run now),
``DELETE /{id}`` (204), ``GET /{id}/runs`` (newest first).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, BODY, CATALOGUE, errors
from export_center.api.routes.exports import CREATE_ERRORS
from export_center.api.schedule_schemas import (
    RunPublic,
    RunsPublic,
    ScheduleCreate,
    SchedulePublic,
    SchedulesPublic,
    ScheduleUpdate,
)
from export_center.repository.schedules import RunRow, Schedule
from export_center.schedules import service
from export_center.schedules.cron import fire_times, zone_of
from export_center.states import api_state

__all__ = ["router", "schedule_public"]

router = APIRouter(
    prefix="/api/v1/schedules", tags=["schedules"], dependencies=[Depends(strict_query)]
)

#: Examples of the codes schedules add to the API's catalogue (``setdefault``: a code
#: another part declared keeps its example).
_EXAMPLES: dict[str, tuple[str, str | None]] = {
    "INVALID_CRON": ("cron must have five fields: minute hour day month day-of-week", "cron"),
    "UNKNOWN_TIME_ZONE": (
        "timezone must be an IANA time zone name such as Asia/Shanghai",
        "timezone",
    ),
    "INVALID_WINDOW": ('window must be one of previous_day, ... or {"lastNDays": N}', "window"),
    "WINDOW_NOT_SUPPORTED": ("this export type has no date range, so ...", "window"),
    "WINDOW_CONFLICT": (
        "export.parameters.from is set by the window at each fire; leave it out ...",
        "export.parameters.from",
    ),
    "INVALID_NOTIFY": ("unknown channel 'sms'", "notify[0].channel"),
    "RECIPIENT_NOT_ALLOWED": ("the domain of x@elsewhere.org is not allowed", "notify[0].to"),
    "EMAIL_NOT_CONFIGURED": ("e-mail notifications are not configured here", "notify[0]"),
    "UNKNOWN_ROBOT": ("no robot named 'ops'", "notify[0].robot"),
    "SCHEDULE_NOT_FOUND": ("no such schedule", None),
    "SCHEDULE_CHANGED": ("the schedule changed at the same time; read it and try again", None),
    "SCHEDULE_ENDED": ("the schedule has ended", None),
}
for _code, _example in _EXAMPLES.items():
    CATALOGUE.setdefault(_code, _example)

_CHECK_CODES = {
    422: [
        "INVALID_CRON",
        "UNKNOWN_TIME_ZONE",
        "INVALID_WINDOW",
        "WINDOW_NOT_SUPPORTED",
        "WINDOW_CONFLICT",
        "INVALID_NOTIFY",
        "RECIPIENT_NOT_ALLOWED",
        "EMAIL_NOT_CONFIGURED",
        "UNKNOWN_ROBOT",
        "RECIPIENT_UNKNOWN",
    ]
}
#: A schedule id in a path: a positive 63-bit integer (a larger number is a 422, never a
#: database overflow).
ScheduleId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The schedule's id")]

_FOUND = {404: ["SCHEDULE_NOT_FOUND"], 403: ["PERMISSION_DENIED"]}
_CHANGE = {409: ["SCHEDULE_CHANGED", "SCHEDULE_ENDED"]}


def _fire_texts(schedule: Schedule, count: int = 5) -> list[str]:
    if schedule.status != "ACTIVE" or schedule.next_fire_at is None:
        return []
    first = schedule.next_fire_at.replace(tzinfo=UTC)
    zone = zone_of(schedule.time_zone)
    end = schedule.end_at.replace(tzinfo=UTC) if schedule.end_at else None
    times = [first.astimezone(zone)]
    times += fire_times(schedule.cron, schedule.time_zone, first, count - 1)
    return [t.isoformat() for t in times if end is None or t <= end]


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def schedule_public(schedule: Schedule) -> SchedulePublic:
    """Render a schedule row (``nextFireTimes``: the next five, with the zone's offset;
    empty unless active)."""
    return SchedulePublic(
        scheduleId=schedule.id,
        name=schedule.name,
        owner=schedule.owner,
        export=json.loads(schedule.export_json),
        cron=schedule.cron,
        timezone=schedule.time_zone,
        window=json.loads(schedule.window_json) if schedule.window_json else None,
        startAt=_utc(schedule.start_at),
        endAt=_utc(schedule.end_at),
        notify=json.loads(schedule.notify_json) if schedule.notify_json else None,
        state=schedule.status.lower(),
        pauseReason=schedule.pause_reason,
        nextFireTimes=_fire_texts(schedule),
        createdAt=schedule.created_at.replace(tzinfo=UTC),
        updatedAt=schedule.updated_at.replace(tzinfo=UTC),
    )


def _run_public(run: RunRow, schedule: Schedule) -> RunPublic:
    zone = zone_of(schedule.time_zone)
    return RunPublic(
        fireTime=run.fire_time.replace(tzinfo=UTC).astimezone(zone).isoformat(),
        firedAt=run.fired_at.replace(tzinfo=UTC),
        taskId=run.task_no,
        state=api_state(run.status) if run.status else "failed",
        rows=run.processed_rows,
        fires=run.fires,
        manual=bool(run.manual),
        outcome=run.outcome.lower(),
        windowFrom=run.window_from,
        windowTo=run.window_to,
        code=run.failure_code,
        message=run.message,
    )


@router.post(
    "",
    status_code=201,
    response_model=SchedulePublic,
    responses={**CREATE_ERRORS, **errors(BODY, AUTH, _CHECK_CODES)},
)
def create_schedule(
    body: ScheduleCreate, request: Request, user: CurrentUser, runtime: RuntimeDep
) -> SchedulePublic:
    """Save an export definition that runs on a cron schedule in a time zone."""
    schedule = service.create_schedule(runtime, user, body, request.headers.get("accept-language"))
    return schedule_public(schedule)


@router.get("", response_model=SchedulesPublic, responses=errors(AUTH))
def list_schedules(user: CurrentUser, runtime: RuntimeDep) -> SchedulesPublic:
    """The caller's schedules, newest first."""
    return SchedulesPublic(
        items=[schedule_public(s) for s in service.list_schedules(runtime, user)]
    )


@router.get("/{schedule_id}", response_model=SchedulePublic, responses=errors(AUTH, _FOUND))
def get_schedule(schedule_id: ScheduleId, user: CurrentUser, runtime: RuntimeDep) -> SchedulePublic:
    """One schedule with its next five fire times."""
    return schedule_public(service.visible_schedule(runtime, user, schedule_id))


@router.patch(
    "/{schedule_id}",
    response_model=SchedulePublic,
    responses={**CREATE_ERRORS, **errors(BODY, AUTH, _CHECK_CODES, _FOUND, _CHANGE)},
)
def update_schedule(
    schedule_id: ScheduleId,
    body: ScheduleUpdate,
    request: Request,
    user: CurrentUser,
    runtime: RuntimeDep,
) -> SchedulePublic:
    """Change the fields the body names; the whole definition is checked again."""
    schedule = service.update_schedule(
        runtime, user, schedule_id, body, request.headers.get("accept-language")
    )
    return schedule_public(schedule)


@router.post(
    "/{schedule_id}/pause",
    response_model=SchedulePublic,
    responses=errors(AUTH, _FOUND, _CHANGE),
)
def pause_schedule(
    schedule_id: ScheduleId, user: CurrentUser, runtime: RuntimeDep
) -> SchedulePublic:
    """Stop firing until resumed."""
    return schedule_public(service.pause_schedule(runtime, user, schedule_id))


@router.post(
    "/{schedule_id}/resume",
    response_model=SchedulePublic,
    responses=errors(AUTH, _FOUND, _CHANGE),
)
def resume_schedule(
    schedule_id: ScheduleId, user: CurrentUser, runtime: RuntimeDep
) -> SchedulePublic:
    """Fire again from the next fire time after now."""
    return schedule_public(service.resume_schedule(runtime, user, schedule_id))


@router.post(
    "/{schedule_id}/run", status_code=201, response_model=RunPublic, responses=errors(AUTH, _FOUND)
)
def run_schedule(schedule_id: ScheduleId, user: CurrentUser, runtime: RuntimeDep) -> RunPublic:
    """Run it now, outside its cron (a ``manual`` run); answers the run (``failed`` with
    a code and a sentence when no task could be made)."""
    result = service.run_now(runtime, user, schedule_id)
    schedule, runs = service.runs_of(runtime, user, schedule_id)
    (run,) = [r for r in runs if r.id == result.run_id]
    return _run_public(run, schedule)


@router.delete("/{schedule_id}", status_code=204, responses=errors(AUTH, _FOUND, _CHANGE))
def delete_schedule(schedule_id: ScheduleId, user: CurrentUser, runtime: RuntimeDep) -> Response:
    """Delete the schedule (its runs' tasks stay)."""
    service.delete_schedule(runtime, user, schedule_id)
    return Response(status_code=204)


@router.get("/{schedule_id}/runs", response_model=RunsPublic, responses=errors(AUTH, _FOUND))
def schedule_runs(schedule_id: ScheduleId, user: CurrentUser, runtime: RuntimeDep) -> RunsPublic:
    """The schedule's runs, newest first: fire time, task, the task's state and rows."""
    schedule, runs = service.runs_of(runtime, user, schedule_id)
    return RunsPublic(items=[_run_public(r, schedule) for r in runs])
