"""Client side of the provider contract (DESIGN.md "Provider contract").

``POST {base}/internal/exports/v1/{TYPE}/batches`` with ``X-Internal-Service-Token``
and ``{taskId, tenantId, appCode, requestedBy, dispatchVersion, parameters, cursor,
snapshotToken, limit}``. Every answer is checked while it is read: body at most 4 MB
(counted while streaming), at most ``limit`` rows, at most 100 columns. ``limit`` is the
type's batch size unless the caller passes a smaller one (``fetch(limit=...)``, see
:class:`export_center.fetching.PageSizer`).

Answers, by class (:meth:`ProviderClient.fetch`):

==========================================  ============================================
answer                                      what happens
==========================================  ============================================
2xx                                         parsed and checked (:class:`Batch`)
2xx over 4 MB, or a MemoryError while       :class:`PageTooLarge` at once (transient,
decoding it; 413                            ``PAGE_TOO_LARGE``), the same size is not
                                            asked again: the caller halves ``limit``
3xx                                         permanent, ``PROVIDER_REDIRECTED``: "provider
                                            redirected (308) to <Location>"; never
                                            followed (it could leave the allow-listed host)
408, 429, 500, 502, 503, 504, other 5xx,    transient: the same request is tried again,
timeouts, connection errors                 ``attempts`` tries in all, pauses of
                                            ``retry_pause`` doubling, at least the
                                            ``Retry-After`` asked (seconds or HTTP-date);
                                            a ``Retry-After`` above ``max_retry_after``
                                            ends the tries at once; then
                                            :class:`ProviderUnavailable` (retried later
                                            as a new attempt)
503 or 504 with ``{"code": "DB_TIMEOUT"}``  the provider's database timed out: the same
                                            request is tried again after each pause of
                                            ``db_timeout_pauses`` (1 s, 4 s, 16 s; at
                                            least the ``Retry-After``), counted apart
                                            from the tries above; then
                                            :class:`ProviderUnavailable` naming
                                            ``DB_TIMEOUT``
410                                         permanent, ``SNAPSHOT_EXPIRED``
other 4xx, 501, 505, 1xx                    permanent, ``PROVIDER_REJECTED``
==========================================  ============================================

A batch has a total time limit (``time_limit``: first byte sent to last byte read,
retries and pauses included) and an abort event; both are checked between received
chunks and during pauses, so a provider that drips one byte every few seconds cannot
hold a batch past its limit, and the attempt that stops waiting (cancel, deadline,
shutdown) makes the fetch end at the next chunk. A read that is blocked waiting for a
byte ends at the read timeout at worst (each request's timeouts are also cut to the
time left); the caller does not wait for it (see ``pipeline.ExportRun._await``).

Exact numbers: orjson decodes a JSON number with a fraction or an exponent as a
``float``, and an integer outside [-2**63, 2**64) as a ``float`` too, which rounds. The
batch therefore keeps its raw body (:attr:`Batch.raw`) until it is converted; when the
converter finds a float in a value cell, :meth:`Batch.exact_rows` decodes the body again
with ``json.loads(parse_float=Decimal)`` (integers stay ``int``, exact at any size).

Row format: an answer with ``rowFormat: "array"`` carries each row as a JSON array in
the order of the declared columns (:attr:`Batch.arrays`): half the bytes of objects and
no key to read per value, as the Trino and BigQuery wire formats do. Objects stay the
default.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import orjson

from export_center import metrics
from export_center.columns import Column, ColumnType
from export_center.errors import (
    FetchAborted,
    PageTooLarge,
    ProviderContractError,
    ProviderRejected,
    ProviderTooSlow,
    ProviderUnavailable,
)
from export_center.ids import new_span_id, traceparent

__all__ = [
    "DB_TIMEOUT_CODE",
    "DB_TIMEOUT_STATUSES",
    "MAX_BODY_BYTES",
    "MAX_COLUMNS",
    "PERMANENT_5XX",
    "ROW_FORMATS",
    "TRANSIENT_STATUSES",
    "Batch",
    "NonFiniteNumber",
    "ProviderClient",
    "ProviderRequest",
]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_COLUMNS = 100
MAX_TOKEN_CHARS = 512
ROW_FORMATS = frozenset({"object", "array"})
"""Values of an answer's ``rowFormat``: rows as JSON objects keyed by column key (the
default), or as JSON arrays of one value per column in the order of ``columns``."""
MAX_ERROR_BODY_BYTES = 64 * 1024
"""Bytes of a non-2xx answer read for its ``{code, message}`` (the rest is not read)."""

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""Statuses retried within a batch; every other 5xx except :data:`PERMANENT_5XX` too."""
PERMANENT_5XX = frozenset({501, 505})
"""5xx answers that trying again cannot change (not implemented, HTTP version)."""
DB_TIMEOUT_CODE = "DB_TIMEOUT"
"""The error body ``code`` of a provider whose database timed out on this page."""
DB_TIMEOUT_STATUSES = frozenset({503, 504})
"""The statuses that carry :data:`DB_TIMEOUT_CODE` (any other status with it is an
ordinary answer of its class)."""


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
    time_zone: str = "UTC"
    shard: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """One checked provider answer.

    Attributes:
        columns: the declared columns (first batch; None when omitted later).
        rows: raw row mappings as decoded by orjson (decimals as strings; a JSON number
            with a fraction or exponent, or an integer beyond 64 bits, is a ``float``
            here, see :meth:`exact_rows`).
        next_cursor: cursor for the next request (None at the end).
        has_more: whether another batch follows.
        total_rows: the provider's estimate, or None.
        snapshot_token: token to send back with every later batch.
        schema_hash: hash of the column schema.
        raw: the answer's body (at most 4 MB) when ``rows`` came from orjson, so that
            :meth:`exact_rows` can decode it again; None when ``rows`` are exact already.
        arrays: the answer said ``rowFormat: "array"``: each row is a JSON array of one
            value per column, in the order of the declared columns (False: objects
            keyed by column key, the default when ``rowFormat`` is absent).
    """

    columns: list[Column] | None
    rows: list[Any]
    next_cursor: str | None
    has_more: bool
    total_rows: int | None
    snapshot_token: str | None
    schema_hash: str | None
    raw: bytes | None = None
    arrays: bool = False

    def exact_rows(self) -> list[Any]:
        """The rows decoded again so that every JSON number is exact.

        Numbers with a fraction or an exponent become ``decimal.Decimal`` with the
        digits the provider sent (``0E-8``, ``-0.10``), integers stay ``int`` at any
        size, and bare ``NaN``/``Infinity`` become :class:`NonFiniteNumber`. Costs a
        stdlib ``json.loads`` of the body (about ten times orjson), so the pipeline calls
        it only for a batch whose values hold a float.

        Returns:
            The rows, the same number as :attr:`rows`, in the same order.

        Raises:
            ProviderContractError: the body no longer gives the same rows (not expected:
                both decoders read the same bytes).
        """
        if self.raw is None:
            return self.rows
        rows = _rows_of(_unwrap(_exact_loads(self.raw, None)))
        if len(rows) != len(self.rows):  # pragma: no cover - same bytes, same array
            raise ProviderContractError("the exact decoding of the answer found other rows")
        return rows


