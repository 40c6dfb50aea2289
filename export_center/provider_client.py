"""Client side of the provider contract (DESIGN.md "Provider contract", seed 002 §10).

``POST {base}/internal/exports/v1/{TYPE}/batches`` with ``X-Internal-Service-Token``
and ``{taskId, tenantId, appCode, requestedBy, dispatchVersion, parameters, cursor,
snapshotToken, limit}``. Every answer is checked while it is read: body at most 4 MB
(counted while streaming), at most ``limit`` rows, at most 100 columns, a stable
``schemaHash``. 4xx is permanent (410: snapshot expired), 5xx, timeouts and
connection errors are transient and retried ``attempts`` times inside one batch
before the attempt fails.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from export_center import metrics
from export_center.columns import Column, ColumnType
from export_center.errors import (
    PermanentExportError,
    ProviderRejected,
    ProviderUnavailable,
)

__all__ = ["Batch", "ProviderClient", "ProviderRequest", "MAX_BODY_BYTES", "MAX_COLUMNS"]

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_COLUMNS = 100
MAX_TOKEN_CHARS = 512


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """The identity part of every batch request of one attempt."""

    export_type: str
    url: str
    task_id: str
    tenant_id: str
    app_code: str
    requested_by: str
    dispatch_version: int
    parameters: Mapping[str, Any]
    limit: int
    trace_id: str


@dataclass(frozen=True, slots=True)
class Batch:
    """One checked provider answer.

    Attributes:
        columns: the declared columns (first batch; None when omitted later).
        rows: raw row mappings (values still JSON: decimals as strings).
        next_cursor: cursor for the next request (None at the end).
        has_more: whether another batch follows.
        total_rows: the provider's estimate, or None.
        snapshot_token: token to send back with every later batch.
        schema_hash: hash of the column schema.
    """

    columns: list[Column] | None
    rows: list[dict[str, Any]]
    next_cursor: str | None
    has_more: bool
    total_rows: int | None
    snapshot_token: str | None
    schema_hash: str | None


def _contract(message: str) -> PermanentExportError:
    return PermanentExportError(f"provider broke the contract: {message}", code="PROVIDER_CONTRACT")


def _parse_columns(raw: Any) -> list[Column]:
    if not isinstance(raw, list) or not raw:
        raise _contract("columns must be a non-empty list")
    if len(raw) > MAX_COLUMNS:
        raise _contract(f"{len(raw)} columns, at most {MAX_COLUMNS} allowed")
    columns = []
    seen = set()
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise _contract("each column needs a string key")
        try:
            ctype = ColumnType(str(item.get("type", "STRING")).upper())
        except ValueError:
            raise _contract(
                f"column {item['key']!r} has unknown type {item.get('type')!r}"
            ) from None
        if item["key"] in seen:
            raise _contract(f"column {item['key']!r} declared twice")
        seen.add(item["key"])
        width = item.get("width")
        columns.append(
            Column(
                key=item["key"],
                title=str(item.get("title") or item["key"]),
                type=ctype,
                width=int(width) if isinstance(width, int) and width > 0 else None,
            )
        )
    return columns


class ProviderClient:
    """Calls providers over HTTP with httpx.

    Args:
        token: the ``X-Internal-Service-Token`` value.
        connect_timeout: seconds to connect.
        read_timeout: seconds to wait for data (seed 002 §14: 15 s).
        attempts: tries per batch for transient errors.
        retry_pause: seconds between tries (doubled each time).
        transport: optional httpx transport (tests).
    """

    def __init__(
        self,
        *,
        token: str,
        connect_timeout: float = 3.0,
        read_timeout: float = 15.0,
        attempts: int = 3,
        retry_pause: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.token = token
        self.attempts = max(1, attempts)
        self.retry_pause = retry_pause
        self._client = httpx.Client(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            transport=transport,
            headers={"content-type": "application/json"},
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def fetch(
        self,
        request: ProviderRequest,
        *,
        cursor: str | None,
        snapshot_token: str | None,
        abort_check: Any = None,
    ) -> Batch:
        """Fetch one batch, retrying transient failures.

        Raises:
            ProviderRejected: a 4xx answer (permanent).
            ProviderUnavailable: 5xx, timeout or connection error on every try.
            PermanentExportError: the answer broke the contract.
        """
        body = orjson.dumps(
            {
                "taskId": request.task_id,
                "tenantId": request.tenant_id,
                "appCode": request.app_code,
                "requestedBy": request.requested_by,
                "dispatchVersion": request.dispatch_version,
                "parameters": request.parameters,
                "cursor": cursor,
                "snapshotToken": snapshot_token,
                "limit": request.limit,
            }
        )
        headers = {
            "X-Internal-Service-Token": self.token,
            "traceparent": f"00-{request.trace_id}-{'0' * 15}1-01",
        }
        last = "no answer"
        pause = self.retry_pause
        for attempt in range(1, self.attempts + 1):
            started = time.perf_counter()
            try:
                status, raw = self._post(request.url, body, headers)
            except httpx.TimeoutException:
                last = "timed out"
                metrics.PROVIDER_FAILURES.labels(request.export_type, "timeout").inc()
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
                metrics.PROVIDER_FAILURES.labels(request.export_type, "connection").inc()
            else:
                metrics.PROVIDER_SECONDS.labels(request.export_type).observe(
                    time.perf_counter() - started
                )
                if status < 400:
                    return self._parse(raw, request.limit)
                if status < 500:
                    metrics.PROVIDER_FAILURES.labels(request.export_type, "4xx").inc()
                    detail = _error_detail(raw)
                    if status == 410:
                        raise ProviderRejected(
                            f"provider answered 410: snapshot expired{detail}",
                            code="SNAPSHOT_EXPIRED",
                        )
                    raise ProviderRejected(f"provider answered {status}{detail}")
                last = f"answered {status}"
                metrics.PROVIDER_FAILURES.labels(request.export_type, "5xx").inc()
            if attempt < self.attempts:
                if abort_check is not None:
                    abort_check()
                time.sleep(pause)
                pause *= 2
        raise ProviderUnavailable(f"provider {last} on {self.attempts} attempts")

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        with self._client.stream("POST", url, content=body, headers=headers) as response:
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise _contract(f"answer of {int(declared):,} bytes, at most 4 MB allowed")
            chunks = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _contract("answer larger than 4 MB")
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)

    def _parse(self, raw: bytes, limit: int) -> Batch:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            data = _lenient_loads(raw, exc)
        if isinstance(data, Mapping) and "data" in data and "rows" not in data:
            data = data["data"]  # tolerate the {code, message, data} envelope of seed 002
        if not isinstance(data, Mapping):
            raise _contract("answer must be a JSON object")
        rows = data.get("rows")
        if not isinstance(rows, list):
            raise _contract("rows must be a list")
        if len(rows) > limit:
            raise _contract(f"{len(rows)} rows in a batch of limit {limit}")
        columns = _parse_columns(data["columns"]) if data.get("columns") is not None else None
        token = data.get("snapshotToken")
        if token is not None and (not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS):
            raise _contract("snapshotToken must be a string of at most 512 characters")
        cursor = data.get("nextCursor")
        if cursor is not None and not isinstance(cursor, str):
            cursor = str(cursor)
        total = data.get("totalRows")
        return Batch(
            columns=columns,
            rows=rows,
            next_cursor=cursor,
            has_more=bool(data.get("hasMore")),
            total_rows=int(total)
            if isinstance(total, int) and not isinstance(total, bool)
            else None,
            snapshot_token=token,
            schema_hash=data.get("schemaHash"),
        )


class NonFiniteNumber(str):
    """A bare ``NaN``/``Infinity`` literal from a provider; the converters reject it with
    the row and column named (CASES E15)."""


def _lenient_loads(raw: bytes, error: Exception) -> Any:
    """Decode what orjson refused because of bare NaN/Infinity or huge exponents.

    Numbers are decoded as Decimal (never float) and the non-finite literals as
    :class:`NonFiniteNumber`, so the value checks can name the row and column.
    """
    import json
    from decimal import Decimal

    try:
        return json.loads(raw, parse_float=Decimal, parse_constant=NonFiniteNumber)
    except ValueError:
        raise _contract(f"answer is not JSON ({error})") from None


def _error_detail(raw: bytes) -> str:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ""
    if isinstance(data, Mapping):
        code = data.get("code")
        message = data.get("message")
        parts = [str(p) for p in (code, message) if p]
        if parts:
            return " (" + ": ".join(parts)[:300] + ")"
    return ""
