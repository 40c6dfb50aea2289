"""Signed, expiring download links (DESIGN.md "Files"; CASES E31).

A link is ``/api/v1/exports/{taskId}/download?expires=<unix s>&user=<id>&tenant=<id>
&app=<code>&scope=own|all&signature=<hex>``. The signature is HMAC-SHA256 over the
task id and everything that decides visibility: the user it was issued to, their
tenant and app, whether they saw the task as its owner (``own``) or through the
download-all permission (``all``), and the expiry. Changing any of them, or using the
link after ``expires``, is refused with 403, and serving the file applies the same
visibility rule as every other route (:func:`export_center.access.in_scope`) to the
scope the link carries: a link never serves a file its user could not see. Link expiry
(default 24 h) is separate from file retention (default 7 days).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from urllib.parse import urlencode

from export_center.access import Owned, Scope, scope_of
from export_center.auth import Identity
from export_center.errors import Forbidden

__all__ = ["LinkGrant", "link_expiry", "link_scope", "sign_download", "verify_download"]

_EXPIRES = re.compile(r"^[1-9][0-9]{0,11}$")
_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")
_SCOPES = ("own", "all")


@dataclass(frozen=True, slots=True)
class LinkGrant:
    """What a verified link grants: its user and the scope it was issued for."""

    user: str
    scope: Scope


def _mac(secret: str, task_no: str, user: str, scope: Scope, expires: int) -> str:
    kind = "own" if scope.owner is not None else "all"
    # Fields are separated by LF, which no identifier in a link may contain (checked on
    # verify), so no two field lists make the same message.
    message = "\n".join(
        ["download-v2", task_no, user, scope.tenant_id, scope.app_code, kind, str(expires)]
    ).encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def link_scope(task: Owned, viewer: Identity) -> Scope:
    """The narrowest scope in which ``viewer`` sees ``task``, for its download link: the
    owner's own scope, else the tenant-wide scope of the download-all permission."""
    scope = scope_of(viewer)
    if task.requested_by == viewer.user:
        return Scope(tenant_id=scope.tenant_id, app_code=scope.app_code, owner=viewer.user)
    return scope


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
) -> str:
    """Return the signed download path of a task for ``user`` seeing it in ``scope``.

    Args:
        secret: the download-link HMAC secret.
        task_no: public task id.
        user: the user the link is issued to.
        scope: the scope in which that user sees the task (own, or all of the tenant).
        ttl_seconds: lifetime of the link in seconds.
        now: the current Unix time (default: the clock).

    Returns:
        A path with its query (relative to the API's base URL).
    """
    expires = link_expiry(ttl_seconds, now=now)
    query = urlencode(
        {
            "expires": expires,
            "user": user,
            "tenant": scope.tenant_id,
            "app": scope.app_code,
            "scope": "own" if scope.owner is not None else "all",
            "signature": _mac(secret, task_no, user, scope, expires),
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
    now: float | None = None,
) -> LinkGrant:
    """Check a signed link and return what it grants.

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
    ):
        raise invalid
    granted = Scope(tenant_id=tenant, app_code=app, owner=user if scope == "own" else None)
    expected = _mac(secret, task_no, user, granted, int(expires))
    if not hmac.compare_digest(expected, signature):
        raise invalid
    if int(expires) <= (now if now is not None else time.time()):
        raise Forbidden("the download link has expired; ask for a new one", code="LINK_EXPIRED")
    return LinkGrant(user=user, scope=granted)