class NonFiniteNumber(str):
    """A bare ``NaN``/``Infinity`` literal from a provider; the converters reject it with
    the row and column named (CASES E15)."""


def _parse_columns(raw: Any) -> list[Column]:
    if not isinstance(raw, list) or not raw:
        raise ProviderContractError("columns must be a non-empty list")
    if len(raw) > MAX_COLUMNS:
        raise ProviderContractError(f"{len(raw)} columns, at most {MAX_COLUMNS} allowed")
    columns = []
    seen = set()
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise ProviderContractError("each column needs a string key")
        try:
            ctype = ColumnType(str(item.get("type", "STRING")).upper())
        except ValueError:
            raise ProviderContractError(
                f"column {item['key']!r} has unknown type {item.get('type')!r}"
            ) from None
        if item["key"] in seen:
            raise ProviderContractError(f"column {item['key']!r} declared twice")
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


@dataclass(frozen=True, slots=True)
class _Answer:
    """One HTTP answer: status, the headers the client acts on, and the body read."""

    status: int
    body: bytes
    location: str | None
    retry_after: str | None


@dataclass(frozen=True, slots=True)
class _Limits:
    """When one batch must stop: the attempt's abort event and the batch deadline.

    Attributes:
        abort: set by the attempt when it stops waiting for this batch.
        deadline: ``time.monotonic()`` value at which the batch's time is up, or None.
        seconds: the batch's time limit in seconds (for the message), or None.
    """

    abort: threading.Event
    deadline: float | None
    seconds: float | None

    def check(self, last: str | None = None) -> None:
        """Raise when the batch must stop now.

        Args:
            last: what the last failed try got ("answered 503"), for the message.

        Raises:
            FetchAborted: the attempt stopped waiting.
            ProviderTooSlow: the batch's time limit is reached.
        """
        if self.abort.is_set():
            raise FetchAborted("the attempt stopped waiting for this batch")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise too_slow(self.seconds or 0.0, last)

    def left(self) -> float | None:
        """Seconds left before the deadline (never below 0.05), or None without one."""
        if self.deadline is None:
            return None
        return max(0.05, self.deadline - time.monotonic())

    def pause(self, seconds: float, last: str) -> None:
        """Wait ``seconds`` between two tries; the abort event and the deadline cut it.

        Raises:
            FetchAborted: the attempt stopped waiting during the pause.
            ProviderTooSlow: the deadline came first.
        """
        end = time.monotonic() + seconds
        if self.deadline is not None:
            end = min(end, self.deadline)
        self.abort.wait(max(0.0, end - time.monotonic()))
        self.check(last)


