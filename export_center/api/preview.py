"""A type's columns, and the preview of an export before anything runs.

* :func:`visible_type`: the type when the caller may use it (the list's rule).
* :func:`declared_columns`: a type's columns, from the registry or from the provider's
  schema answer (a batch request with ``limit: 0``), kept :data:`SCHEMA_CACHE_SECONDS`
  per type and provider address. The create path calls it to check ``columns`` before a
  task exists.
* :func:`preview_export`: what an export of a create body would give, checked exactly
  like a create, without a task, a limit or a file: the row estimate, the columns, the
  first rows as they would be written (:mod:`export_center.api.preview_render`), the
  estimated bytes, the files and sheets, and warnings.

Provider failures answer 503 ``PROVIDER_UNAVAILABLE`` (no answer in time, 5xx, too
large) or 502 ``PROVIDER_CONTRACT`` / ``PROVIDER_REJECTED`` (a bad answer, a refusal),
never a 500.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from export_center.api.params import validate_parameters, validate_time_zone
from export_center.api.schemas import ExportCreate
from export_center.attempt.batches import BatchConverter
from export_center.attempt.shards import plan_shards
from export_center.attempt.steps import convert
from export_center.auth import Identity
from export_center.columns import Column
from export_center.errors import (
    Conflict,
    ExportFailure,
    FetchAborted,
    Forbidden,
    NotFound,
    ProviderContractError,
    ProviderRejected,
    RequestError,
    ValidationFailed,
)
from export_center.filespec import FileSpec, language_of_locale, parse_file_spec
from export_center.ids import new_trace_id
from export_center.provider_client import Batch, ProviderRequest
from export_center.registry import ExportType, RegistryError
from export_center.runtime import Runtime
from export_center.writers.formats import FileFormat, find_format, format_choices

__all__ = [
    "PREVIEW_ROWS",
    "PROVIDER_TIME_LIMIT_SECONDS",
    "SCHEMA_CACHE_SECONDS",
    "Preview",
    "ProviderAnswerInvalid",
    "ProviderNotAnswering",
    "declared_columns",
    "forget_schemas",
    "preview_export",
    "visible_type",
]

SCHEMA_CACHE_SECONDS = 60.0
"""How long a provider's schema answer is kept per type and address (seconds)."""
PREVIEW_ROWS = 20
"""Rows a preview asks for and shows."""
PROVIDER_TIME_LIMIT_SECONDS = 15.0
"""Longest a preview or a column lookup waits for the provider, tries included (s)."""
MAX_SHARD_REQUESTS = 8
"""A sharded type's preview reads at most this many shards to find its first rows."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ProviderNotAnswering(RequestError):
    """503 ``PROVIDER_UNAVAILABLE``: the provider did not answer in time, or answered a
    5xx, or an answer too large; trying again later may work."""

    status = 503
    code = "PROVIDER_UNAVAILABLE"


class ProviderAnswerInvalid(RequestError):
    """502 ``PROVIDER_CONTRACT`` (a bad answer) or ``PROVIDER_REJECTED`` (it refused)."""

    status = 502
    code = "PROVIDER_CONTRACT"


def _provider_error(etype: ExportType, exc: Exception) -> RequestError:
    """The API error of a failed provider call (module docstring)."""
    if isinstance(exc, ProviderContractError):
        return ProviderAnswerInvalid(f"the {etype.code} provider's answer is invalid: {exc}")
    if isinstance(exc, ProviderRejected):
        return ProviderAnswerInvalid(
            f"the {etype.code} provider refused the request ({exc.code}): {exc.message}",
            code="PROVIDER_REJECTED",
        )
    if isinstance(exc, ExportFailure) and exc.permanent:
        return ProviderAnswerInvalid(f"the {etype.code} provider's answer is invalid: {exc}")
    detail = exc.message if isinstance(exc, ExportFailure) else str(exc)
    return ProviderNotAnswering(
        f"the {etype.code} provider does not answer now ({detail}); try again in a minute"
    )


@contextmanager
def _provider_call(etype: ExportType) -> Iterator[None]:
    """Turn the provider errors of the block into their API errors."""
    try:
        yield
    except RequestError:
        raise
    except (ExportFailure, FetchAborted, RegistryError) as exc:
        raise _provider_error(etype, exc) from None


def visible_type(runtime: Runtime, user: Identity, code: str) -> ExportType:
    """The type ``code`` when ``user`` may use it: enabled, the permission, the app scope
    (the rule of ``GET /api/v1/export-types``).

    Raises:
        NotFound: ``UNKNOWN_EXPORT_TYPE``, also for a type the caller may not use.
    """
    etype = runtime.registry.get(code)
    if (
        etype is None
        or not etype.enabled
        or not user.can(etype.required_permission)
        or user.app_code != etype.app_scope
    ):
        raise NotFound(f"no export type {code!r} you may use", code="UNKNOWN_EXPORT_TYPE")
    return etype


_schemas: dict[tuple[str, str], tuple[float, list[Column]]] = {}
_schemas_lock = threading.Lock()


def forget_schemas() -> None:
    """Drop every kept schema answer (after a registry reload, in tests)."""
    with _schemas_lock:
        _schemas.clear()


def _request(
    runtime: Runtime,
    etype: ExportType,
    *,
    tenant: str,
    app: str,
    user: str,
    parameters: Mapping[str, Any],
    time_zone: str,
    trace_id: str | None,
    shard: Mapping[str, Any] | None = None,
) -> ProviderRequest:
    """A provider request with a ``preview-<uuid>`` task id (no task exists)."""
    return ProviderRequest(
        export_type=etype.code,
        url=etype.base_url(runtime.self_url) + etype.provider_path,
        task_id=f"preview-{uuid.uuid4().hex}",
        tenant_id=tenant,
        app_code=app,
        requested_by=user,
        dispatch_version=1,
        parameters=parameters,
        limit=PREVIEW_ROWS,
        trace_id=trace_id or new_trace_id(),
        time_zone=time_zone,
        shard=shard,
    )


def declared_columns(runtime: Runtime, etype: ExportType) -> list[Column]:
    """The columns of ``etype``: the registry's, else the provider's schema answer.

    The schema request (``limit: 0``, no parameters, the export center as tenant and
    user) is answered once per :data:`SCHEMA_CACHE_SECONDS` per type and address.

    Args:
        runtime: the process (registry, provider client, own URL).
        etype: a registered type.

    Returns:
        The columns in the provider's order, with both titles, precision and scale.

    Raises:
        ProviderNotAnswering: 503 ``PROVIDER_UNAVAILABLE``.
        ProviderAnswerInvalid: 502 ``PROVIDER_CONTRACT`` or ``PROVIDER_REJECTED``.
    """
    if etype.columns:
        return list(etype.columns)
    with _provider_call(etype):
        url = etype.base_url(runtime.self_url) + etype.provider_path
        key = (etype.code, url)
        now = time.monotonic()
        with _schemas_lock:
            kept = _schemas.get(key)
        if kept is not None and kept[0] > now:
            return list(kept[1])
        request = _request(
            runtime,
            etype,
            tenant="export-center",
            app=etype.app_scope,
            user="export-center",
            parameters={},
            time_zone="UTC",
            trace_id=None,
        )
        schema = runtime.provider_client.schema(request, time_limit=PROVIDER_TIME_LIMIT_SECONDS)
        with _schemas_lock:
            _schemas[key] = (now + SCHEMA_CACHE_SECONDS, list(schema.columns))
        return list(schema.columns)


# --------------------------------------------------------------------------- preview


@dataclass(frozen=True, slots=True)
class Preview:
    """What :func:`preview_export` found, before it is rendered for the answer.

    Attributes:
        etype: the type.
        file_format: the format.
        spec: the checked file spec.
        time_zone: the export's time zone.
        columns: the output columns (projected, titled in the header language).
        rows: the first rows' typed values, column-major, projected (at most 20).
        estimated_rows: the provider's estimate, or None.
    """

    etype: ExportType
    file_format: FileFormat
    spec: FileSpec
    time_zone: str
    columns: list[Column]
    rows: list[list[Any]]
    estimated_rows: int | None


def _checked_type(runtime: Runtime, user: Identity, code: str) -> ExportType:
    """The create path's type check (same codes as a create)."""
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


