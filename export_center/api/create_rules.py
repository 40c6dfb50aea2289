"""The checks of a create that need no running process: the rules a create request
and a schedule's fire share (issue 24: a fire goes "through the normal create path").

:func:`checked_type_in`, :func:`checked_format`, :func:`checked_task_name`,
:func:`spec_of` and :func:`stored_spec` are the create's checks; :func:`new_task_of`
runs them in the create's order and builds the :class:`~export_center.repository.NewTask`;
:func:`create_in` runs :func:`~export_center.repository.create_task` with the
deployment's limits inside the caller's transaction. This module does not import the
runtime, so the scheduler loop (which the runtime starts) can use it;
:mod:`export_center.api.file_spec` and :mod:`export_center.api.service` wrap it for a
request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from export_center import quotas, repository
from export_center.api.params import validate_parameters, validate_time_zone
from export_center.api.schemas import ExportCreate
from export_center.auth import Identity
from export_center.columns import Column
from export_center.commands import COMMAND_TAG
from export_center.errors import Conflict, Forbidden, ValidationFailed
from export_center.filespec import FileSpec, language_of_locale, parse_file_spec
from export_center.registry import ExportType, Registry
from export_center.settings import Settings
from export_center.writers.formats import FORMATS, FileFormat, find_format, format_choices

__all__ = [
    "checked_format",
    "checked_task_name",
    "checked_type_in",
    "create_in",
    "default_task_name",
    "new_task_of",
    "spec_of",
    "stored_spec",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def checked_type_in(registry: Registry, user: Identity, code: str) -> ExportType:
    """The registered type ``code`` when ``user`` may create it: the type's
    ``required_permission`` among the user's permissions and the user's app the type's
    ``app_scope``.

    Raises:
        ValidationFailed: ``UNKNOWN_EXPORT_TYPE``.
        Forbidden: ``PERMISSION_DENIED`` (the caller can list the types it may use).
        Conflict: ``EXPORT_TYPE_DISABLED``.
    """
    etype = registry.get(code)
    if etype is None:
        raise ValidationFailed(
            f"unknown export type {code!r}", code="UNKNOWN_EXPORT_TYPE", field="exportType"
        )
    if not user.can(etype.required_permission) or user.app_code != etype.app_scope:
        raise Forbidden(f"you may not create {etype.code} exports", code="PERMISSION_DENIED")
    if not etype.enabled:
        raise Conflict(f"{etype.code} exports are disabled", code="EXPORT_TYPE_DISABLED")
    return etype


def checked_format(value: str) -> FileFormat:
    """The format a body names (any letter case), when this installation can write it.

    Raises:
        ValidationFailed: ``INVALID_FORMAT`` (no such format), ``FORMAT_NOT_INSTALLED``
            (its optional extra is not installed; the message says which).
    """
    file_format = find_format(value.strip())
    if file_format is None:
        raise ValidationFailed(
            f"format must be {format_choices()}, got {value!r}",
            code="INVALID_FORMAT",
            field="format",
        )
    if not file_format.available:
        raise ValidationFailed(
            file_format.missing_extra or f"format {file_format.name} cannot be written here",
            code="FORMAT_NOT_INSTALLED",
            field="format",
        )
    return file_format


def default_task_name(etype: ExportType, language: str) -> str:
    """The name of a task whose body names none, in the file's header language: "Orders
    export", or "订单导出" for ``zh-CN`` when the type has a Chinese title."""
    if language == "zh-CN" and etype.title_zh:
        return f"{etype.title_zh}导出"
    return f"{etype.title} export"


def checked_task_name(name: str | None) -> None:
    """Refuse a task name with control characters.

    Raises:
        ValidationFailed: ``INVALID_VALUE`` on ``taskName``.
    """
    if name is not None and _CONTROL.search(name):
        raise ValidationFailed(
            "taskName must not contain control characters (U+0000-U+001F, U+007F-U+009F)",
            code="INVALID_VALUE",
            field="taskName",
        )


def spec_of(
    etype: ExportType,
    body: ExportCreate,
    file_format: FileFormat,
    accept_language: str | None,
    *,
    declared: Sequence[Column] | None,
    byte_cap: int | None,
) -> FileSpec:
    """The :class:`FileSpec` of a body's ``columns`` and ``options``; chosen keys are
    checked against ``declared`` (the type's columns) when it is given.

    Raises:
        ValidationFailed: the codes of :func:`filespec.parse_file_spec`.
    """
    options = None if body.options is None else body.options.model_dump(exclude_none=True)
    return parse_file_spec(
        file_format,
        body.columns,
        options,
        declared=list(declared) if declared is not None else None,
        default_language=language_of_locale(accept_language),
        row_cap=etype.max_rows,
        byte_cap=byte_cap,
        formats=list(FORMATS.values()),
    )


def stored_spec(spec: FileSpec) -> str | None:
    """The task row's ``file_spec_json``: canonical JSON, None for the default spec."""
    if spec == FileSpec():
        return None
    return json.dumps(spec.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def new_task_of(
    etype: ExportType,
    settings: Settings,
    user: Identity,
    body: ExportCreate,
    spec: FileSpec,
    *,
    parameters: dict[str, Any] | None = None,
    request_id: str | None = None,
    trace_id: str | None = None,
    default_time_zone: str | None = None,
    schedule_id: int | None = None,
    notify_json: str | None = None,
) -> repository.NewTask:
    """The :class:`~export_center.repository.NewTask` of a checked type and spec: task
    name, parameters (``parameters`` overrides the body's, e.g. a schedule's window)
    and time zone checked, owner = ``user``.

    ``default_time_zone`` is the zone when the body names none (a schedule's zone);
    None: ``task.time_zone``.

    Raises:
        ValidationFailed: ``INVALID_VALUE`` (task name), the parameter codes,
            ``INVALID_TIME_ZONE``.
    """
    file_format = checked_format(body.format)
    checked_task_name(body.taskName)
    checked = validate_parameters(etype, body.parameters if parameters is None else parameters)
    return repository.NewTask(
        export_type=etype.code,
        format=file_format.task_value,
        task_name=(body.taskName or "").strip() or default_task_name(etype, spec.language),
        parameters=checked,
        tenant_id=user.tenant,
        app_code=user.app_code,
        requested_by=user.user,
        max_attempts=etype.max_attempts,
        request_id=request_id,
        time_zone=validate_time_zone(body.timeZone, default_time_zone or settings.task.time_zone),
        trace_id=trace_id,
        file_spec_json=stored_spec(spec),
        schedule_id=schedule_id,
        notify_json=notify_json,
    )


def create_in(
    conn: Connection, settings: Settings, new: repository.NewTask
) -> repository.CreateResult:
    """:func:`repository.create_task` with this deployment's command topic and limits,
    in the caller's transaction (duplicate window, active limits, first outbox row).

    Raises:
        repository.LimitReached: a per-user or per-type active limit is reached.
        quotas.QuotaExceeded: a daily quota is used up (429 ``QUOTA_EXCEEDED``).
    """
    limits = settings.limits
    return repository.create_task(
        conn,
        new,
        topic=settings.command_topic,
        tag=COMMAND_TAG,
        limits=repository.CreateLimits(
            duplicate_window_seconds=limits.duplicate_window_seconds,
            max_active_per_user=limits.max_active_per_user,
            max_active_per_type=limits.max_active_per_type,
        ),
        check=lambda c, n: quotas.check_create(c, settings, n),
    )
