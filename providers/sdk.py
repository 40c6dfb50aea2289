"""Provider SDK: serve one export type's batches with one function.

A business service declares its columns once and writes one ``fetch`` function; the
SDK mounts ``POST /internal/exports/v1/{TYPE}/batches`` (DESIGN.md "Provider
contract") and does the rest:

* checks ``X-Internal-Service-Token`` with a constant-time compare before it reads a
  byte of the body (401 otherwise, the body unread);
* reads at most :data:`MAX_BATCH_REQUEST_BYTES` of body, counted while reading
  (chunked bodies too; 413 ``REQUEST_TOO_LARGE`` beyond);
* validates the request body (422 with a code and the field);
* computes ``schemaHash`` from the declared columns;
* answers a schema request (``limit: 0``) itself: every declared column, the row
  estimate of the optional ``estimate`` hook as ``totalRows``, no rows, no cursor, no
  snapshot token (``fetch`` is not called);
* passes the keys the export writes as ``req.columns`` (None: all); ``fetch`` may leave
  the other keys out of its rows, the export center projects in any case;
* signs cursors and snapshot tokens (HMAC-SHA256), so a caller cannot forge them, and
  answers 410 when a snapshot token has expired;
* serializes DECIMAL as a JSON string in positional notation, DATE and DATETIME as
  ISO 8601 strings, so no value passes through a float;
* sends rows as JSON arrays in the order of the declared columns
  (``rowFormat: "array"``): ``fetch`` may return row mappings keyed by column key,
  sequences in column order, or rows it serialized itself as ``orjson.Fragment``
  arrays. A page of mappings that do not all carry exactly the declared keys is sent
  as objects, so the export center's checks of missing and undeclared keys still
  apply. ``row_format="object"`` sends mappings as JSON objects always;
* answers every error as ``{"code", "message", "field"}``: 4xx for the caller's fault,
  5xx for its own. Two errors make the export center do more than fail or retry later:
  ``raise ProviderFault.db_timeout()`` (503 ``DB_TIMEOUT``: the same page is asked again
  after 1 s, 4 s, 16 s and 30 s) and ``raise ProviderFault.page_too_large(req.limit)``
  (413 ``PAGE_TOO_LARGE``: the same cursor is asked again with half the rows, down to
  200). A DB-API ``OperationalError`` or ``InterfaceError`` that ``fetch`` lets through
  (the database restarting, unreachable, a connection lost; SQLAlchemy's wrappers of
  them too) is answered as ``DB_TIMEOUT`` as well, and logged once per outage instead
  of once per request: a database blip is ridden out, not reported as a failure.

Example::

    orders = ExportProvider("ORDERS", columns=[Column("id", "Order", "INTEGER"), ...],
                            token=TOKEN, secret=SECRET)

    @orders.fetcher
    def fetch(req: BatchRequest, cursor: Any | None, snapshot: Any | None) -> Page:
        ...

    app.include_router(orders.router())
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import operator
import time as _time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect

from providers.schema import MAX_PRECISION, MAX_TITLE_CHARS, TYPES, Column, schema_hash
from providers.served import count_served

__all__ = [
    "DB_TIMEOUT",
    "MAX_BATCH_REQUEST_BYTES",
    "MAX_PRECISION",
    "MAX_TITLE_CHARS",
    "PAGE_TOO_LARGE",
    "BatchRequest",
    "day_range_utc",
    "Column",
    "ExportProvider",
    "Page",
    "ProviderFault",
    "TYPES",
    "schema_hash",
]

log = logging.getLogger(__name__)
DB_TIMEOUT = "DB_TIMEOUT"
"""Error code of a 503 (or 504): the database timed out on this page; ask again soon."""
PAGE_TOO_LARGE = "PAGE_TOO_LARGE"
"""Error code of a 413: the page asked for is too large; ask with fewer rows."""
MAX_BATCH_REQUEST_BYTES = 64 * 1024
"""Largest batch request body read, in bytes. A batch request is bounded by the
contract: parameters at most 4 KB of JSON, a cursor of at most 1,024 characters, a
snapshot token of at most 512, ids of at most 128; a request near 7 KB is the largest
the export center sends, and 64 KB leaves room for JSON escapes (``\\u`` sequences)."""


def day_range_utc(first: str, last: str, tz: str = "UTC") -> tuple[datetime, datetime]:
    """Half-open UTC bounds ``[start, end)`` of the days ``first``..``last`` (both inclusive)
    in time zone ``tz`` (CASES E21: an inclusive ``to`` date ends at the next midnight).

    Args:
        first: ``YYYY-MM-DD``, the first day included.
        last: ``YYYY-MM-DD``, the last day included.
        tz: IANA time zone of the days (``Asia/Shanghai``).

    Returns:
        ``(start, end)`` as tz-aware UTC datetimes; query ``ts >= start AND ts < end``.

    Raises:
        ProviderFault: 400 for a malformed date or zone, or ``first`` after ``last``.
    """
    try:
        zone = ZoneInfo(tz)
        start_day, end_day = date.fromisoformat(first), date.fromisoformat(last)
    except (ValueError, ZoneInfoNotFoundError):
        raise ProviderFault(
            400, "INVALID_PARAMETER", "dates must be YYYY-MM-DD and tz an IANA zone"
        ) from None
    if start_day > end_day:
        raise ProviderFault(
            400, "INVALID_DATE_RANGE", f"{first} is after {last}", "parameters.from"
        )
    start = datetime.combine(start_day, time.min, zone).astimezone(UTC)
    end = datetime.combine(end_day + timedelta(days=1), time.min, zone).astimezone(UTC)
    return start, end


class ShardWindow(BaseModel):
    """The shard a batch belongs to (types with ``shards`` in the registry).

    The request's date parameters are already narrowed to the shard's days, so a
    provider that filters on them needs nothing else; one that filters on timestamps
    uses ``start <= ts < end`` (half-open, in the export's time zone: a 23- or 25-hour
    day is whole, without gap or overlap).
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str = Field(max_length=64, description="2024-03-10, or 2024-03-10..2024-03-12")
    index: int = Field(ge=0, description="0-based position of the shard in the file")
    count: int = Field(ge=1, description="Shards of the export")
    start: datetime = Field(alias="from", description="First instant of the window")
    end: datetime = Field(alias="to", description="First instant after the window")


