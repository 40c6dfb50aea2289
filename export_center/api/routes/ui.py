"""The download-center web page's server side: the page itself, and the development sign-in.

The page is plain HTML, CSS and ES modules shipped in the package
(``export_center/api/static/ui``, no build step). ``/`` and ``/ui`` redirect to ``/ui/``;
the page and its assets are answered with a strict Content-Security-Policy (no inline
script or style), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``
(signed download links must not leak through Referer). ``/docs`` keeps its own headers:
Swagger UI needs inline script.

When the request for the page carries an ``Authorization`` header (a host application's
reverse proxy adds it), the page is told so (``data-auth="host"`` on ``<html>``) and asks
``GET /api/v1/me`` without a token of its own; the header itself never reaches the page.

On the embedded default a person signs in to the page with a user, a tenant, an app and
a role; the server mints a bearer token for them with this installation's key. This is
for trying the product on one machine: it exists only when ``api.dev_sign_in`` is on
(default: on for the embedded default, off in production and tests unless set), and it
answers only callers on loopback, in a request the browser marks as the page's own
(``Sec-Fetch-Site: same-origin``, or an ``Origin`` that is this server's): another
site's page, a rebound name (refused before, by the trusted-host rule) or a client that
proves no origin gets 403. A script makes its token with ``export-center token``. In
production the page takes a token from the host application instead (docs: README
"Download center").
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict, Field

from export_center.api.deps import RuntimeDep, strict_query
from export_center.api.guards import host_patterns, request_authority
from export_center.api.openapi import BODY, errors
from export_center.auth import (
    ADMIN,
    DOWNLOAD_ALL,
    TENANT_ID_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
    WEBHOOKS_MANAGE,
    issue_token,
)
from export_center.errors import Forbidden, NotFound
from export_center.hosts import is_loopback, same_origin

__all__ = ["PAGE_HEADERS", "DevSignIn", "DevToken", "dev_sign_in_enabled", "router"]

router = APIRouter(tags=["download center"], dependencies=[Depends(strict_query)])

DEV_TOKEN_TTL_SECONDS = 8 * 3600

#: Where the page's files are (shipped as package data).
STATIC_DIR = Path(__file__).resolve().parent.parent / "static" / "ui"
#: Headers of the page and of every asset it loads.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
        "object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}
#: The marker in index.html that tells the page who signs it in.
_AUTH_MARKER = b'data-auth="page"'


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    media_type: str
    etag: str


def _asset(body: bytes, media_type: str) -> _Asset:
    return _Asset(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


@lru_cache(maxsize=1)
def _assets() -> dict[str, _Asset]:
    """The page's files by name, read once (about 60 KB in all)."""
    return {
        path.name: _asset(path.read_bytes(), _MEDIA_TYPES[path.suffix])
        for path in sorted(STATIC_DIR.iterdir())
        if path.is_file() and path.suffix in _MEDIA_TYPES
    }


def _answer(asset: _Asset, request: Request, *, vary: bool = False) -> Response:
    """The asset with the page headers; 304 when the browser holds this version.

    ``no-cache`` makes the browser revalidate each load (a 304 costs no body), so a new
    release is picked up at once without versioned file names (no build step).
    """
    headers = {**PAGE_HEADERS, "ETag": asset.etag, "Cache-Control": "no-cache"}
    if vary:
        headers["Vary"] = "Authorization"
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


@router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
@router.api_route("/ui", methods=["GET", "HEAD"], include_in_schema=False)
async def to_page() -> RedirectResponse:
    """The download center lives at /ui/ (relative, so a path prefix of a proxy is kept)."""
    return RedirectResponse("ui/", status_code=307)


# The page and its files are in memory: async handlers answer them on the event loop,
# without a hop through the thread pool the database routes use.
@router.api_route("/ui/", methods=["GET", "HEAD"], include_in_schema=False)
async def page(request: Request) -> Response:
    """The download-center page; ``data-auth="host"`` when a proxy signed the request."""
    index = _assets()["index.html"]
    if "authorization" in request.headers:
        body = index.body.replace(_AUTH_MARKER, b'data-auth="host"', 1)
        index = _asset(body, index.media_type)
    return _answer(index, request, vary=True)


