"""The preview of an export before anything runs.

* :func:`preview_export`: what an export of a create body would give, checked exactly
  like a create, without a task, a limit or a file: the row estimate, the columns, the
  first rows as they would be written (:mod:`export_center.api.preview_render`), the
  estimated bytes, the files and sheets, and warnings.

Provider failures answer 503 ``PROVIDER_UNAVAILABLE`` (no answer in time, 5xx, too
large) or 502 ``PROVIDER_CONTRACT`` / ``PROVIDER_REJECTED`` (a bad answer, a refusal),
never a 500.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from export_center.api.file_spec import (
    checked_format,
    checked_task_name,
    checked_type,
    file_spec_of,
)
from export_center.api.params import validate_parameters, validate_time_zone
from export_center.api.schemas import ExportCreate
from export_center.api.type_columns import (
    PREVIEW_ROWS,
    PROVIDER_TIME_LIMIT_SECONDS,
    provider_call,
    provider_request,
)
from export_center.attempt.batches import BatchConverter
from export_center.attempt.shards import plan_shards
from export_center.attempt.steps import convert
from export_center.auth import Identity
from export_center.columns import Column
from export_center.errors import (
    ProviderContractError,
)
from export_center.filespec import FileSpec
from export_center.provider_client import Batch
from export_center.registry import ExportType
from export_center.runtime import Runtime
from export_center.values import DecimalColumn, DecimalText
from export_center.writers.formats import FileFormat

__all__ = ["MAX_SHARD_REQUESTS", "Preview", "preview_export"]

MAX_SHARD_REQUESTS = 8
"""A sharded type's preview reads at most this many shards to find its first rows."""


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
    etype = checked_type(runtime, user, body.exportType)
    file_format = checked_format(body.format)
    checked_task_name(body.taskName)
    parameters = validate_parameters(etype, body.parameters)
    time_zone = validate_time_zone(body.timeZone, runtime.settings.task.time_zone)
    spec = file_spec_of(runtime, etype, body, file_format, accept_language)
    chosen = [c.key for c in spec.columns] or None
    with provider_call(etype):
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
                # A DecimalColumn's values are its texts: make each the DecimalText
                # it stands for, so every writer (Parquet's too) takes the slice.
                column = values[index]
                out.extend(
                    map(DecimalText, column) if isinstance(column, DecimalColumn) else column
                )
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
        request = provider_request(
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
    whole = provider_request(
        runtime, etype, **ids, parameters=parameters, time_zone=time_zone, trace_id=trace_id
    )
    estimate = client.schema(
        whole, columns=chosen, time_limit=PROVIDER_TIME_LIMIT_SECONDS
    ).total_rows
    shards = plan_shards(etype, parameters, time_zone)
    batches: list[Batch] = []
    found = 0
    for shard in shards[:MAX_SHARD_REQUESTS]:
        request = provider_request(
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