def _checked_format(value: str) -> FileFormat:
    """The create path's format check, and the optional extra a format may need."""
    file_format = find_format(value.strip())
    if file_format is None:
        raise ValidationFailed(
            f"format must be {format_choices()}, got {value!r}",
            code="INVALID_FORMAT",
            field="format",
        )
    if not getattr(file_format, "available", True):
        raise ValidationFailed(
            str(getattr(file_format, "missing_extra", f"format {file_format.name} is missing")),
            code="FORMAT_NOT_INSTALLED",
            field="format",
        )
    return file_format


def preview_export(
    runtime: Runtime,
    user: Identity,
    body: ExportCreate,
    *,
    accept_language: str | None,
    trace_id: str | None,
) -> Preview:
    """Check ``body`` as a create does and read the first rows of its export.

    Checks, with the create's codes: the type (``UNKNOWN_EXPORT_TYPE``,
    ``PERMISSION_DENIED``, ``EXPORT_TYPE_DISABLED``), ``format``, ``taskName``,
    ``parameters``, ``timeZone``, then ``columns`` and ``options``
    (:func:`~export_center.filespec.parse_file_spec` against :func:`declared_columns`).
    No task is created and no limit is counted. The provider is asked once with
    ``limit: 20`` (cursor None; its ``totalRows`` is the estimate); a sharded type is
    asked for its first shards (the file's first rows) until 20 rows or
    :data:`MAX_SHARD_REQUESTS`, and its estimate comes from a schema request with the
    whole parameters.

    Returns:
        The preview (rendered by :mod:`export_center.api.preview_render`).

    Raises:
        ValidationFailed, Forbidden, Conflict: as a create.
        ProviderNotAnswering, ProviderAnswerInvalid: the provider failed (503 / 502).
    """
    etype = _checked_type(runtime, user, body.exportType)
    file_format = _checked_format(body.format)
    if body.taskName is not None and _CONTROL.search(body.taskName):
        raise ValidationFailed(
            "taskName must not contain control characters (U+0000-U+001F, U+007F-U+009F)",
            code="INVALID_VALUE",
            field="taskName",
        )
    parameters = validate_parameters(etype, body.parameters)
    time_zone = validate_time_zone(body.timeZone, runtime.settings.task.time_zone)
    spec = parse_file_spec(
        file_format.name,
        body.columns,
        None if body.options is None else body.options.model_dump(exclude_none=True),
        declared=declared_columns(runtime, etype),
        default_language=language_of_locale(accept_language),
        row_cap=etype.max_rows,
        byte_cap=runtime.settings.file_size_cap_bytes,
    )
    chosen = [c.key for c in spec.columns] or None
    with _provider_call(etype):
        batches, estimate = _first_batches(
            runtime, user, etype, parameters, time_zone, trace_id, chosen
        )
        declared = batches[0].columns
        if declared is None:
            raise ProviderContractError("the first batch declares no columns")
        try:
            indexes, columns = spec.project(declared)
        except KeyError as exc:
            raise ProviderContractError(
                f"the answer has no column {exc.args[0]!r}, which the export writes"
            ) from None
        converter = BatchConverter(declared)
        typed: list[list[Any]] = [[] for _ in indexes]
        offset = 0
        for batch in batches:
            values = convert(batch, converter, offset=offset, batch_no=1)
            offset += len(batch.rows)
            for out, index in zip(typed, indexes, strict=True):
                out.extend(values[index])
    rows = [column[:PREVIEW_ROWS] for column in typed]
    return Preview(etype, file_format, spec, time_zone, columns, rows, estimate)


