"""Identifiers: public task numbers, event ids, trace ids.

Task numbers are ``exp_`` + a ULID (26 Crockford base-32 characters, 80 random bits
per millisecond), so they sort by creation time and cannot be guessed (CASES E30).
"""

from __future__ import annotations

import re
import secrets
import uuid

from ulid import ULID

__all__ = ["TASK_NO_PATTERN", "new_event_id", "new_task_no", "new_trace_id"]

#: What a public task id looks like; anything else is answered 404 without a query.
TASK_NO_PATTERN = re.compile(r"^exp_[0-9A-HJKMNP-TV-Z]{26}$")


def new_task_no() -> str:
    """Return a new public task id, ``exp_`` + ULID (30 characters)."""
    return f"exp_{ULID()}"


def new_event_id() -> str:
    """Return a new outbox event id (UUID4 text, 36 characters)."""
    return str(uuid.uuid4())


def new_trace_id() -> str:
    """Return a new W3C trace id (32 lowercase hex characters)."""
    return secrets.token_hex(16)