class BatchRequest(BaseModel):
    """The validated request body of one batch."""

    model_config = ConfigDict(extra="ignore")

    taskId: str = Field(min_length=1, max_length=64)
    tenantId: str = Field(min_length=1, max_length=64)
    appCode: str = Field(min_length=1, max_length=32)
    requestedBy: str = Field(min_length=1, max_length=128)
    dispatchVersion: int = Field(ge=1)
    parameters: dict[str, Any] = Field(default_factory=dict)
    cursor: str | None = Field(default=None, max_length=1024)
    snapshotToken: str | None = Field(default=None, max_length=512)
    limit: int = Field(
        ge=0,
        le=5000,
        description="Rows asked for; 0 is a schema request: the answer has the columns "
        "and the row estimate, no rows",
    )
    timeZone: str = Field(
        default="UTC",
        max_length=64,
        description="IANA zone of the export: day and month boundaries of date filters "
        "fall at midnight in this zone (see day_range_utc)",
    )
    shard: ShardWindow | None = Field(
        default=None, description="The shard of a sharded export (None: not sharded)"
    )
    columns: list[str] | None = Field(
        default=None,
        max_length=100,
        description="The keys the export writes (None: all). A provider may leave the "
        "other keys out of its rows; the export center projects in any case",
    )

    @property
    def is_schema_request(self) -> bool:
        """True for ``limit: 0``: answer the columns and the row estimate, no rows."""
        return self.limit == 0


@dataclass(slots=True)
class Page:
    """What ``fetch`` returns for one batch.

    Attributes:
        rows: row mappings keyed by column key, or sequences of one value per column in
            column order (Python values: Decimal, date, ...), or ``orjson.Fragment`` rows
            already serialized in the provider's row format.
        next_cursor: a JSON-able value naming where the next batch starts.
        has_more: whether another batch follows.
        snapshot: a JSON-able value fixed at the first batch (e.g. the max key).
        total_rows: an estimate of all rows, for progress (first batch is enough).
    """

    rows: Sequence[Any]
    next_cursor: Any = None
    has_more: bool = False
    snapshot: Any = None
    total_rows: int | None = None


class ProviderFault(Exception):
    """Raise from ``fetch`` to answer an error: ``status`` 4xx or 5xx, a code, a sentence.

    :meth:`db_timeout` and :meth:`page_too_large` build the two errors the export center
    answers with more than a failure or a later retry (docs/provider-guide.md).
    """

    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field

    @classmethod
    def db_timeout(cls, message: str = "the database query timed out") -> ProviderFault:
        """503 ``DB_TIMEOUT``: the database timed out on this page (a statement timeout,
        a lock wait, a restart). The export center asks for the same page again after
        1 s, 4 s, 16 s and 30 s (its setting), then ends the attempt, which is retried
        later with backoff.

        Example::

            except OperationalError as exc:  # e.g. MySQL 3024, max_execution_time
                raise ProviderFault.db_timeout() from exc
        """
        return cls(503, DB_TIMEOUT, message)

    @classmethod
    def page_too_large(cls, limit: int, message: str | None = None) -> ProviderFault:
        """413 ``PAGE_TOO_LARGE``: a page of ``limit`` rows is too large to answer. The
        export center asks for the same cursor again with half the rows, down to 200; a
        413 at 200 rows fails the export."""
        return cls(413, PAGE_TOO_LARGE, message or f"a page of {limit} rows is too large")


