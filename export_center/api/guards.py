"""The API's trust boundary: trusted hosts, cross-site requests, and the security headers.

Three ASGI middlewares, outermost first (:func:`export_center.api.app.create_app` adds
them around every route, ``/ui/``, ``/docs``, ``/healthz``, ``/readyz``, ``/metrics`` and
the mounted provider routes included):

* :class:`SecurityHeaders` adds ``X-Content-Type-Options: nosniff``,
  ``X-Frame-Options: DENY`` and a Content-Security-Policy with ``frame-ancestors
  'none'`` to every answer (for HTML added to the route's own policy when it has
  none), ``Referrer-Policy: no-referrer`` to every HTML answer, and
  ``Cache-Control: no-store`` to every answer of ``/api/`` and ``/internal/`` that
  does not set its own (they carry tokens, signed download links, signed cursors, or
  data of one user).
* :class:`HostGuard` answers 421 ``UNTRUSTED_HOST`` to a request whose ``Host`` is not
  one of this server's names (:mod:`export_center.hosts`: loopback names and addresses,
  ``api.allowed_hosts``, the host of ``api.public_base_url``), and 400 ``HOST_REQUIRED``
  to one without exactly one readable ``Host`` (only HTTP/1.0 may omit it; no browser
  does). 421 Misdirected Request is RFC 9110's answer for "this server does not serve
  that authority", which is what a rebound name is.
* :class:`CrossSiteGuard` answers 403 ``CROSS_SITE_REQUEST`` to what another site's page
  makes the browser send (:func:`cross_site_refusal`): in the host-proxy mode the
  proxy adds ``Authorization`` to every request, so the browser's requests are signed
  in like requests with a cookie. Clients that are not browsers send neither
  ``Origin`` nor ``Sec-Fetch-Site`` and are not concerned.

Starlette's ``TrustedHostMiddleware`` is not used: it answers in plain text, keeps IPv6
brackets and trailing dots in the names it compares, and knows no loopback rule.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from export_center.hosts import Authority, HostPatterns, parse_authority, same_origin
from export_center.settings import Settings

__all__ = [
    "HOST_SCOPE_KEY",
    "CrossSiteGuard",
    "HostGuard",
    "SecurityHeaders",
    "cross_site_refusal",
    "guard_stack",
    "host_patterns",
    "request_authority",
]

#: The scope key under which :class:`HostGuard` leaves the request's parsed ``Host``.
HOST_SCOPE_KEY = "export_center.host"
#: The frame rule of every HTML answer (the page's own policy already has it).
FRAME_ANCESTORS = "frame-ancestors 'none'"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_NO_STORE_PREFIXES = ("/api/", "/internal/")


def _header(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers") or [] if key == name]


def host_patterns(settings: Settings) -> HostPatterns:
    """This server's configured names: ``api.allowed_hosts`` and the host of
    ``api.public_base_url`` (loopback names need no entry)."""
    names = list(settings.api.allowed_hosts)
    base = settings.api.public_base_url
    if base:
        authority = parse_authority(base.split("://", 1)[-1].split("/", 1)[0])
        if authority is not None:
            names.append(authority.host)
    return HostPatterns(names)


def request_authority(scope: Scope) -> Authority | None:
    """The request's ``Host`` as :class:`HostGuard` parsed it (or parsed now)."""
    found = scope.get(HOST_SCOPE_KEY)
    if isinstance(found, Authority):
        return found
    hosts = _header(scope, b"host")
    return parse_authority(hosts[0]) if len(hosts) == 1 else None


