"""Identity from bearer JWTs (PyJWT, HS256) and the permission helpers.

Claims: ``sub`` (user id), ``tenant`` (tenant id), ``app`` (app code: PLATFORM or
MERCHANT), ``perms`` (list of permission strings), ``exp``, and ``aud`` when the server
names its audiences. Two optional OpenID Connect claims say how to reach the user:
``email`` (where the user's e-mail notifications go when a target names no address)
and ``locale`` (a BCP 47 tag such as ``zh-CN``: the language of the user's e-mails and
chat messages). A value that is not an e-mail address, or a locale of another
language than English or Chinese, is not an error: the token is accepted and the claim
is not used (identity providers fill these claims from profiles the user edits).

Who sees which task is :mod:`export_center.access` (tenant and app, and the owner or the
download-all permission).

Identity claims are stored as the task's owner, so their limits are the widths of the
columns that keep them (:data:`USER_ID_MAX_LENGTH`, :data:`TENANT_ID_MAX_LENGTH`,
:data:`APP_CODE_MAX_LENGTH`, in characters; :mod:`export_center.models` declares its
columns with the same constants). A longer claim is refused at authentication (401
``TOKEN_CLAIM_TOO_LONG`` naming the claim): stored, it would fail the write on a strict
MySQL server, or be cut on a lax one so that its owner never sees the export again.

Audience (``aud``, RFC 7519 §4.1.3): with ``api.jwt_audience`` set, a token must name one
of those audiences. Unset, a token that carries an ``aud`` is refused: it was minted for
a named recipient, which this server cannot claim to be (identity providers such as
Keycloak sign the tokens of every client of a realm with one key, so accepting any
audience would accept tokens meant for another service).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import jwt

from export_center.errors import Unauthorized

__all__ = [
    "ADMIN",
    "APP_CODES",
    "APP_CODE_MAX_LENGTH",
    "DOWNLOAD_ALL",
    "EMAIL_MAX_LENGTH",
    "OPERATOR",
    "TENANT_ID_MAX_LENGTH",
    "USER_ID_MAX_LENGTH",
    "WEBHOOKS_MANAGE",
    "Identity",
    "decode_token",
    "email_of",
    "header_language_of",
    "issue_token",
    "language_of",
]

#: Lets a user see every task of the tenant.
DOWNLOAD_ALL = "platform:download:all"
#: Lets a user reload the registry.
ADMIN = "platform:export:admin"
#: Lets a tenant admin manage the tenant's webhook endpoints.
WEBHOOKS_MANAGE = "platform:webhooks:manage"
#: Lets an admin act across tenants (the admin API; operators of the whole platform).
OPERATOR = "platform:operator"
#: The app codes a token may name (the registry's ``app_scope`` values).
APP_CODES = ("PLATFORM", "MERCHANT")
#: Longest ``sub`` (user id) in characters: the width of the owner columns.
USER_ID_MAX_LENGTH = 128
#: Longest ``tenant`` in characters: the width of the tenant columns.
TENANT_ID_MAX_LENGTH = 64
#: Longest ``app`` in characters: the width of the app-code column.
APP_CODE_MAX_LENGTH = 32
#: Claim name -> the longest value stored, in characters.
_CLAIM_LIMITS = {
    "sub": USER_ID_MAX_LENGTH,
    "tenant": TENANT_ID_MAX_LENGTH,
    "app": APP_CODE_MAX_LENGTH,
}


#: Longest ``email`` claim kept (RFC 5321's path limit is 256 with the brackets).
EMAIL_MAX_LENGTH = 254
# A plausible address: one "@", no spaces, a dotted domain (delivery is the real check).
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s.]+(?:\.[^@\s.]+)+$")


def language_of(tag: object) -> str | None:
    """The notification language of a BCP 47 tag or ``Accept-Language`` value:
    ``"zh"`` for Chinese (``zh``, ``zh-CN``, ``zh_Hans``), ``"en"`` for English, None for
    anything else (the first listed language decides; quality values are ignored)."""
    if not isinstance(tag, str):
        return None
    first = tag.split(",", 1)[0].split(";", 1)[0].strip().lower().replace("_", "-")
    primary = first.split("-", 1)[0]
    return primary if primary in ("en", "zh") else None


def header_language_of(user: Identity) -> str | None:
    """The file-header language tag (``en`` or ``zh-CN``) of the user's language, for a
    request that sends no ``Accept-Language``; None when the language is unknown."""
    return {"zh": "zh-CN", "en": "en"}.get(user.language or "")


def email_of(claim: object) -> str | None:
    """The ``email`` claim when it looks like an address of at most
    :data:`EMAIL_MAX_LENGTH` characters, else None."""
    if isinstance(claim, str) and len(claim) <= EMAIL_MAX_LENGTH and _EMAIL.match(claim):
        return claim
    return None


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller, as the token says.

    ``email`` and ``language`` (``"en"`` or ``"zh"``) come from the optional ``email``
    and ``locale`` claims (module docstring); None when the token has none usable.
    """

    user: str
    tenant: str
    app_code: str = "PLATFORM"
    permissions: frozenset[str] = field(default_factory=frozenset)
    expires_at: datetime | None = None
    email: str | None = None
    language: str | None = None

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
    audience: Sequence[str] = (),
    email: str | None = None,
    locale: str | None = None,
) -> str:
    """Return an HS256 JWT for the given identity, valid ``ttl_seconds`` from now.

    ``email`` and ``locale`` become the optional claims of the same names (none when
    None).

    ``audience`` becomes the ``aud`` claim (a string for one, a list for several; no
    claim when empty): a server with ``api.jwt_audience`` set accepts only tokens that
    name one of its audiences.
    """
    now = int(time.time())
    claims: dict[str, object] = {
        "sub": user,
        "tenant": tenant,
        "app": app_code,
        "perms": sorted(set(permissions)),
        "iat": now,
        "exp": now + ttl_seconds,
    }
    if audience:
        claims["aud"] = audience[0] if len(audience) == 1 else list(audience)
    if email is not None:
        claims["email"] = email
    if locale is not None:
        claims["locale"] = locale
    return jwt.encode(claims, secret, algorithm="HS256")


