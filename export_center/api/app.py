"""``create_app(settings)``: the FastAPI application and its one error mapping.

Every :class:`~export_center.errors.RequestError` and every request-validation error
becomes a 4xx JSON body ``{code, message, field}``; nothing the caller sends can make
a 500 (CONVENTIONS: exceptions mapped to HTTP in exactly one place). The database not
answering (SQLAlchemy's ``OperationalError``, ``InterfaceError``, an invalidated
connection, the pool's ``TimeoutError``) is 503 ``DATABASE_UNAVAILABLE`` with
``Retry-After``, on every route; any other fault is a JSON 500 ``INTERNAL_ERROR``, never
a plain-text page.

Around the routes (outermost first): :class:`~export_center.api.guards.SecurityHeaders`,
:class:`~export_center.api.guards.HostGuard`,
:class:`~export_center.api.guards.CrossSiteGuard`,
:class:`~export_center.api.compression.Compression` (gzip) and
:class:`~export_center.api.middleware.BodyGuard`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from export_center.api.compression import Compression
from export_center.api.guards import CrossSiteGuard, HostGuard, SecurityHeaders, host_patterns
from export_center.api.middleware import BodyGuard
from export_center.api.openapi import install_docs
from export_center.api.routes import (
    admin,
    admin_approvals,
    admin_downloads,
    approvals,
    downloads,
    export_types,
    exports,
    legacy,
    me,
    notifications,
    preview,
    quotas,
    schedules,
    system,
    ui,
    webhooks,
)
from export_center.errors import RequestError, StorageError, TooManyActiveTasks
from export_center.runtime import Runtime
from export_center.settings import Settings

__all__ = ["DATABASE_RETRY_AFTER_SECONDS", "create_app"]

log = logging.getLogger(__name__)

#: ``Retry-After`` of a 503 while the database does not answer (a restart takes seconds).
DATABASE_RETRY_AFTER_SECONDS = 5
#: Headers of the answers made outside the middlewares (the 500 of the error middleware).
_PLAIN_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}

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
    """The dotted field path of an error location, without its leading source (``body``,
    ``query``, ``path``, ``header``): a body field may itself be called ``header``."""
    if loc and loc[0] in ("body", "query", "path", "header"):
        loc = loc[1:]
    return ".".join(str(p) for p in loc) or None


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
    elif kind == "model_attributes_type":  # a field that must be an object is not one
        code = "INVALID_TYPE"
        message = f"{field} must be a JSON object"
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
        # No redirect from /x/ to /x: it would copy a signed link's query to whatever
        # host the Host header names.
        redirect_slashes=False,
    )
    install_docs(app)

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, exc: RequestError) -> JSONResponse:
        headers = {}
        if exc.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="export-center"'
        elif isinstance(exc, TooManyActiveTasks):
            headers["Retry-After"] = str(exc.retry_after)
        body: dict[str, str | None] = {"code": exc.code, "message": exc.message}
        body["field"] = exc.field
        if exc.message_zh is not None:
            body["messageZh"] = exc.message_zh
        return JSONResponse(body, status_code=exc.status, headers=headers)

    @app.exception_handler(StorageError)
    async def _storage_error(_: Request, exc: StorageError) -> JSONResponse:
        # The store is down or refuses: the caller can only try again (no detail: the
        # message may name the bucket).
        log.warning("storage error while serving a request: %s", exc.message)
        return JSONResponse(
            {
                "code": "STORAGE_UNAVAILABLE",
                "message": "the file storage does not answer; try again in a few seconds",
                "field": None,
            },
            status_code=503,
            headers={"Retry-After": "5"},
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
        message = str(exc.detail)
        if exc.status_code == 400:  # Starlette's "There was an error parsing the body"
            message = (
                "the request body cannot be read as JSON: it must be UTF-8, nested at "
                "most a few hundred levels, with numbers of at most a few thousand digits"
            )
        return JSONResponse(
            {"code": code, "message": message, "field": None},
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    _database_errors(app)
    for module in (
        preview,
        exports,
        export_types,
        me,
        quotas,
        schedules,
        approvals,
        admin_approvals,
        admin,
        admin_downloads,
        downloads,
        notifications,
        webhooks,
        legacy,
        system,
        ui,
    ):
        app.include_router(module.router)
    patterns = host_patterns(settings)
    # add_middleware wraps: the last one added is the outermost.
    app.add_middleware(BodyGuard)
    app.add_middleware(Compression)
    app.add_middleware(CrossSiteGuard, patterns=patterns)
    app.add_middleware(HostGuard, patterns=patterns)
    app.add_middleware(SecurityHeaders)
    return app


def _outage(exc: Exception) -> bool:
    """True when a database error means the database does not answer (retry later),
    not that a statement was wrong."""
    if isinstance(exc, (OperationalError, InterfaceError, PoolTimeout)):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def _database_errors(app: FastAPI) -> None:
    """Map database faults: 503 while it does not answer, a JSON 500 otherwise."""

    @app.exception_handler(PoolTimeout)
    @app.exception_handler(DBAPIError)
    async def _database_error(request: Request, exc: Exception) -> JSONResponse:
        if not _outage(exc):
            return await _internal_error(request, exc, logged=False)
        # One line, no traceback: during an outage every request says the same.
        log.warning(
            "the database does not answer (%s %s): %s",
            request.method,
            request.url.path,
            str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__,
        )
        return JSONResponse(
            {
                "code": "DATABASE_UNAVAILABLE",
                "message": "the database does not answer; try again in a few seconds",
                "field": None,
            },
            status_code=503,
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
        )

    @app.exception_handler(Exception)
    async def _internal_error(
        request: Request, exc: Exception, *, logged: bool = True
    ) -> JSONResponse:
        # Starlette logs the traceback of what reaches this handler; a database error
        # answered above is logged here.
        if not logged:
            log.error("internal error while serving %s", request.url.path, exc_info=exc)
        return JSONResponse(
            {
                "code": "INTERNAL_ERROR",
                "message": "the server failed to answer this request; it has been logged",
                "field": None,
            },
            status_code=500,
            headers=_PLAIN_HEADERS,
        )
