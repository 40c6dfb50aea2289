"""What ``/api/v1/schedules`` does, apart from HTTP.

* :func:`create_schedule` / :func:`update_schedule`: the body through the create's own
  checks (type, permission, format, columns and options, parameters with the window
  resolved now, task name), then the cron, the zone, the window, start and end and the
  notify targets; the first ``next_fire_at`` is the first fire after now (database
  clock) and after ``startAt``. The owner is the caller (tenant, app, user), whose
  token is recorded (``export_principal``) in the same transaction.
* Visibility: the owner, and in the same tenant the holders of
  ``platform:download:all`` (read only); anyone else gets 404 ``SCHEDULE_NOT_FOUND``
  (no existence oracle). Changes are the owner's (403 ``PERMISSION_DENIED`` for a
  reader).
* :func:`run_now`: one run at the database's now through the scheduler's own fire
  (:func:`~export_center.schedules.scheduler.fire_once`), key
  ``schedule:{id}:manual:{instant}``, with the caller's current permissions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from pydantic import ValidationError as PydanticError

from export_center import metrics
from export_center.api.create_rules import new_task_of
from export_center.api.file_spec import (
    checked_format,
    checked_notify,
    checked_type,
    file_spec_of,
)
from export_center.api.schedule_schemas import ScheduleCreate, ScheduleUpdate
from export_center.api.schemas import ExportCreate, ExportOptions
from export_center.auth import DOWNLOAD_ALL, Identity, header_language_of
from export_center.db import reading
from export_center.errors import Conflict, Forbidden, NotFound, RequestError, ValidationFailed
from export_center.notify.targets import targets_json
from export_center.repository import schedules as srepo
from export_center.repository.schedules import RunRow, Schedule
from export_center.runtime import Runtime
from export_center.schedules.cron import CronSchedule, parse_cron
from export_center.schedules.definition import export_json
from export_center.schedules.scheduler import FireResult, fire_once
from export_center.schedules.windows import (
    Window,
    check_window_type,
    parse_window,
    window_parameters,
)

__all__ = [
    "Checked",
    "create_schedule",
    "delete_schedule",
    "list_schedules",
    "pause_schedule",
    "resume_schedule",
    "run_now",
    "runs_of",
    "update_schedule",
    "visible_schedule",
]


_ONE_US = timedelta(microseconds=1)
#: Fields a PATCH may change but not clear.
_REQUIRED = frozenset({"name", "export", "cron", "timezone"})


@dataclass(frozen=True, slots=True)
class Checked:
    """A schedule body after every check: the columns to store and the parsed cron."""

    values: dict[str, Any]
    cron: CronSchedule
    start_at: datetime | None


def _aware(value: datetime | None, zone: tzinfo = UTC) -> datetime | None:
    """An API instant as aware UTC; one without an offset is a wall time in ``zone``
    (the schedule's time zone: "startAt 2026-12-07T08:00" is 08:00 there)."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=zone)).astimezone(UTC)


def _naive(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC).replace(tzinfo=None)


def _prefixed(exc: RequestError, prefix: str) -> RequestError:
    if exc.field and not exc.field.startswith(prefix):
        exc.field = f"{prefix}{exc.field}"
    return exc


def _check_export(
    runtime: Runtime,
    user: Identity,
    body: ExportCreate,
    window: Window | None,
    cron: CronSchedule,
    now: datetime,
    accept_language: str | None,
) -> tuple[str, str]:
    """Run the create's checks on the export body; returns its type code and the
    header language its files get (``options.language``, else the request's
    ``Accept-Language``).

    Raises:
        RequestError: the create's codes, ``field`` under ``export.``;
            ``WINDOW_NOT_SUPPORTED`` on ``window``; ``WINDOW_CONFLICT`` when the
            parameters name what the window sets; ``UNKNOWN_FIELD`` for
            ``export.requestId`` and ``INVALID_NOTIFY`` for ``export.notify`` (a
            schedule's own fields).
    """
    if body.requestId is not None:
        raise ValidationFailed(
            "export.requestId is not allowed: each run has its own key",
            code="UNKNOWN_FIELD",
            field="export.requestId",
        )
    if body.notify is not None:
        raise ValidationFailed(
            "export.notify is not allowed: a schedule names who is told of its runs in "
            "its own notify, beside export",
            code="INVALID_NOTIFY",
            field="export.notify",
        )
    try:
        etype = checked_type(runtime, user, body.exportType)
        file_format = checked_format(body.format)
        spec = file_spec_of(
            runtime, etype, body, file_format, accept_language or header_language_of(user)
        )
    except RequestError as exc:
        raise _prefixed(exc, "export.") from None
    check_window_type(window, etype)
    parameters = dict(body.parameters)
    if window is not None and etype.date_range is not None:
        for name in etype.date_range:
            if name in parameters:
                raise ValidationFailed(
                    f"export.parameters.{name} is set by the window at each fire; leave "
                    f"it out of the parameters, or remove the window to export a fixed "
                    "range every time",
                    code="WINDOW_CONFLICT",
                    field=f"export.parameters.{name}",
                )
    if window is not None:
        parameters.update(window_parameters(window, etype, now, cron.zone))
    try:
        new_task_of(
            etype,
            runtime.settings,
            user,
            body,
            spec,
            parameters=parameters,
            default_time_zone=cron.zone.key,
        )
    except RequestError as exc:
        raise _prefixed(exc, "export.") from None
    return etype.code, spec.language


def _with_language(body: ExportCreate, language: str) -> ExportCreate:
    """``body`` with ``options.language`` set when it names none: a fire has no
    request, so the language of the request that saved the schedule is kept."""
    if body.options is not None and body.options.language:
        return body
    options = (body.options or ExportOptions()).model_copy(update={"language": language})
    return body.model_copy(update={"options": options})


def _checked(
    runtime: Runtime,
    user: Identity,
    body: ScheduleCreate,
    now: datetime,
    accept_language: str | None,
) -> Checked:
    """Every check of a schedule body (module docstring), in the order of its fields.

    Raises:
        RequestError: 422 ``INVALID_CRON``, ``UNKNOWN_TIME_ZONE``, ``INVALID_WINDOW``,
            ``WINDOW_NOT_SUPPORTED``, ``INVALID_VALUE`` (name, startAt/endAt), the
            create's codes under ``export.``, the notify codes; 403/409 as a create.
    """
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in body.name):
        raise ValidationFailed(
            "name must not contain control characters", code="INVALID_VALUE", field="name"
        )
    cron = parse_cron(body.cron, body.timezone)
    window = parse_window(body.window)
    export_type, language = _check_export(
        runtime, user, body.export, window, cron, now, accept_language
    )
    start, end = _aware(body.startAt, cron.zone), _aware(body.endAt, cron.zone)
    if start is not None and end is not None and end <= start:
        raise ValidationFailed("endAt must be after startAt", code="INVALID_VALUE", field="endAt")
    if end is not None and end <= now:
        raise ValidationFailed("endAt is in the past", code="INVALID_VALUE", field="endAt")
    targets = checked_notify(runtime, user, body.notify)
    values = {
        "tenant_id": user.tenant,
        "app_code": user.app_code,
        "owner": user.user,
        "name": body.name.strip() or body.name,
        "export_type": export_type,
        "export_json": export_json(_with_language(body.export, language)),
        "cron": body.cron.strip(),
        "time_zone": body.timezone,
        "window_json": window.to_json() if window else None,
        "start_at": _naive(start),
        "end_at": _naive(end),
        "notify_json": targets_json(targets),
    }
    return Checked(values, cron, start)