def too_slow(seconds: float, last: str | None = None) -> ProviderTooSlow:
    """The error of a batch that ran out of time.

    Args:
        seconds: the batch's time limit.
        last: what the last failed try got, if a try failed.

    Returns:
        ``ProviderTooSlow("provider answer took longer than 60 s")`` (transient).
    """
    detail = f" (last try: {last})" if last else ""
    return ProviderTooSlow(f"provider answer took longer than {seconds:g} s{detail}")


class ProviderClient:
    """Calls providers over HTTP with httpx.

    Args:
        token: the ``X-Internal-Service-Token`` value.
        connect_timeout: seconds to connect.
        read_timeout: seconds to wait for the next bytes (15 s).
        attempts: tries per batch for transient answers and errors.
        retry_pause: seconds before the second try (doubled for each later one).
        max_retry_after: the longest ``Retry-After`` (seconds) waited between two tries;
            an answer asking for more ends the batch's tries at once (transient).
        db_timeout_pauses: seconds waited before each new try of a page the provider
            answered 503/504 ``DB_TIMEOUT`` (one try per entry; then the batch fails,
            transient). These tries do not use up ``attempts``.
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
        max_retry_after: float = 30.0,
        db_timeout_pauses: Sequence[float] = (1.0, 4.0, 16.0),
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.token = token
        self.attempts = max(1, attempts)
        self.retry_pause = retry_pause
        self.max_retry_after = max_retry_after
        self.db_timeout_pauses = tuple(db_timeout_pauses)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._client = httpx.Client(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            transport=transport,
            headers={"content-type": "application/json"},
            follow_redirects=False,
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
        limit: int | None = None,
        time_limit: float | None = None,
        abort: threading.Event | None = None,
    ) -> Batch:
        """Fetch one batch, trying transient failures again (table in the module docstring).

        Args:
            request: the attempt's identity and the provider URL.
            cursor: the cursor of this batch (None for the first).
            snapshot_token: the token of the first answer (None for the first batch).
            limit: the rows asked for; None: ``request.limit`` (the type's batch size).
            time_limit: seconds the whole batch may take, tries and pauses included;
                None: no limit beyond the timeouts of each request.
            abort: set by the caller when it stops waiting; checked between received
                chunks and during pauses.

        Returns:
            The checked batch.

        Raises:
            ProviderRejected: a permanent answer: 3xx (``PROVIDER_REDIRECTED``), 410
                (``SNAPSHOT_EXPIRED``), another 4xx than 408/429, 501 or 505.
            PageTooLarge: a 413, a 2xx body over 4 MB, or a MemoryError decoding it
                (transient; ask again with a smaller ``limit``).
            ProviderUnavailable: a transient failure on every try (``DB_TIMEOUT`` after
                each of ``db_timeout_pauses``), or a ``Retry-After`` longer than
                ``max_retry_after``.
            ProviderTooSlow: the batch took longer than ``time_limit`` (transient).
            ProviderContractError: the answer broke the contract.
            FetchAborted: ``abort`` was set.
        """
        size = request.limit if limit is None else limit
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
                "limit": size,
                "timeZone": request.time_zone,
                **({"shard": request.shard} if request.shard is not None else {}),
            }
        )
        headers = {"X-Internal-Service-Token": self.token}
        limits = _Limits(
            abort=abort or threading.Event(),
            deadline=None if time_limit is None else time.monotonic() + time_limit,
            seconds=time_limit,
        )
        kind = request.export_type
        last = "no answer"
        pause = self.retry_pause
        calls = failures = db_timeouts = 0
        while True:
            limits.check(last if calls else None)
            calls += 1
            started = time.perf_counter()
            asked = 0.0
            db_timeout = False
            # Every HTTP call is a new span of the task's trace (W3C Trace Context).
            span = new_span_id()
            headers["traceparent"] = traceparent(request.trace_id, span)
            try:
                answer = self._post(request.url, body, headers, limits=limits, limit=size)
            except httpx.TimeoutException:
                last = "timed out"
                metrics.PROVIDER_FAILURES.labels(kind, "timeout").inc()
            except httpx.DecodingError as exc:
                raise ProviderContractError(f"the answer cannot be decoded ({exc})") from None
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
                metrics.PROVIDER_FAILURES.labels(kind, "connection").inc()
            else:
                metrics.PROVIDER_SECONDS.labels(kind).observe(time.perf_counter() - started)
                if 200 <= answer.status < 300:
                    return self._decode(answer.body, size)
                _raise_if_too_large(answer, kind, size)
                _raise_if_permanent(answer, kind)
                db_timeout = _is_db_timeout(answer)
                last = f"answered {answer.status}" + (f" {DB_TIMEOUT_CODE}" if db_timeout else "")
                reason = "db_timeout" if db_timeout else str(answer.status)[0] + "xx"
                metrics.PROVIDER_FAILURES.labels(kind, reason).inc()
                asked = self._retry_after(answer)
            log.warning(
                "provider call %d failed: %s",
                calls,
                last,
                extra={"exportType": kind, "spanId": span, "attempt": calls},
            )
            if db_timeout:  # its own schedule, apart from the other transient failures
                db_timeouts += 1
                if db_timeouts > len(self.db_timeout_pauses):
                    raise ProviderUnavailable(
                        f"provider {last} on {calls} attempts ({_retries(self.db_timeout_pauses)})"
                    )
                limits.pause(max(self.db_timeout_pauses[db_timeouts - 1], asked), last)
                continue
            failures += 1
            if failures >= self.attempts:
                raise ProviderUnavailable(f"provider {last} on {calls} attempts")
            limits.pause(max(pause, asked), last)
            pause *= 2

    def _retry_after(self, answer: _Answer) -> float:
        """Seconds the provider asked to wait (0 when it did not ask).

        Raises:
            ProviderUnavailable: it asked for more than ``max_retry_after`` seconds.
        """
        asked = retry_after_seconds(answer.retry_after)
        if asked is None:
            return 0.0
        if asked > self.max_retry_after:
            raise ProviderUnavailable(
                f"provider answered {answer.status} with Retry-After {asked:g} s, longer "
                f"than the {self.max_retry_after:g} s waited within a batch "
                "(provider.max_retry_after_seconds)"
            )
        return asked

    def _post(
        self, url: str, body: bytes, headers: dict[str, str], *, limits: _Limits, limit: int
    ) -> _Answer:
        """One request; the body is read in chunks with the limits checked between them.

        Raises:
            PageTooLarge: a 2xx body over 4 MB (declared or counted) for ``limit`` rows.
            FetchAborted, ProviderTooSlow: from ``limits``.
            httpx.TimeoutException, httpx.TransportError: as httpx raises them.
        """
        left = limits.left()
        timeout = httpx.Timeout(
            self.read_timeout if left is None else min(self.read_timeout, left),
            connect=self.connect_timeout if left is None else min(self.connect_timeout, left),
        )
        with self._client.stream(
            "POST", url, content=body, headers=headers, timeout=timeout
        ) as response:
            status = response.status_code
            location = response.headers.get("location")
            retry_after = response.headers.get("retry-after")
            if 300 <= status < 400:  # never read: only the Location matters
                return _Answer(status, b"", location, retry_after)
            ok = 200 <= status < 300
            declared = response.headers.get("content-length")
            if ok and declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise PageTooLarge(
                    f"answer of {int(declared):,} bytes, at most 4 MB allowed",
                    limit=limit,
                    cause="body",
                )
            cap = MAX_BODY_BYTES if ok else MAX_ERROR_BODY_BYTES
            chunks = []
            size = 0
            for chunk in response.iter_bytes():
                limits.check()
                size += len(chunk)
                if size > cap:
                    if ok:
                        raise PageTooLarge("answer larger than 4 MB", limit=limit, cause="body")
                    break  # an error answer: its start is enough for the detail
                chunks.append(chunk)
            limits.check()
            return _Answer(status, b"".join(chunks), location, retry_after)

    def _decode(self, raw: bytes, limit: int) -> Batch:
        """:meth:`_parse`, with a MemoryError reported as a page too large.

        Raises:
            PageTooLarge: decoding the page ran out of memory (cause ``"memory"``).
            ProviderContractError: from :meth:`_parse`.
        """
        try:
            return self._parse(raw, limit)
        except MemoryError:
            raise PageTooLarge(
                f"out of memory decoding an answer of {len(raw):,} bytes",
                limit=limit,
                cause="memory",
            ) from None

    def _parse(self, raw: bytes, limit: int) -> Batch:
        exact = False
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            data = _exact_loads(raw, exc)
            exact = True
        data = _unwrap(data)
        rows = _rows_of(data)
        if len(rows) > limit:
            raise ProviderContractError(f"{len(rows)} rows in a batch of limit {limit}")
        columns = _parse_columns(data["columns"]) if data.get("columns") is not None else None
        token = data.get("snapshotToken")
        if token is not None and (not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS):
            raise ProviderContractError("snapshotToken must be a string of at most 512 characters")
        cursor = data.get("nextCursor")
        if cursor is not None and not isinstance(cursor, str):
            if type(cursor) is not int:  # a float cursor would be rounded, a list mangled
                raise ProviderContractError(
                    f"nextCursor must be a string, got {type(cursor).__name__}"
                )
            cursor = str(cursor)
        total = data.get("totalRows")
        if type(total) is not int:
            total = None
        row_format = data.get("rowFormat")
        if row_format is None:  # absent or null: objects
            row_format = "object"
        if not isinstance(row_format, str) or row_format not in ROW_FORMATS:
            raise ProviderContractError(
                f'rowFormat must be "object" or "array", got {_printable(repr(row_format), 60)}'
            )
        return Batch(
            columns=columns,
            rows=rows,
            next_cursor=cursor,
            has_more=bool(data.get("hasMore")),
            total_rows=total,
            snapshot_token=token,
            schema_hash=data.get("schemaHash"),
            raw=None if exact else raw,
            arrays=row_format == "array",
        )


def _raise_if_too_large(answer: _Answer, kind: str, limit: int) -> None:
    """Raise for a 413: the provider refuses a page of ``limit`` rows.

    Raises:
        PageTooLarge: the answer is a 413 (cause ``"413"``).
    """
    if answer.status == 413:
        metrics.PROVIDER_FAILURES.labels(kind, "4xx").inc()
        raise PageTooLarge(
            "provider answered 413 Payload Too Large",
            limit=limit,
            cause="413",
            detail=_error_detail(answer.body),
        )


def _is_db_timeout(answer: _Answer) -> bool:
    """Whether the answer is a 503/504 whose error body's ``code`` is ``DB_TIMEOUT``."""
    if answer.status not in DB_TIMEOUT_STATUSES:
        return False
    try:
        data = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, Mapping) and data.get("code") == DB_TIMEOUT_CODE