def _database_unavailable(exc: BaseException) -> bool:
    """True for a DB-API ``OperationalError`` or ``InterfaceError`` (PEP 249: errors of
    the database's operation outside the program's control, such as a lost connection
    or a server restart), raised by the driver itself or wrapped by SQLAlchemy."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if not names & {"OperationalError", "InterfaceError"}:
        return False
    # SQLite reports a wrong statement as an OperationalError too: that is a bug.
    text = str(exc).lower()
    return not any(bug in text for bug in ("no such table", "no such column", "syntax error"))


def _one_cell(key: str) -> Callable[[Mapping[str, Any]], tuple[Any]]:
    """A row getter for a single-column type: ``row -> (row[key],)``."""

    def cells(row: Mapping[str, Any]) -> tuple[Any]:
        return (row[key],)

    return cells


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise TypeError("NaN and Infinity are not valid DECIMAL values")
        return format(value, "f")
    raise TypeError(f"cannot serialize {type(value).__name__}")


def _error(status: int, code: str, message: str, field: str | None = None) -> Response:
    return Response(
        orjson.dumps({"code": code, "message": message, "field": field}),
        status_code=status,
        media_type="application/json",
    )


@dataclass(slots=True)
class ExportProvider:
    """One export type served by a business service.

    Args:
        export_type: the type code (``ORDERS``); names the path.
        columns: the declared columns.
        token: the shared ``X-Internal-Service-Token``.
        secret: key that signs cursors and snapshot tokens.
        snapshot_ttl_seconds: how long a snapshot token is accepted (then 410).
        estimate: optional ``estimate(req) -> rows | None``, the row count a schema
            request (``limit: 0``) answers as ``totalRows`` (:meth:`estimator`).
        row_format: ``"array"`` (default): rows travel as JSON arrays in column order;
            ``"object"``: as JSON objects keyed by column key (mapping rows only).
    """

    export_type: str
    columns: Sequence[Column]
    token: str
    secret: str
    snapshot_ttl_seconds: int = 24 * 3600
    schema_version: int = 1
    fetch: Callable[[BatchRequest, Any, Any], Page] | None = None
    row_format: str = "array"
    estimate: Callable[[BatchRequest], int | None] | None = None
    _hash: str = field(init=False, default="")
    _cells: Callable[[Any], Any] = field(init=False, repr=False, default=tuple)
    _cells_keys: list[str] = field(init=False, repr=False, default_factory=list)
    _down_since: float | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        for column in self.columns:
            if column.type not in TYPES:
                raise ValueError(f"column {column.key}: type must be one of {TYPES}")
        if self.row_format not in ("array", "object"):
            raise ValueError('row_format must be "array" or "object"')
        if not self.columns:
            raise ValueError("an export type needs at least one column")
        self._hash = schema_hash(self.columns)
        keys = [c.key for c in self.columns]
        self._cells_keys = keys
        # One C-level call per row; a 1-column itemgetter returns the value, not a tuple.
        self._cells = operator.itemgetter(*keys) if len(keys) > 1 else _one_cell(keys[0])

    def _rows_body(self, rows: Sequence[Any]) -> tuple[str, Sequence[Any]]:
        """``(rowFormat, rows)`` of an answer.

        The rule: mappings that carry exactly the declared keys travel as arrays in
        column order (one C-level ``itemgetter`` per row). Mappings that do not (a key
        missing from some rows, an undeclared key, a renamed one) travel as the objects
        they are, so the export center checks them as it checks every object answer:
        a declared key in no row fails the export naming the keys the rows carry, a key
        missing from some rows is an empty cell, undeclared keys are named in the
        export's warning. Sequences and pre-serialized fragments travel as arrays.
        """
        if self.row_format == "object" or not rows or not isinstance(rows[0], Mapping):
            return self.row_format, rows
        width = {len(self._cells_keys)}
        try:
            if set(map(len, rows)) == width:
                return "array", list(map(self._cells, rows))
        except (KeyError, TypeError):  # a row without some column, or not a mapping
            pass
        if all(isinstance(row, Mapping) for row in rows):
            return "object", rows
        return "array", [
            tuple(map(r.get, self._cells_keys)) if isinstance(r, Mapping) else r for r in rows
        ]

    @property
    def path(self) -> str:
        """``/internal/exports/v1/{TYPE}/batches``."""
        return f"/internal/exports/v1/{self.export_type}/batches"

    def fetcher(
        self, fn: Callable[[BatchRequest, Any, Any], Page]
    ) -> Callable[[BatchRequest, Any, Any], Page]:
        """Decorator registering the one function a business team writes."""
        self.fetch = fn
        return fn

    def estimator(
        self, fn: Callable[[BatchRequest], int | None]
    ) -> Callable[[BatchRequest], int | None]:
        """Decorator registering the row estimate of a schema request (``limit: 0``).

        ``fn(req)`` gets the request (parameters, tenant, time zone) and returns the
        rows an export of it would have (a ``COUNT``; an estimate is fine), or None
        when unknown. Without one a schema request answers ``totalRows: null``.
        """
        self.estimate = fn
        return fn

    def _schema_answer(self, req: BatchRequest) -> Response:
        """The answer to a schema request: every declared column, ``totalRows`` from
        :attr:`estimate`, no rows, no cursor, no snapshot token.

        Raises:
            ProviderFault: from the estimate (a bad parameter, the database).
        """
        if req.cursor is not None or req.snapshotToken is not None:
            raise ProviderFault(
                422,
                "INVALID_REQUEST",
                "a schema request (limit 0) carries no cursor and no snapshot token",
                "cursor" if req.cursor is not None else "snapshotToken",
            )
        total = self.estimate(req) if self.estimate is not None else None
        if total is not None and (isinstance(total, bool) or not isinstance(total, int)):
            raise TypeError(f"estimate must return an int or None, got {type(total).__name__}")
        body = {
            "schemaVersion": self.schema_version,
            "schemaHash": self._hash,
            "snapshotToken": None,
            "columns": [c.as_json() for c in self.columns],
            "rowFormat": self.row_format,
            "rows": [],
            "nextCursor": None,
            "hasMore": False,
            "totalRows": total,
        }
        return Response(orjson.dumps(body), media_type="application/json")

    # ---------------------------------------------------------------- signing

    def _sign(self, kind: str, value: Any, task_id: str, expires: int | None = None) -> str:
        # An integer cursor stays readable ("120400.<mac>") so failure messages can name
        # it; anything else travels as base64 JSON. The MAC binds kind, task and expiry.
        if isinstance(value, int) and not isinstance(value, bool) and expires is None:
            payload = str(value)
        else:
            raw = orjson.dumps({"v": value, "e": expires})
            payload = "~" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        return f"{payload}.{self._mac(kind, task_id, payload)}"

    def _mac(self, kind: str, task_id: str, payload: str) -> str:
        message = f"{self.export_type}\n{kind}\n{task_id}\n{payload}".encode()
        mac = hmac.new(self.secret.encode(), message, hashlib.sha256).digest()[:16]
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    def _verify(self, kind: str, token: str, task_id: str) -> tuple[Any, int | None]:
        payload, _, mac = token.rpartition(".")
        field = "cursor" if kind == "cursor" else "snapshotToken"
        if not payload or not hmac.compare_digest(
            mac.encode(), self._mac(kind, task_id, payload).encode()
        ):
            raise ProviderFault(
                400, f"INVALID_{kind.upper()}", f"{field} was not issued for this task", field
            )
        if not payload.startswith("~"):
            return int(payload), None
        raw = base64.urlsafe_b64decode(payload[1:] + "=" * (-len(payload[1:]) % 4))
        data = orjson.loads(raw)
        return data.get("v"), data.get("e")

    # ---------------------------------------------------------------- serving

    def authorized(self, token: str | None) -> bool:
        """True when ``token`` is the shared service token (constant-time compare)."""
        return bool(token) and hmac.compare_digest(str(token).encode(), self.token.encode())

    def handle(self, raw: bytes, token: str | None) -> Response:
        """Answer one batch request (the router calls this)."""
        if not self.authorized(token):
            return _unauthorized()
        try:
            req = BatchRequest.model_validate_json(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(p) for p in error.get("loc", ()))
            return _error(422, "INVALID_REQUEST", f"{loc}: {error.get('msg')}", loc or None)
        if self.fetch is None:
            return _error(501, "NOT_IMPLEMENTED", f"{self.export_type} has no fetch function")
        try:
            if req.is_schema_request:
                answer = self._schema_answer(req)
                self._outage(None)
                return answer
            cursor = snapshot = None
            if req.cursor is not None:
                cursor, _ = self._verify("cursor", req.cursor, req.taskId)
            if req.snapshotToken is not None:
                snapshot, expires = self._verify("snapshot", req.snapshotToken, req.taskId)
                if expires is not None and expires < _time.time():
                    raise ProviderFault(
                        410, "SNAPSHOT_EXPIRED", "the snapshot token has expired", "snapshotToken"
                    )
            page = self.fetch(req, cursor, snapshot)
        except ProviderFault as fault:
            return _error(fault.status, fault.code, fault.message, fault.field)
        except Exception as exc:
            if _database_unavailable(exc):
                self._outage(exc)
                return _error(503, DB_TIMEOUT, "the provider's database does not answer now")
            log.exception("provider %s failed", self.export_type)
            return _error(500, "PROVIDER_ERROR", "the provider failed; try again later")
        self._outage(None)
        first = req.cursor is None
        snapshot_value = page.snapshot if first else snapshot
        snapshot_token = req.snapshotToken
        if first and snapshot_value is not None:
            snapshot_token = self._sign(
                "snapshot",
                snapshot_value,
                req.taskId,
                int(_time.time()) + self.snapshot_ttl_seconds,
            )
        row_format, rows = self._rows_body(page.rows)
        count_served(self.export_type, len(page.rows))
        body: dict[str, Any] = {
            "schemaVersion": self.schema_version,
            "schemaHash": self._hash,
            "snapshotToken": snapshot_token,
            "rowFormat": row_format,
            "rows": rows,
            "nextCursor": (
                self._sign("cursor", page.next_cursor, req.taskId)
                if page.has_more and page.next_cursor is not None
                else None
            ),
            "hasMore": page.has_more,
            "totalRows": page.total_rows,
        }
        if first:
            body["columns"] = [c.as_json() for c in self.columns]
        try:
            # orjson writes date and datetime as ISO 8601 itself; Decimal goes to _default.
            payload = orjson.dumps(body, default=_default)
        except TypeError as exc:
            log.error("provider %s produced a value it cannot send: %s", self.export_type, exc)
            return _error(500, "PROVIDER_ERROR", f"the provider produced an invalid value: {exc}")
        return Response(payload, media_type="application/json")

    def _outage(self, exc: Exception | None) -> None:
        """Log a database outage once when it starts (``exc``) and once when a request
        works again (None)."""
        if exc is not None:
            if self._down_since is None:
                self._down_since = _time.monotonic()
                log.warning(
                    "provider %s: its database does not answer (%s); answering 503 %s "
                    "until it does",
                    self.export_type,
                    str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__,
                    DB_TIMEOUT,
                )
        elif self._down_since is not None:
            log.info(
                "provider %s: its database answers again after %.1f s",
                self.export_type,
                _time.monotonic() - self._down_since,
            )
            self._down_since = None

    def router(self) -> APIRouter:
        """A FastAPI router with the batch endpoint, to ``include_router``."""
        router = APIRouter(tags=["providers"], include_in_schema=False)

        @router.post(self.path)
        async def batches(request: Request) -> Response:
            token = request.headers.get("x-internal-service-token")
            # The token first: a caller without it gets 401 before one byte of its body
            # is read, so an anonymous client cannot make this process buffer anything.
            if not self.authorized(token):
                return _unauthorized()
            try:
                raw = await _read_capped(request, MAX_BATCH_REQUEST_BYTES)
            except _TooLarge:
                return _error(
                    413,
                    "REQUEST_TOO_LARGE",
                    f"a batch request may have at most {MAX_BATCH_REQUEST_BYTES // 1024} KB",
                )
            except ClientDisconnect:
                # The export center went away mid-request (a worker stopped or was killed):
                # a normal event. Nothing is read, nothing is answered.
                log.info("%s: the caller disconnected before sending its request", self.path)
                return Response(status_code=499)
            return await _run_sync(self.handle, raw, token)

        return router


class _TooLarge(Exception):
    """The body passed the cap while it was read."""


async def _read_capped(request: Request, cap: int) -> bytes:
    """The request body, read chunk by chunk, at most ``cap`` bytes.

    Raises:
        _TooLarge: ``Content-Length`` says more, or more arrived (chunked bodies too).
        ClientDisconnect: the caller went away.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise _TooLarge
    chunks: list[bytes] = []
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > cap:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _unauthorized() -> Response:
    return _error(401, "UNAUTHORIZED", "X-Internal-Service-Token is missing or wrong")


async def _run_sync(fn: Callable[..., Response], *args: Any) -> Response:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)
