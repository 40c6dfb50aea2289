"""Signed, expiring download links (DESIGN.md "Files"; CASES E31).

A link is ``/api/v1/exports/{taskId}/download?expires=<unix s>&user=<id>&signature=<hex>``
where the signature is HMAC-SHA256 over ``taskId``, ``user`` and ``expires``: changing
any of them, or using the link after ``expires``, is refused with 403. Link expiry
(default 24 h) is separate from file retention (default 7 days).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import urlencode

import re

from export_center.errors import Forbidden

_EXPIRES = re.compile(r"^[1-9][0-9]{0,11}$")

__all__ = ["sign_download", "verify_download"]


def _mac(secret: str, task_no: str, user: str, expires: int) -> str:
    message = f"download\n{task_no}\n{user}\n{expires}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign_download(
    secret: str, task_no: str, user: str, ttl_seconds: int, *, now: float | None = None
) -> str:
    """Return the signed download path of a task for ``user``, valid ``ttl_seconds``."""
    expires = int((now if now is not None else time.time()) + ttl_seconds)
    query = urlencode(
        {"expires": expires, "user": user, "signature": _mac(secret, task_no, user, expires)}
    )
    return f"/api/v1/exports/{task_no}/download?{query}"


def verify_download(
    secret: str, task_no: str, user: str, expires: str, signature: str, *, now: float | None = None
) -> None:
    """Check a signed link.

    Raises:
        Forbidden: ``LINK_INVALID`` for a bad signature or malformed field,
            ``LINK_EXPIRED`` once ``expires`` has passed.
    """
    if not _EXPIRES.fullmatch(expires) or not re.fullmatch(r"[0-9a-f]{64}", signature):
        raise Forbidden("the download link is not valid", code="LINK_INVALID")
    expected = _mac(secret, task_no, user, int(expires))
    if not hmac.compare_digest(expected, signature):
        raise Forbidden("the download link is not valid", code="LINK_INVALID")
    if int(expires) <= (now if now is not None else time.time()):
        raise Forbidden("the download link has expired; ask for a new one", code="LINK_EXPIRED")