def _retries(pauses: Sequence[float]) -> str:
    """``"3 retries, after 1, 4, 16 s"`` (``"no retries"`` without pauses)."""
    if not pauses:
        return "no retries"
    return f"{len(pauses)} retries, after " + ", ".join(f"{p:g}" for p in pauses) + " s"


def _raise_if_permanent(answer: _Answer, kind: str) -> None:
    """Raise for an answer that trying again cannot change (module docstring table).

    Raises:
        ProviderRejected: 3xx, 410, 4xx other than 408/429, 501, 505, 1xx.
    """
    status = answer.status
    if 300 <= status < 400:
        metrics.PROVIDER_FAILURES.labels(kind, "3xx").inc()
        where = f"to {_printable(answer.location)}" if answer.location else "without a Location"
        raise ProviderRejected(
            f"provider redirected ({status}) {where}", code="PROVIDER_REDIRECTED"
        )
    if status in TRANSIENT_STATUSES or (500 <= status < 600 and status not in PERMANENT_5XX):
        return
    metrics.PROVIDER_FAILURES.labels(kind, str(status)[0] + "xx").inc()
    detail = _error_detail(answer.body)
    if status == 410:
        raise ProviderRejected(
            f"provider answered 410: snapshot expired{detail}", code="SNAPSHOT_EXPIRED"
        )
    raise ProviderRejected(f"provider answered {status}{detail}")


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait.

    Args:
        value: the header: delay-seconds (``"120"``) or an HTTP-date
            (``"Wed, 21 Oct 2015 07:28:00 GMT"``); None when absent.
        now: the current UTC time (tests); default: the instance clock.

    Returns:
        Seconds (0 for a date in the past), or None when absent or not understood (an
        unreadable header is ignored: the usual pause applies).
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text[:12]))  # at most 10**12 s: only compared with the bound
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _printable(text: str | None, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, control characters replaced by ``?``."""
    value = "".join(c if c.isprintable() else "?" for c in (text or "")[:limit])
    return value + ("..." if text and len(text) > limit else "")


def _unwrap(data: Any) -> Mapping[str, Any]:
    """The answer object (a ``{code, message, data}`` envelope around it is tolerated).

    Raises:
        ProviderContractError: the answer is not a JSON object.
    """
    if isinstance(data, Mapping) and "data" in data and "rows" not in data:
        data = data["data"]
    if not isinstance(data, Mapping):
        raise ProviderContractError("answer must be a JSON object")
    return data


def _rows_of(data: Mapping[str, Any]) -> list[Any]:
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise ProviderContractError("rows must be a list")
    return rows


def _exact_loads(raw: bytes, error: Exception | None) -> Any:
    """Decode ``raw`` with every number exact (``Decimal`` for fractions and exponents,
    ``int`` for integers, :class:`NonFiniteNumber` for bare NaN/Infinity).

    Also the decoder of the answers orjson refuses (bare NaN/Infinity, ``1e400``), so
    that the value checks can name the row and column.

    Args:
        raw: the body.
        error: orjson's error, for the message when this decoder fails too.

    Raises:
        ProviderContractError: the body is not JSON.
    """
    try:
        return json.loads(raw, parse_float=Decimal, parse_constant=NonFiniteNumber)
    except (ValueError, RecursionError):
        raise ProviderContractError(f"answer is not JSON ({error})") from None


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
            return " (" + _printable(": ".join(parts), 300) + ")"
    return ""
