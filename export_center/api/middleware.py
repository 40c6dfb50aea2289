"""Middleware of the API: the request-body guard."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from export_center.api.guards import reply as _reply

__all__ = ["MAX_BODY_BYTES", "BodyGuard"]

MAX_BODY_BYTES = 64 * 1024
#: API paths a caller may POST to without a token (the development sign-in).
_ANONYMOUS_POSTS = frozenset({"/api/v1/dev/sign-in"})
#: API paths whose body the route streams itself (a file uploaded to be traced).
STREAMED_POSTS = frozenset({"/api/v1/admin/trace/file"})


class BodyGuard:
    """ASGI middleware in front of the API (``app.add_middleware(BodyGuard)``).

    For every request that may carry a body (not GET, HEAD or OPTIONS):

    * an ``/api/`` call without a bearer token answers 401 before its body is read
      (except the development sign-in);
    * a body over 64 KB answers 413, counted while reading whatever Content-Length
      says (chunked bodies too); provider paths (``/internal/``) are left to the
      provider SDK, which checks the service token before it reads and caps the body
      itself (``providers.sdk.MAX_BATCH_REQUEST_BYTES``);
    * a non-empty ``/api/`` body that is not declared JSON answers 415.

    Otherwise the whole body (at most 64 KB) is handed to the app in one message.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        path = scope.get("path", "")
        if (
            path.startswith("/api/")
            and path not in _ANONYMOUS_POSTS
            and b"authorization" not in headers
        ):
            await _reply(
                send,
                401,
                "UNAUTHORIZED",
                "a bearer token is required",
                [(b"www-authenticate", b'Bearer realm="export-center"')],
            )
            return
        length = headers.get(b"content-length", b"0")
        streamed = path.startswith("/internal/") or path in STREAMED_POSTS
        if length.isdigit() and int(length) > MAX_BODY_BYTES and not streamed:
            await _reply(send, 413, "BODY_TOO_LARGE", "the request body may have at most 64 KB")
            return
        if streamed:
            await self.app(scope, receive, send)
            return
        # Read the whole body first (at most 64 KB), whatever Content-Length says or
        # when the body is chunked, then hand it to the app in one message.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body = message.get("body", b"")
            seen += len(body)
            if seen > MAX_BODY_BYTES:
                await _reply(send, 413, "BODY_TOO_LARGE", "the request body may have at most 64 KB")
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        data = b"".join(chunks)
        if data.strip() and path.startswith("/api/") and not _is_json(headers):
            await _reply(
                send,
                415,
                "UNSUPPORTED_MEDIA_TYPE",
                "send the body as JSON with the header content-type: application/json",
            )
            return
        duplicate = _duplicate_key(data) if path.startswith("/api/") else None
        if duplicate is not None:
            await _reply(send, 400, "DUPLICATE_KEY", f"the JSON body names {duplicate!r} twice")
            return
        whole = {"type": "http.request", "body": data, "more_body": False}
        handed = False

        async def replay() -> Any:
            nonlocal handed
            if not handed:
                handed = True
                return whole
            return await receive()  # after the body: a disconnect, when it comes

        await self.app(scope, replay, send)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


def _duplicate_key(data: bytes) -> str | None:
    """The first key an object of the JSON body names twice, or None. JSON parsers keep
    the last value silently; a body like ``{"exportType": "A", "exportType": "B"}`` is
    refused instead of guessed. A body that is not JSON is left to the route."""
    try:
        json.loads(data, object_pairs_hook=_no_duplicates)
    except _Duplicate as exc:
        return exc.key
    except (ValueError, RecursionError):
        return None
    return None


def _is_json(headers: dict[bytes, bytes]) -> bool:
    """True when the request says its body is JSON (``application/json`` or ``+json``)."""
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return kind == b"application/json" or (
        kind.startswith(b"application/") and kind.endswith(b"+json")
    )