def _first_fire(checked: Checked, now: datetime, end: datetime | None) -> datetime | None:
    """The first fire after ``now`` and not before ``startAt``; None past ``endAt``."""
    after = now
    if checked.start_at is not None and checked.start_at > now:
        after = checked.start_at.replace(microsecond=0) - _ONE_US
    at = checked.cron.next_after(after)
    if at is None or (end is not None and at > end):
        return None
    return at


def _now(runtime: Runtime) -> datetime:
    with reading(runtime.engine) as conn:
        return srepo.database_now(conn)


def create_schedule(
    runtime: Runtime, user: Identity, body: ScheduleCreate, accept_language: str | None = None
) -> Schedule:
    """Check and save a schedule owned by ``user``; returns it.

    Raises:
        RequestError: as :func:`_checked`.
    """
    now = _now(runtime)
    checked = _checked(runtime, user, body, now, accept_language)
    end = _aware(body.endAt, checked.cron.zone)
    first = _first_fire(checked, now, end)
    with runtime.engine.begin() as conn:
        srepo.touch_principal(conn, user, force=True)
        schedule_id = srepo.insert_schedule(
            conn,
            {
                **checked.values,
                "status": "ACTIVE" if first else "ENDED",
                "next_fire_at": _naive(first),
            },
        )
        schedule = srepo.read_schedule(conn, schedule_id)
    assert schedule is not None
    return schedule


