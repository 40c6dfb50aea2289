"""The checks a create and a preview share: the type, the format, the task name, and
the file the body asks for.

:func:`checked_type` and :func:`checked_format` answer the create's codes;
:func:`file_spec_of` turns the body's ``columns`` and ``options`` into a
:class:`~export_center.filespec.FileSpec` (the rules are in ``filespec``), checking the
chosen keys against the type's declared columns; :func:`stored_spec` is what a task row
keeps of it.
"""

from __future__ import annotations

import json
import re

from export_center.api.schemas import ExportCreate
from export_center.api.type_columns import declared_columns
from export_center.auth import Identity
from export_center.errors import Conflict, Forbidden, ValidationFailed
from export_center.filespec import FileSpec, language_of_locale, parse_file_spec
from export_center.registry import ExportType
from export_center.runtime import Runtime
from export_center.writers.formats import FORMATS, FileFormat, find_format, format_choices

__all__ = ["checked_format", "checked_task_name", "checked_type", "file_spec_of", "stored_spec"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def checked_type(runtime: Runtime, user: Identity, code: str) -> ExportType:
    """The registered type ``code`` when ``user`` may create it.

    Raises:
        ValidationFailed: ``UNKNOWN_EXPORT_TYPE``.
        Forbidden: ``PERMISSION_DENIED`` (the caller can list the types it may use).
        Conflict: ``EXPORT_TYPE_DISABLED``.
    """
    etype = runtime.registry.get(code)
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


def file_spec_of(
    runtime: Runtime,
    etype: ExportType,
    body: ExportCreate,
    file_format: FileFormat,
    accept_language: str | None,
) -> FileSpec:
    """The :class:`FileSpec` of a create (or preview) body, checked against the type.

    The chosen keys are checked against the type's declared columns (the registry's,
    or the provider's schema answer) when the body chooses any; the header language
    defaults to the request's ``Accept-Language``.

    Raises:
        ValidationFailed: the codes of :func:`filespec.parse_file_spec`.
        ProviderNotAnswering, ProviderAnswerInvalid: columns were chosen and the
            provider's schema answer is needed but failed (503 / 502).
    """
    options = None if body.options is None else body.options.model_dump(exclude_none=True)
    return parse_file_spec(
        file_format,
        body.columns,
        options,
        declared=declared_columns(runtime, etype) if body.columns else None,
        default_language=language_of_locale(accept_language),
        row_cap=etype.max_rows,
        byte_cap=runtime.settings.file_size_cap_bytes,
        formats=list(FORMATS.values()),
    )


def stored_spec(spec: FileSpec) -> str | None:
    """The task row's ``file_spec_json``: canonical JSON, None for the default spec."""
    if spec == FileSpec():
        return None
    return json.dumps(spec.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
