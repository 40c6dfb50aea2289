"""Signed, expiring download links (DESIGN.md "Files"; CASES E31).

A link is ``/api/v1/exports/{taskId}/download?expires=<unix s>&user=<id>&tenant=<id>
&app=<code>&scope=own|all&link=<id>&issued=<unix ms>&signature=<hex>``. The signature is
HMAC-SHA256 over the task id and everything that decides visibility: the user it was
issued to, their tenant and app, whether they saw the task as its owner (``own``) or
through the download-all permission (``all``), the expiry, and the link's own id (16 hex
digits: 8 random, then 8 of an HMAC binding them to the task, so a revocation can tell a
link of the task from any other id, :func:`is_link_of`) and issue time (Unix ms, this
process's clock), by which it is revoked
(:func:`export_center.repository.downloads.link_revoked`: its own id, or every link of
its task revoked at or after its issue time, database clock; the two clocks are assumed
synchronised, as NTP keeps them).
Links signed before links had ids (no ``link``
and ``issued``) are still accepted until they expire; they have no id, so only a
revocation of every link of their task reaches them. Changing any of them, or using the
link after ``expires``, is refused with 403, and serving the file applies the same
visibility rule as every other route (:func:`export_center.access.in_scope`) to the
scope the link carries: a link never serves a file its user could not see. Link expiry
(default 24 h) is separate from file retention (default 7 days).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlencode

from export_center.access import Scope
from export_center.errors import Forbidden

__all__ = [
    "LinkGrant",
    "is_link_id",
    "is_link_of",
    "link_expiry",
    "new_link_id",
    "sign_download",
    "verify_download",
]

_EXPIRES = re.compile(r"^[1-9][0-9]{0,11}$")
_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")
_SCOPES = ("own", "all")
_LINK_ID = re.compile(r"^[0-9a-f]{16}$")
_ISSUED = re.compile(r"^[1-9][0-9]{0,15}$")


@dataclass(frozen=True, slots=True)
class LinkGrant:
    """What a verified link grants: its user and the scope it was issued for."""

    user: str
    scope: Scope
    #: The link's id (16 hex digits); None for a link signed before links had ids.
    link_id: str | None = None
    #: When the link was signed (Unix ms); None for a link without id.
    issued: int | None = None


def _mac(
    secret: str,
    task_no: str,
    user: str,
    scope: Scope,
    expires: int,
    link: tuple[str, int] | None = None,
) -> str:
    kind = "own" if scope.owner is not None else "all"
    # Fields are separated by LF, which no identifier in a link may contain (checked on
    # verify), so no two field lists make the same message.
    fields = [task_no, user, scope.tenant_id, scope.app_code, kind, str(expires)]
    if link is None:  # a link signed before links had ids
        message = "\n".join(["download-v2", *fields]).encode()
    else:
        message = "\n".join(["download-v3", *fields, link[0], str(link[1])]).encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def _link_tag(secret: str, task_no: str, nonce: str) -> str:
    message = "\n".join(["link-id-v1", task_no, nonce]).encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:8]


def new_link_id(secret: str, task_no: str) -> str:
    """A new link id of task ``task_no``: 16 lowercase hex digits, 8 random (32 bits)
    and 8 of HMAC-SHA256(``secret``, task, random part)."""
    nonce = secrets.token_hex(4)
    return nonce + _link_tag(secret, task_no, nonce)


def is_link_of(secret: str, task_no: str, link_id: str) -> bool:
    """True when ``link_id`` is a link id minted for task ``task_no`` with ``secret``
    (:func:`new_link_id`); False for a malformed id or one of another task."""
    if not is_link_id(link_id):
        return False
    return hmac.compare_digest(link_id[8:], _link_tag(secret, task_no, link_id[:8]))


def is_link_id(value: str) -> bool:
    """True when ``value`` has the shape of a link id (16 lowercase hex digits)."""
    return _LINK_ID.fullmatch(value) is not None


def link_expiry(ttl_seconds: int, *, now: float | None = None) -> int:
    """The Unix time (s) at which a link signed now with ``ttl_seconds`` expires."""
    return int((now if now is not None else time.time()) + ttl_seconds)


def sign_download(
    secret: str,
    task_no: str,
    user: str,
    scope: Scope,
    ttl_seconds: int,
    *,
    now: float | None = None,
    link_id: str | None = None,
) -> str:
    """Return the signed download path of a task for ``user`` seeing it in ``scope``.

    Args:
        secret: the download-link HMAC secret.
        task_no: public task id.
        user: the user the link is issued to.
        scope: the scope in which that user sees the task (own, or all of the tenant).
        ttl_seconds: lifetime of the link in seconds.
        now: the current Unix time (default: the clock).
        link_id: the link's id (default: a new one of the task, :func:`new_link_id`).

    Returns:
        A path with its query (relative to the API's base URL).
    """
    moment = now if now is not None else time.time()
    expires = link_expiry(ttl_seconds, now=moment)
    link = (link_id or new_link_id(secret, task_no), int(moment * 1000))
    query = urlencode(
        {
            "expires": expires,
            "user": user,
            "tenant": scope.tenant_id,
            "app": scope.app_code,
            "scope": "own" if scope.owner is not None else "all",
            "link": link[0],
            "issued": link[1],
            "signature": _mac(secret, task_no, user, scope, expires, link),
        }
    )
    return f"/api/v1/exports/{task_no}/download?{query}"


def verify_download(
    secret: str,
    task_no: str,
    *,
    user: str,
    tenant: str,
    app: str,
    scope: str,
    expires: str,
    signature: str,
    link: str | None = None,
    issued: str | None = None,
    now: float | None = None,
) -> LinkGrant:
    """Check a signed link and return what it grants.

    ``link`` and ``issued`` are the link's id and issue time; both absent for a link
    signed before links had ids (accepted until it expires), one without the other is
    invalid.

    Raises:
        Forbidden: ``LINK_INVALID`` for a bad signature or a malformed field,
            ``LINK_EXPIRED`` once ``expires`` has passed.
    """
    invalid = Forbidden("the download link is not valid", code="LINK_INVALID")
    if (
        not _EXPIRES.fullmatch(expires)
        or not _SIGNATURE.fullmatch(signature)
        or scope not in _SCOPES
        or any(not value or "\n" in value for value in (user, tenant, app))
        or (link is None) != (issued is None)
        or (link is not None and not _LINK_ID.fullmatch(link))
        or (issued is not None and not _ISSUED.fullmatch(issued))
    ):
        raise invalid
    granted = Scope(tenant_id=tenant, app_code=app, owner=user if scope == "own" else None)
    ident = None if link is None or issued is None else (link, int(issued))
    expected = _mac(secret, task_no, user, granted, int(expires), ident)
    if not hmac.compare_digest(expected, signature):
        raise invalid
    if int(expires) <= (now if now is not None else time.time()):
        raise Forbidden("the download link has expired; ask for a new one", code="LINK_EXPIRED")
    return LinkGrant(
        user=user,
        scope=granted,
        link_id=None if ident is None else ident[0],
        issued=None if ident is None else ident[1],
    )
