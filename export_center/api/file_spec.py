"""The file a create or preview body asks for, checked against its export type.

:func:`file_spec_of` turns the body's ``columns`` and ``options`` into a
:class:`~export_center.filespec.FileSpec` (the rules are in ``filespec``);
:func:`stored_spec` is what a task row keeps of it.
"""

from __future__ import annotations

import json

from export_center.api.preview import declared_columns
from export_center.api.schemas import ExportCreate
from export_center.filespec import FileSpec, language_of_locale, parse_file_spec
from export_center.registry import ExportType
from export_center.runtime import Runtime

__all__ = ["file_spec_of", "stored_spec"]


def file_spec_of(
    runtime: Runtime,
    etype: ExportType,
    body: ExportCreate,
    fmt: str,
    accept_language: str | None,
) -> FileSpec:
    """The :class:`FileSpec` of a create (or preview) body, checked against the type.

    The chosen keys are checked against the type's declared columns when they are
    known before the export (:func:`declared_columns`); the header language defaults to
    the request's ``Accept-Language``.

    Raises:
        ValidationFailed: the codes of :func:`filespec.parse_file_spec`.
    """
    columns = body.columns
    options = None if body.options is None else body.options.model_dump(exclude_none=True)
    return parse_file_spec(
        fmt,
        columns,
        options,
        declared=declared_columns(runtime, etype) if columns else None,
        default_language=language_of_locale(accept_language),
        row_cap=etype.max_rows,
        byte_cap=runtime.settings.file_size_cap_bytes,
    )


def stored_spec(spec: FileSpec) -> str | None:
    """The task row's ``file_spec_json``: canonical JSON, None for the default spec."""
    if spec == FileSpec():
        return None
    return json.dumps(spec.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