async def reply(
    send: Send,
    status: int,
    code: str,
    message: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer ``{code, message, field: null}`` with ``status`` (a guard's own answer)."""
    body = orjson.dumps({"code": code, "message": message, "field": None})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """Adds the headers of the module docstring to every answer of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        no_store = str(scope.get("path", "")).startswith(_NO_STORE_PREFIXES)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers") or [])
                _add_headers(MutableHeaders(raw=message["headers"]), no_store=no_store)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _add_headers(headers: MutableHeaders, *, no_store: bool) -> None:
    headers.setdefault("x-content-type-options", "nosniff")
    # Every answer, not only the HTML ones: a JSON answer opened in another site's
    # frame (the host-proxy mode adds Authorization to it) is shown to nobody.
    headers.setdefault("x-frame-options", "DENY")
    if no_store:
        headers.setdefault("cache-control", "no-store")
    if not headers.get("content-type", "").lower().startswith("text/html"):
        if "content-security-policy" not in headers:
            headers["content-security-policy"] = FRAME_ANCESTORS
        return
    headers.setdefault("referrer-policy", "no-referrer")
    policy = headers.get("content-security-policy")
    if policy is None:
        headers["content-security-policy"] = FRAME_ANCESTORS
    elif "frame-ancestors" not in policy:
        headers["content-security-policy"] = f"{policy.rstrip('; ')}; {FRAME_ANCESTORS}"


class HostGuard:
    """Refuses requests whose ``Host`` is not one of this server's names (module docstring).

    Args:
        app: the ASGI app behind the guard.
        patterns: the configured names (loopback ones are always trusted).
    """

    def __init__(self, app: ASGIApp, *, patterns: HostPatterns) -> None:
        self.app = app
        self.patterns = patterns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts = _header(scope, b"host")
        authority = parse_authority(hosts[0]) if len(hosts) == 1 else None
        if authority is not None and self.patterns.trusts(authority.host):
            scope[HOST_SCOPE_KEY] = authority
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if authority is None:
            await reply(
                send,
                400,
                "HOST_REQUIRED",
                "send exactly one Host header naming this server (host or host:port)",
            )
            return
        await reply(
            send,
            421,
            "UNTRUSTED_HOST",
            f"this server does not answer to the name {authority.host!r}; if it is one of "
            "its names, add it to EXPORT_CENTER_API__ALLOWED_HOSTS",
        )


def cross_site_refusal(
    *,
    method: str,
    origin: str | None,
    fetch_site: str | None,
    fetch_mode: str | None,
    fetch_dest: str | None,
    host: Authority | None,
    patterns: HostPatterns,
) -> str | None:
    """Why a request comes from another site's page, or None when it may be answered.

    The rule (Fetch Metadata ``Sec-Fetch-*`` first, ``Origin`` for browsers that do
    not send it):

    * an unsafe method (anything but GET, HEAD, OPTIONS) is refused when
      ``Sec-Fetch-Site`` is ``cross-site`` or ``same-site`` (another origin of the
      site: another port of 127.0.0.1, another subdomain, the same name over plain
      http), whatever the ``Origin``; and when an ``Origin`` is sent that is not this
      server's own (:func:`export_center.hosts.same_origin`; ``null`` never is), for
      browsers that send no Fetch Metadata. The API answers no CORS preflight, so no
      page of another origin has a legitimate unsafe request to make;
    * a safe method is refused when ``Sec-Fetch-Site`` is ``cross-site`` and the
      request is not a navigation (``Sec-Fetch-Mode: navigate`` to a document or a
      frame): a link in another site or in an e-mail opens a download or the page,
      while another site's ``fetch``, ``<img>`` or ``<script>`` gets nothing;
    * a request with neither header (a script, curl, a provider client) is answered.

    Args:
        method: the HTTP method.
        origin: the ``Origin`` header, if one was sent.
        fetch_site: ``Sec-Fetch-Site``, lowercase.
        fetch_mode: ``Sec-Fetch-Mode``, lowercase.
        fetch_dest: ``Sec-Fetch-Dest``, lowercase.
        host: the request's ``Host``.
        patterns: this server's configured names.

    Returns:
        A sentence for the 403 answer, or None.
    """
    if method.upper() not in _SAFE_METHODS:
        if fetch_site in ("cross-site", "same-site"):
            return f"this request comes from another site's page (Sec-Fetch-Site: {fetch_site})"
        own = origin is not None and host is not None and same_origin(origin, host, patterns)
        if origin is not None and not own:
            return f"this request comes from another site's page (Origin: {origin[:100]})"
        return None
    if fetch_site == "cross-site":
        navigation = fetch_mode == "navigate" and fetch_dest not in ("object", "embed")
        if not navigation:
            return "another site's page may only link to this server, not read from it"
    return None


class CrossSiteGuard:
    """Refuses requests another site's page makes (:func:`cross_site_refusal`).

    Args:
        app: the ASGI app behind the guard.
        patterns: this server's configured names (their origins are its own).
    """

    def __init__(self, app: ASGIApp, *, patterns: HostPatterns) -> None:
        self.app = app
        self.patterns = patterns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = cross_site_refusal(
            method=str(scope["method"]),
            origin=_one(scope, b"origin"),
            fetch_site=_lower(_one(scope, b"sec-fetch-site")),
            fetch_mode=_lower(_one(scope, b"sec-fetch-mode")),
            fetch_dest=_lower(_one(scope, b"sec-fetch-dest")),
            host=request_authority(scope),
            patterns=self.patterns,
        )
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await reply(
            send,
            403,
            "CROSS_SITE_REQUEST",
            f"{refusal}; open the download center on this server instead",
        )


def _one(scope: Scope, name: bytes) -> str | None:
    """The header's value; several values count as the first (browsers send one)."""
    values = _header(scope, name)
    return values[0] if values else None


def _lower(value: str | None) -> str | None:
    return value.strip().lower() if value is not None else None


def guard_stack(app: ASGIApp, patterns: HostPatterns) -> Any:
    """``app`` inside the three guards, in their order (for apps other than the API's,
    such as the sample-provider child process)."""
    return SecurityHeaders(HostGuard(CrossSiteGuard(app, patterns=patterns), patterns=patterns))
