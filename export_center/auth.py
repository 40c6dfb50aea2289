"""Identity from bearer JWTs (PyJWT, HS256) and the permission helpers.

Claims: ``sub`` (user id), ``tenant`` (tenant id), ``app`` (app code: PLATFORM or
MERCHANT), ``perms`` (list of permission strings), ``exp``. Who sees which task is
:mod:`export_center.access` (tenant and app, and the owner or the download-all
permission).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import jwt

from export_center.errors import Unauthorized

__all__ = [
    "ADMIN",
    "APP_CODES",
    "DOWNLOAD_ALL",
    "OPERATOR",
    "Identity",
    "decode_token",
    "issue_token",
]

#: Lets a user see every task of the tenant.
DOWNLOAD_ALL = "platform:download:all"
#: Lets a user reload the registry.
ADMIN = "platform:export:admin"
#: Lets an admin act across tenants (the admin API; operators of the whole platform).
OPERATOR = "platform:operator"
#: The app codes a token may name (the registry's ``app_scope`` values).
APP_CODES = ("PLATFORM", "MERCHANT")


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller, as the token says."""

    user: str
    tenant: str
    app_code: str = "PLATFORM"
    permissions: frozenset[str] = field(default_factory=frozenset)
    expires_at: datetime | None = None

    def can(self, permission: str) -> bool:
        """True when the token grants ``permission``."""
        return permission in self.permissions


def issue_token(
    secret: str,
    *,
    user: str,
    tenant: str,
    app_code: str = "PLATFORM",
    permissions: Iterable[str] = (),
    ttl_seconds: int = 24 * 3600,
) -> str:
    """Return an HS256 JWT for the given identity, valid ``ttl_seconds`` from now."""
    now = int(time.time())
    claims = {
        "sub": user,
        "tenant": tenant,
        "app": app_code,
        "perms": sorted(set(permissions)),
        "iat": now,
        "exp": now + ttl_seconds,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def decode_token(secret: str, token: str, *, leeway_seconds: float = 30.0) -> Identity:
    """Verify a bearer token and return the identity.

    Args:
        secret: the HS256 secret.
        token: the compact JWT.
        leeway_seconds: clock skew tolerated on ``exp``, ``nbf`` and ``iat`` (identity
            providers' clocks drift; a token issued 5 s "in the future" is fine).

    Raises:
        Unauthorized: ``TOKEN_EXPIRED``; ``TOKEN_WRONG_KEY`` when the signature does not
            match this server's secret (a token made for another installation);
            ``TOKEN_INVALID`` for anything else (malformed, not yet valid, a claim
            missing or of the wrong type).
    """
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            leeway=leeway_seconds,
            options={"require": ["sub", "tenant", "exp"]},
        )
    except jwt.ExpiredSignatureError:
        raise Unauthorized("the bearer token has expired", code="TOKEN_EXPIRED") from None
    except jwt.InvalidSignatureError:
        raise Unauthorized(
            "the bearer token's signature does not match this server's key: it was made by "
            "another installation or altered. Make tokens with `export-center token` using "
            "the same data directory (EXPORT_CENTER_DATA_DIR) or EXPORT_CENTER_API__JWT_SECRET "
            "as the server; the server prints its data directory when it starts",
            code="TOKEN_WRONG_KEY",
        ) from None
    except jwt.ImmatureSignatureError:
        raise Unauthorized(
            "the bearer token is not valid yet (nbf or iat is in the future beyond the "
            f"{leeway_seconds:g} s clock leeway); check the issuer's clock",
            code="TOKEN_NOT_YET_VALID",
        ) from None
    except jwt.DecodeError:
        raise Unauthorized(
            "the bearer token is not a JWT (three base64url parts separated by dots)",
            code="TOKEN_INVALID",
        ) from None
    except jwt.PyJWTError as exc:
        raise Unauthorized(f"the bearer token is not valid: {exc}", code="TOKEN_INVALID") from None
    perms = claims.get("perms") or []
    if not isinstance(perms, list) or not all(isinstance(p, str) for p in perms):
        raise Unauthorized("the perms claim must be a list of strings", code="TOKEN_INVALID")
    user, tenant, app = claims["sub"], claims["tenant"], claims.get("app", "PLATFORM")
    if not all(isinstance(v, str) and v for v in (user, tenant, app)):
        raise Unauthorized("sub, tenant and app must be non-empty strings", code="TOKEN_INVALID")
    if app not in APP_CODES:
        raise Unauthorized(
            f"the app claim must be one of {', '.join(APP_CODES)}", code="TOKEN_INVALID"
        )
    expires = claims.get("exp")
    try:
        expires_at = datetime.fromtimestamp(expires, UTC) if isinstance(expires, int) else None
    except (OverflowError, OSError, ValueError):
        raise Unauthorized("the exp claim is out of range", code="TOKEN_INVALID") from None
    return Identity(
        user=user,
        tenant=tenant,
        app_code=app,
        permissions=frozenset(perms),
        expires_at=expires_at,
    )
