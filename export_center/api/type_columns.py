"""A type's columns, known before an export runs.

* :func:`visible_type`: the type when the caller may use it (the list's rule).
* :func:`declared_columns`: a type's columns, from the registry or from the provider's
  schema answer (a batch request with ``limit: 0``), kept :data:`SCHEMA_CACHE_SECONDS`
  per type and provider address. The create path calls it to check ``columns`` before a
  task exists; the preview asks the provider through :func:`provider_request` and
  :func:`provider_call`.

Provider failures answer 503 ``PROVIDER_UNAVAILABLE`` (no answer in time, 5xx, too
large) or 502 ``PROVIDER_CONTRACT`` / ``PROVIDER_REJECTED`` (a bad answer, a refusal),
never a 500.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from export_center.auth import Identity
from export_center.columns import Column
from export_center.errors import (
    ExportFailure,
    FetchAborted,
    NotFound,
    ProviderContractError,
    ProviderRejected,
    RequestError,
)
from export_center.ids import new_trace_id
from export_center.provider_client import ProviderRequest
from export_center.registry import ExportType, RegistryError
from export_center.runtime import Runtime

__all__ = [
    "PREVIEW_ROWS",
    "PROVIDER_TIME_LIMIT_SECONDS",
    "SCHEMA_CACHE_SECONDS",
    "ProviderAnswerInvalid",
    "ProviderNotAnswering",
    "declared_columns",
    "forget_schemas",
    "provider_call",
    "provider_request",
    "visible_type",
]

SCHEMA_CACHE_SECONDS = 60.0
"""How long a provider's schema answer is kept per type and address (seconds)."""
PROVIDER_TIME_LIMIT_SECONDS = 15.0
"""Longest a preview or a column lookup waits for the provider, tries included (s)."""
PREVIEW_ROWS = 20
"""Rows a preview asks for and shows (the ``limit`` of :func:`provider_request`)."""


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
def provider_call(etype: ExportType) -> Iterator[None]:
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


def provider_request(
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
    """A provider request with a ``preview-<uuid>`` task id (no task exists), asking
    :data:`PREVIEW_ROWS` rows (a schema request asks ``limit: 0`` itself)."""
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
    with provider_call(etype):
        url = etype.base_url(runtime.self_url) + etype.provider_path
        key = (etype.code, url)
        now = time.monotonic()
        with _schemas_lock:
            kept = _schemas.get(key)
        if kept is not None and kept[0] > now:
            return list(kept[1])
        request = provider_request(
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