def _readable(schedule: Schedule | None, user: Identity) -> Schedule:
    if (
        schedule is None
        or schedule.tenant_id != user.tenant
        or schedule.app_code != user.app_code
        or (schedule.owner != user.user and not user.can(DOWNLOAD_ALL))
    ):
        raise NotFound("no such schedule", code="SCHEDULE_NOT_FOUND")
    return schedule


def visible_schedule(runtime: Runtime, user: Identity, schedule_id: int) -> Schedule:
    """The schedule when ``user`` may read it (module docstring).

    Raises:
        NotFound: ``SCHEDULE_NOT_FOUND`` (also for other tenants' and users' schedules).
    """
    with reading(runtime.engine) as conn:
        return _readable(srepo.read_schedule(conn, schedule_id), user)


def _owned(runtime: Runtime, user: Identity, schedule_id: int) -> Schedule:
    schedule = visible_schedule(runtime, user, schedule_id)
    if schedule.owner != user.user:
        raise Forbidden("only the owner may change a schedule", code="PERMISSION_DENIED")
    return schedule


def list_schedules(runtime: Runtime, user: Identity) -> list[Schedule]:
    """The caller's own schedules, newest first (at most 200)."""
    with reading(runtime.engine) as conn:
        rows = srepo.list_schedules(conn, tenant_id=user.tenant, owner=user.user)
    return [r for r in rows if r.app_code == user.app_code]


def _write(runtime: Runtime, schedule: Schedule, values: dict[str, Any]) -> None:
    with runtime.engine.begin() as conn:
        if not srepo.update_schedule(conn, schedule.id, schedule.version, values):
            raise Conflict(
                "the schedule changed at the same time (or is firing); read it and try again",
                code="SCHEDULE_CHANGED",
            )


def _changed(runtime: Runtime, schedule: Schedule, values: dict[str, Any]) -> Schedule:
    _write(runtime, schedule, values)
    with reading(runtime.engine) as conn:
        fresh = srepo.read_schedule(conn, schedule.id)
    if fresh is None:
        raise NotFound("no such schedule", code="SCHEDULE_NOT_FOUND")
    return fresh


def update_schedule(
    runtime: Runtime,
    user: Identity,
    schedule_id: int,
    body: ScheduleUpdate,
    accept_language: str | None = None,
) -> Schedule:
    """Change the fields ``body`` sets, re-check the whole definition, and compute the
    next fire from now (a paused schedule stays paused).

    Raises:
        NotFound, Forbidden, Conflict (``SCHEDULE_CHANGED``), RequestError: as create.
    """
    old = _owned(runtime, user, schedule_id)
    merged: dict[str, Any] = {
        "name": old.name,
        "export": json.loads(old.export_json),
        "cron": old.cron,
        "timezone": old.time_zone,
        "window": json.loads(old.window_json) if old.window_json else None,
        "startAt": old.start_at.replace(tzinfo=UTC) if old.start_at else None,
        "endAt": old.end_at.replace(tzinfo=UTC) if old.end_at else None,
        "notify": json.loads(old.notify_json) if old.notify_json else None,
    }
    for name in sorted(body.model_fields_set):
        value = getattr(body, name)
        if value is None and name in _REQUIRED:
            raise ValidationFailed(
                f"{name} cannot be null; leave it out to keep it", code="INVALID_VALUE", field=name
            )
        merged[name] = value.model_dump(exclude_none=True) if name == "export" else value
    try:
        full = ScheduleCreate.model_validate(merged)
    except PydanticError as exc:  # a stored value that no longer fits (cannot be the body's)
        problem = exc.errors()[0]
        field = ".".join(str(p) for p in problem.get("loc", ())) or None
        raise ValidationFailed(f"{field}: {problem.get('msg')}", field=field) from None
    now = _now(runtime)
    checked = _checked(runtime, user, full, now, accept_language)
    first = _first_fire(checked, now, _aware(full.endAt, checked.cron.zone))
    status = old.status if old.status == "PAUSED" else ("ACTIVE" if first else "ENDED")
    with runtime.engine.begin() as conn:
        srepo.touch_principal(conn, user, force=True)
    return _changed(
        runtime,
        old,
        {**checked.values, "next_fire_at": _naive(first), "status": status},
    )


