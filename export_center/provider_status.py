"""What a provider's HTTP answer means, by its status (the table of
:mod:`export_center.provider_client`).

The client reads an answer (:class:`Answer`) and asks, in this order: is it a page too
large (:func:`raise_if_too_large`, a 413), is it permanent (:func:`raise_if_permanent`:
3xx, 410, 4xx but 408/429, 501, 505, 1xx), is it the provider's database timing out
(:func:`is_db_timeout`: 503/504 with the code ``DB_TIMEOUT``); any other answer is
transient and tried again after at least its ``Retry-After``
(:func:`retry_after_seconds`).
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from export_center import metrics
from export_center.errors import PageTooLarge, ProviderRejected
from export_center.provider_batch import printable

__all__ = [
    "DB_TIMEOUT_CODE",
    "DB_TIMEOUT_STATUSES",
    "PERMANENT_5XX",
    "TRANSIENT_STATUSES",
    "Answer",
    "error_detail",
    "is_db_timeout",
    "raise_if_permanent",
    "raise_if_too_large",
    "retries_text",
    "retry_after_seconds",
]

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
class Answer:
    """One HTTP answer: status, the headers the client acts on, and the body read."""

    status: int
    body: bytes
    location: str | None
    retry_after: str | None


def raise_if_too_large(answer: Answer, kind: str, limit: int) -> None:
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
            detail=error_detail(answer.body),
        )


def is_db_timeout(answer: Answer) -> bool:
    """Whether the answer is a 503/504 whose error body's ``code`` is ``DB_TIMEOUT``."""
    if answer.status not in DB_TIMEOUT_STATUSES:
        return False
    try:
        data = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, Mapping) and data.get("code") == DB_TIMEOUT_CODE


def retries_text(pauses: Sequence[float]) -> str:
    """``"3 retries, after 1, 4, 16 s"`` (``"no retries"`` without pauses)."""
    if not pauses:
        return "no retries"
    return f"{len(pauses)} retries, after " + ", ".join(f"{p:g}" for p in pauses) + " s"


def raise_if_permanent(answer: Answer, kind: str) -> None:
    """Raise for an answer that trying again cannot change (the table of
    :mod:`export_center.provider_client`).

    Raises:
        ProviderRejected: 3xx, 410, 4xx other than 408/429, 501, 505, 1xx.
    """
    status = answer.status
    if 300 <= status < 400:
        metrics.PROVIDER_FAILURES.labels(kind, "3xx").inc()
        where = f"to {printable(answer.location)}" if answer.location else "without a Location"
        raise ProviderRejected(
            f"provider redirected ({status}) {where}", code="PROVIDER_REDIRECTED"
        )
    if status in TRANSIENT_STATUSES or (500 <= status < 600 and status not in PERMANENT_5XX):
        return
    metrics.PROVIDER_FAILURES.labels(kind, str(status)[0] + "xx").inc()
    detail = error_detail(answer.body)
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


def error_detail(raw: bytes) -> str:
    """``" (CODE: message)"`` of an error answer's JSON body, shortened and printable;
    ``""`` when the body is not JSON or says neither."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ""
    if isinstance(data, Mapping):
        code = data.get("code")
        message = data.get("message")
        parts = [str(p) for p in (code, message) if p]
        if parts:
            return " (" + printable(": ".join(parts), 300) + ")"
    return ""
