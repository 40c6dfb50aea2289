"""A schedule's definition: the stored export body, and the task one fire creates.

The stored ``export_json`` is the create body of the export without ``requestId``
(canonical JSON). :func:`fire_task` turns it, at one fire, into the
:class:`~export_center.repository.NewTask` through the create's own checks
(:mod:`export_center.api.create_rules`), for the owner as last seen
(:class:`~export_center.repository.schedules.Principal`): the same type, permission,
format, file spec, task name and parameter rules as ``POST /api/v1/exports``. At a fire
the chosen columns are not asked of the provider again (they were checked when the
schedule was saved; a column the provider dropped since fails the task, as it would
fail any task).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from export_center import repository
from export_center.api.create_rules import checked_format, checked_type_in, new_task_of, spec_of
from export_center.api.governance_apply import apply_governance
from export_center.api.schemas import ExportCreate
from export_center.auth import Identity
from export_center.registry import Registry
from export_center.repository.schedules import Schedule
from export_center.schedules.cron import zone_of
from export_center.schedules.windows import Window, window_from_json, window_parameters
from export_center.settings import Settings

__all__ = ["export_body", "export_json", "fire_key", "fire_task", "run_task_name"]


def export_json(body: ExportCreate) -> str:
    """The stored form of a schedule's export body (canonical JSON, no nulls)."""
    data = body.model_dump(mode="json", exclude_none=True)
    data.pop("requestId", None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def export_body(text: str) -> ExportCreate:
    """The export body :func:`export_json` stored."""
    return ExportCreate.model_validate(json.loads(text))


def fire_key(schedule_id: int, fire_time: datetime, *, manual: bool = False) -> str:
    """The idempotency key of one fire: ``schedule:{id}:{fire time ISO UTC}`` (a run
    now: ``schedule:{id}:manual:{instant ISO UTC}``), e.g.
    ``schedule:7:2026-03-09T04:30:00.000Z``. ``fire_time`` is naive UTC or aware."""
    at = fire_time if fire_time.tzinfo is None else fire_time.astimezone(UTC)
    at = at.replace(tzinfo=None)
    text = at.isoformat(timespec="milliseconds") + "Z"
    return f"schedule:{schedule_id}:{'manual:' if manual else ''}{text}"


def fire_task(
    schedule: Schedule,
    registry: Registry,
    settings: Settings,
    owner: Identity,
    fire_time: datetime,
    *,
    key: str,
) -> tuple[repository.NewTask, Window | None, dict[str, Any]]:
    """The task of one fire of ``schedule`` at ``fire_time`` (aware), for ``owner``
    with the permissions last seen, and the window's resolved parameters. A body
    without ``taskName`` names its task after the schedule; either name is followed by
    the run's period (:func:`run_task_name`), so that the runs of one schedule are
    told apart in lists, messages and file names.

    Raises:
        Forbidden: ``PERMISSION_DENIED``: the owner's permissions lack the type's.
        Conflict: ``EXPORT_TYPE_DISABLED``.
        ValidationFailed: the definition no longer passes the create's checks
            (``UNKNOWN_EXPORT_TYPE``, parameters, ``WINDOW_NOT_SUPPORTED``, ...).
    """
    body = export_body(schedule.export_json)
    etype = checked_type_in(registry, owner, body.exportType)
    spec = spec_of(
        etype,
        body,
        checked_format(body.format),
        None,
        declared=None,
        byte_cap=settings.file_size_cap_bytes,
    )
    window = window_from_json(schedule.window_json)
    resolved: dict[str, Any] = {}
    parameters = dict(body.parameters)
    if window is not None:
        resolved = window_parameters(window, etype, fire_time, zone_of(schedule.time_zone))
        parameters.update(resolved)
    period = list(resolved.values()) or [fire_time.astimezone(zone_of(schedule.time_zone)).date()]
    base = (body.taskName or "").strip() or schedule.name.strip()
    body = body.model_copy(update={"taskName": run_task_name(base, [str(d) for d in period])})
    new = new_task_of(
        etype,
        settings,
        owner,
        body,
        spec,
        parameters=parameters,
        request_id=key,
        default_time_zone=schedule.time_zone,
        schedule_id=schedule.id,
        notify_json=schedule.notify_json,
    )
    # Ceiling and approval as a create's, without an estimate (no provider call here).
    new = apply_governance(
        etype,
        owner,
        spec,
        new,
        estimate=None,
        expire_seconds=settings.approvals.expire_hours * 3600,
    )
    return new, window, resolved


def run_task_name(base: str, period: list[str]) -> str:
    """The name of a schedule's run: ``base`` and the run's period, at most 100
    characters (``base`` is shortened, never the period).

    ``period`` is the window's first and last day (ISO dates), or the fire's date in the
    schedule's zone when it has no window: "Weekly orders 2026-11-29" (one day), "每周订单
    2026-11-23~2026-11-29" (several).
    """
    first, last = period[0], period[-1]
    suffix = first if first == last else f"{first}~{last}"
    return f"{base[: 100 - len(suffix) - 1].rstrip()} {suffix}"