def decode_token(
    secret: str,
    token: str,
    *,
    leeway_seconds: float = 30.0,
    audience: Sequence[str] = (),
) -> Identity:
    """Verify a bearer token and return the identity.

    Args:
        secret: the HS256 secret.
        token: the compact JWT.
        leeway_seconds: clock skew tolerated on ``exp``, ``nbf`` and ``iat`` (identity
            providers' clocks drift; a token issued 5 s "in the future" is fine).
        audience: the audiences this server accepts (``api.jwt_audience``); when given,
            the token's ``aud`` must name one of them (PyJWT's audience check); when
            empty, a token with an ``aud`` is refused (module docstring).

    Raises:
        Unauthorized: ``TOKEN_EXPIRED``; ``TOKEN_WRONG_KEY`` when the signature does not
            match this server's secret (a token made for another installation);
            ``TOKEN_WRONG_AUDIENCE`` when ``aud`` is missing, names no accepted audience,
            or is present while none is configured; ``TOKEN_CLAIM_TOO_LONG`` when
            ``sub``, ``tenant`` or ``app`` is longer than its column (``field`` names the
            claim); ``TOKEN_INVALID`` for anything else (malformed, not yet valid, a
            claim missing or of the wrong type, text that is not Unicode scalar values).
    """
    required = ["sub", "tenant", "exp", *(["aud"] if audience else [])]
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            leeway=leeway_seconds,
            audience=list(audience) or None,
            options={"require": required},
        )
    except jwt.MissingRequiredClaimError as exc:
        if exc.claim == "aud":
            raise _wrong_audience(audience, None) from None
        raise Unauthorized(f"the bearer token is not valid: {exc}", code="TOKEN_INVALID") from None
    except jwt.InvalidAudienceError:
        raise _wrong_audience(audience, _unverified_audience(token)) from None
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
    _check_lengths({"sub": user, "tenant": tenant, "app": app})
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
        email=email_of(claims.get("email")),
        language=language_of(claims.get("locale")),
    )


def _check_lengths(values: dict[str, str]) -> None:
    """Refuse identity claims the database cannot keep exactly (module docstring).

    Raises:
        Unauthorized: ``TOKEN_CLAIM_TOO_LONG`` naming the claim and its limit;
            ``TOKEN_INVALID`` for text with lone surrogates (JSON ``"\\ud800"``), which
            no UTF-8 column can store.
    """
    for claim, value in values.items():
        limit = _CLAIM_LIMITS[claim]
        if len(value) > limit:
            raise Unauthorized(
                f"the bearer token's {claim} claim has {len(value)} characters; this server "
                f"keeps at most {limit}",
                code="TOKEN_CLAIM_TOO_LONG",
                field=claim,
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Unauthorized(
                f"the bearer token's {claim} claim is not valid Unicode text",
                code="TOKEN_INVALID",
                field=claim,
            ) from None


def _unverified_audience(token: str) -> object:
    """The ``aud`` of a token whose signature PyJWT has already verified (it checks the
    signature before the audience), for the error message."""
    try:
        return jwt.decode(token, options={"verify_signature": False}).get("aud")
    except jwt.PyJWTError:
        return None


def _wrong_audience(accepted: Sequence[str], found: object) -> Unauthorized:
    """The 401 of a token whose ``aud`` does not fit ``api.jwt_audience``."""
    shown = repr(found)[:200]
    if not accepted:
        message = (
            f"the bearer token is meant for the audience {shown}; this server accepts "
            "tokens with an audience only when EXPORT_CENTER_API__JWT_AUDIENCE names it"
        )
    elif found is None:
        message = (
            "the bearer token has no aud claim; this server accepts tokens for the audience "
            f"{', '.join(map(repr, accepted))}"
        )
    else:
        message = (
            f"the bearer token is meant for the audience {shown}, not for this server "
            f"({', '.join(map(repr, accepted))})"
        )
    return Unauthorized(message, code="TOKEN_WRONG_AUDIENCE", field="aud")