def _first_batches(
    runtime: Runtime,
    user: Identity,
    etype: ExportType,
    parameters: dict[str, Any],
    time_zone: str,
    trace_id: str | None,
    chosen: list[str] | None,
) -> tuple[list[Batch], int | None]:
    """The first batches of the export's first stream and the row estimate.

    Raises:
        ExportFailure: the provider failed (the caller maps it).
    """
    client = runtime.provider_client
    ids: dict[str, Any] = {"tenant": user.tenant, "app": user.app_code, "user": user.user}
    if etype.shards is None:
        request = _request(
            runtime,
            etype,
            **ids,
            parameters=parameters,
            time_zone=time_zone,
            trace_id=trace_id,
        )
        batch = client.fetch(
            request,
            cursor=None,
            snapshot_token=None,
            time_limit=PROVIDER_TIME_LIMIT_SECONDS,
            columns=chosen,
        )
        estimate = batch.total_rows
        if estimate is None and not batch.has_more:
            estimate = len(batch.rows)
        return [batch], estimate
    whole = _request(
        runtime, etype, **ids, parameters=parameters, time_zone=time_zone, trace_id=trace_id
    )
    estimate = client.schema(
        whole, columns=chosen, time_limit=PROVIDER_TIME_LIMIT_SECONDS
    ).total_rows
    shards = plan_shards(etype, parameters, time_zone)
    batches: list[Batch] = []
    found = 0
    for shard in shards[:MAX_SHARD_REQUESTS]:
        request = _request(
            runtime,
            etype,
            **ids,
            parameters=shard.parameters(parameters, etype.date_range),
            time_zone=time_zone,
            trace_id=whole.trace_id,
            shard=shard.describe(len(shards)),
        )
        batch = client.fetch(
            request,
            cursor=None,
            snapshot_token=None,
            limit=PREVIEW_ROWS - found,
            time_limit=PROVIDER_TIME_LIMIT_SECONDS,
            columns=chosen,
        )
        batches.append(batch)
        found += len(batch.rows)
        if found >= PREVIEW_ROWS:
            break
    return batches, estimate
