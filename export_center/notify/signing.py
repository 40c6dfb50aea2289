"""Webhook signatures in the Stripe style.

``Export-Center-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``
with one ``v1=`` per valid secret (during a rotation: the new secret's first). A
receiver recomputes the HMAC over the timestamp, a dot and the raw body bytes with its
secret, compares in constant time with any ``v1``, and refuses a timestamp older than
its tolerance (5 minutes in the docs' receiver) so that a recorded delivery cannot be
replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

__all__ = ["SIGNATURE_HEADER", "EVENT_ID_HEADER", "sign", "signature_header", "verify"]

#: The header carrying the signatures.
SIGNATURE_HEADER = "Export-Center-Signature"
#: The header carrying the event id (receivers deduplicate by it).
EVENT_ID_HEADER = "Export-Center-Event-Id"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``b"<timestamp>." + body`` with ``secret`` (UTF-8)."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secrets: Sequence[str], body: bytes, *, timestamp: int | None = None) -> str:
    """The ``Export-Center-Signature`` value: ``t=...`` then one ``v1=`` per secret.

    Args:
        secrets: the valid secrets, newest first (at least one).
        body: the raw request body.
        timestamp: Unix seconds (default: now).
    """
    t = int(time.time()) if timestamp is None else timestamp
    return ",".join([f"t={t}", *(f"v1={sign(s, t, body)}" for s in secrets)])


def verify(
    secret: str,
    header: str,
    body: bytes,
    *,
    tolerance_seconds: float = 300,
    now: float | None = None,
) -> bool:
    """True when ``header`` carries a ``v1`` of ``body`` made with ``secret`` and its
    ``t`` is within ``tolerance_seconds`` of ``now`` (default: the clock)."""
    parts = [p.split("=", 1) for p in header.split(",") if "=" in p]
    stamps = [v for k, v in parts if k.strip() == "t"]
    if len(stamps) != 1 or not stamps[0].isdigit():
        return False
    t = int(stamps[0])
    if abs((time.time() if now is None else now) - t) > tolerance_seconds:
        return False
    expected = sign(secret, t, body)
    return any(hmac.compare_digest(expected, v.strip()) for k, v in parts if k.strip() == "v1")
