"""``create_app(settings)``: the FastAPI application and its one error mapping.

Every :class:`~export_center.errors.RequestError` and every request-validation error
becomes a 4xx JSON body ``{code, message, field}``; nothing the caller sends can make
a 500 (CONVENTIONS: exceptions mapped to HTTP in exactly one place).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from export_center.api.openapi import install_docs
from export_center.api.routes import exports, system, ui
from export_center.errors import RequestError, TooManyActiveTasks
from export_center.runtime import Runtime
from export_center.settings import Settings

__all__ = ["create_app"]

log = logging.getLogger(__name__)

_CODES = {
    "missing": "MISSING_FIELD",
    "extra_forbidden": "UNKNOWN_FIELD",
    "json_invalid": "MALFORMED_JSON",
    "string_too_long": "TOO_LONG",
    "string_too_short": "TOO_SHORT",
    "model_attributes_type": "INVALID_BODY",
    "dict_type": "INVALID_TYPE",
    "string_type": "INVALID_TYPE",
}


def _field(loc: tuple[Any, ...]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or None


def _validation_body(exc: RequestValidationError) -> tuple[int, dict[str, Any]]:
    errors = exc.errors()
    first = errors[0] if errors else {"type": "invalid", "loc": (), "msg": "invalid request"}
    kind = str(first.get("type", "invalid"))
    code = _CODES.get(kind, "INVALID_VALUE")
    status = 400 if kind == "json_invalid" else 422
    field = _field(tuple(first.get("loc", ())))
    if kind == "json_invalid":
        message = "the request body is not valid JSON"
        field = None
    elif field is None and kind in ("missing", "model_attributes_type", "dict_type"):
        status, code = 400, "BODY_REQUIRED"
        message = "send a JSON object body with content-type application/json"
    elif kind == "missing":
        message = f"{field} is required"
    elif kind == "extra_forbidden":
        message = f"{field} is not a known field"
    else:
        message = f"{field}: {first.get('msg', 'invalid')}" if field else str(first.get("msg"))
    return status, {"code": code, "message": message, "field": field}


def create_app(
    settings: Settings | None = None,
    *,
    runtime_factory: Callable[[Settings], Runtime] | None = None,
    start_loops: bool = True,
    mount: Callable[[FastAPI, Runtime], None] | None = None,
) -> FastAPI:
    """Build the API.

    Args:
        settings: process settings (default: from the environment).
        runtime_factory: builds the runtime inside the lifespan (default: ``Runtime``).
        start_loops: start publisher and consumer with the app.
        mount: called with the app and runtime to mount extra routers (sample providers).
    """
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = (runtime_factory or Runtime)(settings)
        app.state.runtime = runtime
        if mount is not None:
            mount(app, runtime)
        if start_loops:
            runtime.start()
        try:
            yield
        finally:
            runtime.stop()

    app = FastAPI(
        title="Export Center",
        version="0.1.0",
        description="Background data exports with signed, expiring download links. "
        "Sign in with **Authorize** (a bearer JWT; `export-center token --user alice "
        "--tenant acme` prints one on the embedded default).",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    install_docs(app)

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, exc: RequestError) -> JSONResponse:
        headers = {}
        if exc.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="export-center"'
        elif isinstance(exc, TooManyActiveTasks):
            headers["Retry-After"] = str(exc.retry_after)
        return JSONResponse(
            {"code": exc.code, "message": exc.message, "field": exc.field},
            status_code=exc.status,
            headers=headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        status, body = _validation_body(exc)
        return JSONResponse(body, status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "INVALID_BODY", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(
            exc.status_code, "HTTP_ERROR"
        )
        return JSONResponse(
            {"code": code, "message": str(exc.detail), "field": None},
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    app.include_router(exports.router)
    app.include_router(system.router)
    app.include_router(ui.router)
    return BodyGuard(app)  # type: ignore[return-value]


MAX_BODY_BYTES = 64 * 1024
#: API paths a caller may POST to without a token (the development sign-in).
_ANONYMOUS_POSTS = frozenset({"/api/v1/dev/sign-in"})


class BodyGuard:
    """ASGI middleware in front of the API: request bodies over 64 KB answer 413 (counted
    while reading, whatever Content-Length says), and an API call that sends a body
    without a bearer token answers 401 before the body is read."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.state = app.state
        self.router = app.router

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
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
        if length.isdigit() and int(length) > MAX_BODY_BYTES and not path.startswith("/internal/"):
            await _reply(send, 413, "BODY_TOO_LARGE", "the request body may have at most 64 KB")
            return
        if path.startswith("/internal/"):
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
        whole = {"type": "http.request", "body": data, "more_body": False}
        handed = False

        async def replay() -> Any:
            nonlocal handed
            if not handed:
                handed = True
                return whole
            return await receive()  # after the body: a disconnect, when it comes

        await self.app(scope, replay, send)


def _is_json(headers: dict[bytes, bytes]) -> bool:
    """True when the request says its body is JSON (``application/json`` or ``+json``)."""
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return kind == b"application/json" or (
        kind.startswith(b"application/") and kind.endswith(b"+json")
    )


async def _reply(
    send: Any, status: int, code: str, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
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