@router.api_route("/ui/{name}", methods=["GET", "HEAD"], include_in_schema=False)
async def page_asset(name: str, request: Request) -> Response:
    """A script, style sheet or icon of the page (only the files shipped with it)."""
    asset = _assets().get(name)
    if asset is None or name == "index.html":
        raise NotFound("no such file of the download center", code="NOT_FOUND")
    return _answer(asset, request)


class DevSignIn(BaseModel):
    """Body of the development sign-in."""

    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1, max_length=USER_ID_MAX_LENGTH, pattern=r"^\S(.*\S)?$")
    tenant: str = Field(min_length=1, max_length=TENANT_ID_MAX_LENGTH, pattern=r"^\S(.*\S)?$")
    app: Literal["PLATFORM", "MERCHANT"] = "PLATFORM"
    role: Literal["user", "admin"] = Field(
        default="user",
        description="admin adds platform:download:all (every task of the tenant and app), "
        "platform:export:admin and platform:webhooks:manage (the tenant's webhook endpoints)",
    )


class DevToken(BaseModel):
    """A bearer token minted by the development sign-in."""

    token: str
    expiresAt: datetime


def dev_sign_in_enabled(runtime: RuntimeDep) -> bool:
    """The setting, or on for the embedded default only."""
    setting = runtime.settings.api.dev_sign_in
    return runtime.settings.environment == "embedded" if setting is None else setting


def _loopback(request: Request) -> bool:
    """True when the caller is on this machine: the TCP peer is a loopback address AND
    the request names this server by a loopback name or address (``Host``). A reverse
    proxy on the same host makes every remote browser a loopback peer; the name it is
    reached by (an allowed production name) tells the two apart."""
    peer = request.client.host if request.client else ""
    try:
        if not ipaddress.ip_address(peer).is_loopback:
            return False
    except ValueError:
        return False
    authority = request_authority(request.scope)
    return authority is not None and is_loopback(authority.host)


@router.get("/api/v1/dev/sign-in", response_model=dict[str, bool], include_in_schema=False)
def dev_sign_in_available(runtime: RuntimeDep, request: Request) -> dict[str, bool]:
    """Whether the page may offer the development sign-in to this caller."""
    return {"available": dev_sign_in_enabled(runtime) and _loopback(request)}


def _same_origin(request: Request, runtime: RuntimeDep) -> bool:
    """True when the browser says the request is the page's own (module docstring)."""
    if request.headers.get("sec-fetch-site", "").strip().lower() == "same-origin":
        return True
    origin = request.headers.get("origin")
    host = request_authority(request.scope)
    if origin is None or host is None:
        return False
    return same_origin(origin, host, host_patterns(runtime.settings))


@router.post(
    "/api/v1/dev/sign-in",
    response_model=DevToken,
    responses=errors(BODY, {403: ["NOT_LOOPBACK", "SAME_ORIGIN_REQUIRED"], 404: ["NOT_FOUND"]}),
)
def dev_sign_in(body: DevSignIn, runtime: RuntimeDep, request: Request) -> DevToken:
    """Embedded default only: mint a token for a user, tenant, app and role (8 hours)."""
    if not dev_sign_in_enabled(runtime):
        raise NotFound("there is no development sign-in here", code="NOT_FOUND")
    if not _loopback(request):
        raise Forbidden(
            "the development sign-in answers only on this machine, to a page opened at a "
            "loopback address or localhost (not through a proxy or another name)",
            code="NOT_LOOPBACK",
        )
    if not _same_origin(request, runtime):
        raise Forbidden(
            "the development sign-in answers only the download center page of this server "
            "(a same-origin request); a script makes its token with `export-center token`",
            code="SAME_ORIGIN_REQUIRED",
        )
    permissions = {t.required_permission for t in runtime.registry}
    if body.role == "admin":
        permissions |= {DOWNLOAD_ALL, ADMIN, WEBHOOKS_MANAGE}
    token = issue_token(
        runtime.settings.jwt_secret,
        user=body.user,
        tenant=body.tenant,
        app_code=body.app,
        permissions=permissions,
        ttl_seconds=DEV_TOKEN_TTL_SECONDS,
        audience=runtime.settings.api.jwt_audience,
    )
    expires = datetime.fromtimestamp(datetime.now(UTC).timestamp() + DEV_TOKEN_TTL_SECONDS, UTC)
    return DevToken(token=token, expiresAt=expires)
