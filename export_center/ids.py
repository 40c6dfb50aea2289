"""Identifiers: public task numbers, event ids, W3C trace context.

Task numbers are ``exp_`` + a ULID (26 Crockford base-32 characters, 80 random bits
per millisecond), so they sort by creation time and cannot be guessed (CASES E30).
"""

from __future__ import annotations

import re
import secrets
import uuid

from ulid import ULID

__all__ = [
    "TASK_NO_PATTERN",
    "new_event_id",
    "new_span_id",
    "new_task_no",
    "new_trace_id",
    "trace_id_of",
    "traceparent",
]

#: What a public task id looks like; anything else is answered 404 without a query.
TASK_NO_PATTERN = re.compile(r"^exp_[0-9A-HJKMNP-TV-Z]{26}$")

#: A W3C ``traceparent``: version, trace id, parent (span) id, flags, in lowercase hex.
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def new_task_no() -> str:
    """Return a new public task id, ``exp_`` + ULID (30 characters)."""
    return f"exp_{ULID()}"


def new_event_id() -> str:
    """Return a new outbox event id (UUID4 text, 36 characters)."""
    return str(uuid.uuid4())


def new_trace_id() -> str:
    """Return a new W3C trace id (32 lowercase hex characters)."""
    return secrets.token_hex(16)


def new_span_id() -> str:
    """Return a new W3C span (parent) id: 16 lowercase hex characters, never all zero."""
    while (span := secrets.token_hex(8)) == "0" * 16:
        pass  # pragma: no cover - one chance in 2**64
    return span


def traceparent(trace_id: str, span_id: str) -> str:
    """The ``traceparent`` header of an outgoing call: ``00-<trace>-<span>-01`` (sampled)."""
    return f"00-{trace_id}-{span_id}-01"


def trace_id_of(header: str | None) -> str | None:
    """The trace id of a W3C ``traceparent`` header, or None when it cannot be used.

    The W3C Trace Context rules: the version is two hex digits other than ``ff``;
    version ``00`` has exactly four fields (55 characters), a later version may append
    fields after a dash; the trace id (32 hex) and the parent id (16 hex) are lowercase
    and not all zeros. A header that breaks a rule is ignored and the caller starts a
    new trace (the specification asks for that rather than an error).
    """
    if header is None:
        return None
    match = _TRACEPARENT.match(header.strip(" \t"))
    if match is None:
        return None
    version, trace_id, parent_id, _flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    return trace_id