def pause_schedule(runtime: Runtime, user: Identity, schedule_id: int) -> Schedule:
    """Pause: no fire until resumed (``pause_reason`` says who paused it).

    Raises:
        NotFound, Forbidden; Conflict ``SCHEDULE_ENDED``.
    """
    old = _owned(runtime, user, schedule_id)
    if old.status == "ENDED":
        raise Conflict("the schedule has ended", code="SCHEDULE_ENDED")
    return _changed(runtime, old, {"status": "PAUSED", "pause_reason": f"paused by {user.user}"})


def _may_run(runtime: Runtime, user: Identity, schedule: Schedule, doing: str) -> None:
    """Refuse (403) an owner whose token lacks the export type's permission: a fire
    would fail on it, and a timed one would pause the schedule again.

    Raises:
        Forbidden: ``PERMISSION_DENIED`` naming the permission.
    """
    etype = runtime.registry.get(schedule.export_type)
    if etype is None:
        return  # the type left the registry: the fire fails with its own code
    if not user.can(etype.required_permission) or user.app_code != etype.app_scope:
        raise Forbidden(
            f"cannot {doing} the schedule: your token lacks {etype.required_permission} "
            f"for app {etype.app_scope}, which its {etype.code} exports need",
            code="PERMISSION_DENIED",
        )


def resume_schedule(runtime: Runtime, user: Identity, schedule_id: int) -> Schedule:
    """Resume: the next fire is the first after now (fires missed while paused are not
    made up). The owner must hold the type's permission now.

    Raises:
        NotFound, Forbidden (also ``PERMISSION_DENIED`` for a token without the type's
        permission); Conflict ``SCHEDULE_ENDED``.
    """
    old = _owned(runtime, user, schedule_id)
    if old.status == "ENDED":
        raise Conflict("the schedule has ended", code="SCHEDULE_ENDED")
    _may_run(runtime, user, old, "resume")
    now = _now(runtime)
    cron = parse_cron(old.cron, old.time_zone)
    start = old.start_at.replace(tzinfo=UTC) if old.start_at else None
    end = old.end_at.replace(tzinfo=UTC) if old.end_at else None
    checked = Checked({}, cron, start)
    first = _first_fire(checked, now, end)
    with runtime.engine.begin() as conn:
        srepo.touch_principal(conn, user, force=True)
    return _changed(
        runtime,
        old,
        {
            "status": "ACTIVE" if first else "ENDED",
            "pause_reason": None,
            "next_fire_at": _naive(first),
        },
    )


def delete_schedule(runtime: Runtime, user: Identity, schedule_id: int) -> None:
    """Delete (soft: the row and its runs stay for the history of its tasks).

    Raises:
        NotFound, Forbidden, Conflict ``SCHEDULE_CHANGED``.
    """
    old = _owned(runtime, user, schedule_id)
    _write(runtime, old, {"deleted_at": "DELETE", "status": "ENDED", "next_fire_at": None})


def run_now(runtime: Runtime, user: Identity, schedule_id: int) -> FireResult:
    """Fire the schedule once now, outside its cron (``manual`` run), as the caller.

    Returns:
        The fire's result (a FAILED run when it could not create its task).

    Raises:
        NotFound, Forbidden (also ``PERMISSION_DENIED`` before any run when the
        caller's token lacks the type's permission: the caller is asking, not the
        schedule, so it is a refusal, not a failed run and a pause).
    """
    schedule = _owned(runtime, user, schedule_id)
    _may_run(runtime, user, schedule, "run")
    with runtime.engine.begin() as conn:
        srepo.touch_principal(conn, user)
        now = srepo.database_now(conn)
        result = fire_once(
            conn,
            schedule,
            registry=runtime.registry,
            settings=runtime.settings,
            owner=user,
            fire_time=now,
            manual=True,
        )
    if result.created:
        metrics.TASKS_CREATED.labels(schedule.export_type).inc()
        runtime.publish_soon()
    return result


def runs_of(runtime: Runtime, user: Identity, schedule_id: int) -> tuple[Schedule, list[RunRow]]:
    """The schedule and its runs, newest first (at most 100).

    Raises:
        NotFound: ``SCHEDULE_NOT_FOUND``.
    """
    schedule = visible_schedule(runtime, user, schedule_id)
    with reading(runtime.engine) as conn:
        return schedule, srepo.list_runs(conn, schedule.id)
