"""Client side of the provider contract (DESIGN.md "Provider contract").

``POST {base}/internal/exports/v1/{TYPE}/batches`` with ``X-Internal-Service-Token``,
``Accept-Encoding: gzip, deflate`` and ``{taskId, tenantId, appCode, requestedBy,
dispatchVersion, parameters, cursor, snapshotToken, limit}``. Every answer is checked
while it is read: body at most 4 MB as sent and at most 4 MB inflated (counted while
streaming, :mod:`export_center.provider_body`), at most ``limit`` rows, at most 100
columns (:mod:`export_center.provider_batch`). ``limit`` is the type's batch size unless
the caller passes a smaller one (``fetch(limit=...)``, see
:class:`export_center.attempt.fetching.PageSizer`).

Answers, by class (:meth:`ProviderClient.fetch`):

==========================================  ============================================
answer                                      what happens
==========================================  ============================================
2xx                                         parsed and checked (:class:`Batch`)
2xx over 4 MB as sent or once inflated,     :class:`PageTooLarge` at once (transient,
or a MemoryError while decoding it; 413     ``PAGE_TOO_LARGE``), the same size is not
                                            asked again: the caller halves ``limit``
2xx with a ``Content-Encoding`` other than  permanent, ``PROVIDER_CONTRACT``: "the
gzip or deflate, or more than one           answer's Content-Encoding 'br' is not one
(``gzip, gzip``); corrupt compressed data   the request accepts (Accept-Encoding: gzip,
                                            deflate)"; the body is not read
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
                                            ``db_timeout_pauses`` (1, 4, 16, 30 s; at
                                            least the ``Retry-After``), counted apart
                                            from the tries above; then
                                            :class:`ProviderUnavailable` naming
                                            ``DB_TIMEOUT``
410                                         permanent, ``SNAPSHOT_EXPIRED``
other 4xx, 501, 505, 1xx                    permanent, ``PROVIDER_REJECTED``
==========================================  ============================================

The body of an answer that is not a 2xx is read for its ``{code, message}`` only: its
first 64 KB, inflated against the same 64 KB; one in an encoding that is not read, or
with corrupt compressed data, counts as an answer without a body (its status decides).

A batch has a total time limit (``time_limit``: first byte sent to last byte read,
retries and pauses included) and an abort event; both are checked between received
chunks and during pauses, so a provider that drips one byte every few seconds cannot
hold a batch past its limit, and the attempt that stops waiting (cancel, deadline,
shutdown) makes the fetch end at the next chunk. A read that is blocked waiting for a
byte ends at the read timeout at worst (each request's timeouts are also cut to the
time left); the caller does not wait for it (see
:class:`~export_center.attempt.fetching.BatchFetcher`).

The answer's body and :class:`Batch` (exact numbers, row formats) are described in
:mod:`export_center.provider_batch`; this module keeps its names importable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from export_center import metrics
from export_center.errors import (
    FetchAborted,
    PageTooLarge,
    ProviderContractError,
    ProviderTooSlow,
    ProviderUnavailable,
)
from export_center.ids import new_span_id, traceparent
from export_center.provider_batch import (
    MAX_COLUMNS,
    ROW_FORMATS,
    Batch,
    NonFiniteNumber,
    Schema,
    parse_batch,
    parse_schema,
)
from export_center.provider_body import ACCEPT_ENCODING, Body, content_coding, read_body
from export_center.provider_status import (
    DB_TIMEOUT_CODE,
    DB_TIMEOUT_STATUSES,
    PERMANENT_5XX,
    TRANSIENT_STATUSES,
    Answer,
    is_db_timeout,
    raise_if_permanent,
    raise_if_too_large,
    retries_text,
    retry_after_seconds,
)

__all__ = [
    "ACCEPT_ENCODING",
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
    "Schema",
    "retry_after_seconds",
    "too_slow",
]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024
"""Most bytes of a 2xx answer, as sent and once inflated (a page too large above)."""
MAX_ERROR_BODY_BYTES = 64 * 1024
"""Bytes of a non-2xx answer read for its ``{code, message}`` (the rest is not read)."""


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
        db_timeout_pauses: Sequence[float] = (1.0, 4.0, 16.0, 30.0),
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
            # Only encodings read within the cap (not httpx's default, which adds br
            # and zstd when their packages are installed).
            headers={"content-type": "application/json", "accept-encoding": ACCEPT_ENCODING},
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
        columns: Sequence[str] | None = None,
    ) -> Batch:
        """Fetch one batch, trying transient failures again (table in the module docstring).

        Args:
            request: the attempt's identity and the provider URL.
            cursor: the cursor of this batch (None for the first).
            snapshot_token: the token of the first answer (None for the first batch).
            limit: the rows asked for; None: ``request.limit`` (the type's batch size).
            columns: the keys the export writes, sent as the body's ``columns`` (the
                provider may leave the others out); None: all, and no ``columns`` field.
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
        body = _request_body(request, cursor, snapshot_token, size, columns)
        return self._decode(self._exchange(request, body, size, time_limit, abort), size)

    def schema(
        self,
        request: ProviderRequest,
        *,
        columns: Sequence[str] | None = None,
        time_limit: float | None = None,
        abort: threading.Event | None = None,
    ) -> Schema:
        """Ask the provider's schema: a batch request with ``limit: 0`` (no cursor, no
        snapshot token), answered with the columns and a row estimate, no rows.

        The same caps, tries and error mapping as :meth:`fetch` (table in the module
        docstring); ``request.limit`` is not used.

        Args:
            request: the identity (a preview uses ``preview-<uuid>`` as task id) and the
                parameters the estimate is for.
            columns: the keys the export would write (None: all).
            time_limit: seconds the request may take, tries and pauses included.
            abort: set by the caller when it stops waiting.

        Returns:
            The declared columns and ``totalRows`` (None when the provider gives none).

        Raises:
            ProviderRejected, ProviderUnavailable, ProviderTooSlow, PageTooLarge,
            FetchAborted: as :meth:`fetch`.
            ProviderContractError: the answer broke the contract, carries rows, or
                declares no columns.
        """
        body = _request_body(request, None, None, 0, columns)
        raw = self._exchange(request, body, 0, time_limit, abort)
        try:
            return parse_schema(raw)
        except MemoryError:
            raise PageTooLarge(
                f"out of memory decoding an answer of {len(raw):,} bytes", limit=0, cause="memory"
            ) from None

    def _exchange(
        self,
        request: ProviderRequest,
        body: bytes,
        size: int,
        time_limit: float | None,
        abort: threading.Event | None,
    ) -> bytes:
        """Send ``body`` until a 2xx answers, with the tries and pauses of the module
        docstring; returns the 2xx body (inflated, within the cap).

        Raises:
            The errors of :meth:`fetch`, except the contract checks of the body.
        """
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
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
                metrics.PROVIDER_FAILURES.labels(kind, "connection").inc()
            else:
                metrics.PROVIDER_SECONDS.labels(kind).observe(time.perf_counter() - started)
                if 200 <= answer.status < 300:
                    return answer.body
                raise_if_too_large(answer, kind, size)
                raise_if_permanent(answer, kind)
                db_timeout = is_db_timeout(answer)
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
                    retries = retries_text(self.db_timeout_pauses)
                    raise ProviderUnavailable(f"provider {last} on {calls} tries ({retries})")
                limits.pause(max(self.db_timeout_pauses[db_timeouts - 1], asked), last)
                continue
            failures += 1
            if failures >= self.attempts:
                raise ProviderUnavailable(f"provider {last} on {calls} tries")
            limits.pause(max(pause, asked), last)
            pause *= 2

    def _retry_after(self, answer: Answer) -> float:
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
    ) -> Answer:
        """One request; the body is read in chunks with the limits checked between them.

        Raises:
            PageTooLarge: a 2xx body over 4 MB (declared, counted as sent, or counted
                once inflated) for ``limit`` rows.
            ProviderContractError: a 2xx in an encoding that is not read, or with
                corrupt compressed data (:mod:`export_center.provider_body`).
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
                return Answer(status, b"", location, retry_after)
            ok = 200 <= status < 300
            declared = response.headers.get("content-length")
            if ok and declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise PageTooLarge(
                    f"answer of {int(declared):,} bytes, at most 4 MB allowed",
                    limit=limit,
                    cause="body",
                )
            read = _read_answer(response, ok, limits)
            if ok and not read.complete:
                inflated = f" once inflated ({read.coding})" if read.coding else ""
                raise PageTooLarge(f"answer larger than 4 MB{inflated}", limit=limit, cause="body")
            return Answer(status, read.data, location, retry_after)

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
        """:func:`export_center.provider_batch.parse_batch` (the contract checks)."""
        return parse_batch(raw, limit)


def _request_body(
    request: ProviderRequest,
    cursor: str | None,
    snapshot_token: str | None,
    limit: int,
    columns: Sequence[str] | None,
) -> bytes:
    """The JSON body of one batch request (``limit`` 0: a schema request)."""
    return orjson.dumps(
        {
            "taskId": request.task_id,
            "tenantId": request.tenant_id,
            "appCode": request.app_code,
            "requestedBy": request.requested_by,
            "dispatchVersion": request.dispatch_version,
            "parameters": request.parameters,
            "cursor": cursor,
            "snapshotToken": snapshot_token,
            "limit": limit,
            "timeZone": request.time_zone,
            **({"shard": request.shard} if request.shard is not None else {}),
            **({"columns": list(columns)} if columns is not None else {}),
        }
    )


def _read_answer(response: httpx.Response, ok: bool, limits: _Limits) -> Body:
    """The body of ``response``, as sent and inflated, within its cap.

    A 2xx is read up to :data:`MAX_BODY_BYTES`; another answer up to
    :data:`MAX_ERROR_BODY_BYTES`, keeping its start, and as empty when its encoding is
    not read or its compressed data is corrupt (its status decides, not its body).

    Raises:
        ProviderContractError: a 2xx in an encoding that is not read (before reading
            it), or with corrupt compressed data.
        FetchAborted, ProviderTooSlow: from ``limits``.
    """
    cap = MAX_BODY_BYTES if ok else MAX_ERROR_BODY_BYTES
    try:
        coding = content_coding(response.headers.get("content-encoding"))
        return read_body(response.iter_raw(), coding, cap, limits.check, keep_start=not ok)
    except ProviderContractError:
        if ok:
            raise
        return Body(b"", True, None)
