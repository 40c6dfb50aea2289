"""FastAPI dependencies: the runtime and the caller's identity."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Annotated

from fastapi import Depends, Header, Request, Security
from fastapi.dependencies.models import Dependant
from fastapi.security import HTTPBearer

from export_center.auth import Identity, decode_token, language_of
from export_center.errors import RequestError, Unauthorized
from export_center.ids import trace_id_of
from export_center.repository.schedules import PRINCIPAL_REFRESH_SECONDS, touch_principal
from export_center.runtime import Runtime

__all__ = [
    "CurrentUser",
    "IdempotencyKey",
    "OptionalUser",
    "RuntimeDep",
    "get_runtime",
    "idempotency_key",
    "record_principal",
    "strict_query",
]


def get_runtime(request: Request) -> Runtime:
    """The process runtime owned by the app's lifespan."""
    return request.app.state.runtime  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]

#: The bearer scheme as OpenAPI describes it (Swagger UI's "Authorize"); the header is
#: parsed by :func:`_bearer`, which answers the API's own 401 codes.
bearer_scheme = HTTPBearer(
    auto_error=False,
    bearerFormat="JWT",
    description="HS256 JWT with sub, tenant, app and perms; `export-center token` makes one.",
)
_Scheme = Security(bearer_scheme)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("use the Authorization: Bearer <token> header", code="TOKEN_INVALID")
    return token.strip()


class _SeenPrincipals:
    """When this process last recorded each user's claims (``export_principal``), so
    that an authenticated call writes the row at most once a minute per user and
    unchanged claims (a token with other permissions is written at once)."""

    _MAX = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], tuple[tuple[object, ...], float]] = {}

    @staticmethod
    def _claims(user: Identity) -> tuple[object, ...]:
        return (user.app_code, user.permissions, user.email, user.language)

    def due(self, user: Identity) -> bool:
        key = (user.tenant, user.user)
        with self._lock:
            last = self._seen.get(key)
        if last is None:
            return True
        claims, at = last
        fresh = time.monotonic() - at < PRINCIPAL_REFRESH_SECONDS
        return not (fresh and claims == self._claims(user))

    def mark(self, user: Identity) -> None:
        with self._lock:
            if len(self._seen) >= self._MAX:
                self._seen.clear()
            self._seen[user.tenant, user.user] = (self._claims(user), time.monotonic())


_SEEN = _SeenPrincipals()


def record_principal(runtime: Runtime, user: Identity) -> None:
    """Record what the token says of ``user`` (app, permissions, e-mail, language) in
    ``export_principal``, at most once a minute per user unless the claims changed: a
    schedule checks its owner's latest permissions there when it fires (tokens are not
    kept), and a notification finds the owner's address and language there. An absent
    ``email`` or language keeps the stored one."""
    if not _SEEN.due(user):
        return
    with runtime.engine.begin() as conn:
        touch_principal(conn, user, email=user.email, language=user.language)
    _SEEN.mark(user)


def _with_page_language(request: Request, user: Identity) -> Identity:
    """``user`` with the language of the request's ``Accept-Language`` when the token
    names none (a person's browser says which language they read)."""
    if user.language is not None:
        return user
    language = language_of(request.headers.get("accept-language"))
    return user if language is None else dataclasses.replace(user, language=language)


def current_user(request: Request, runtime: RuntimeDep, _: object = _Scheme) -> Identity:
    """The caller from the bearer token (recorded with :func:`record_principal`); 401
    when absent or invalid."""
    token = _bearer(request)
    if token is None:
        raise Unauthorized("a bearer token is required", code="UNAUTHORIZED")
    user = _with_page_language(request, _decode(runtime, token))
    record_principal(runtime, user)
    return user


def _decode(runtime: Runtime, token: str) -> Identity:
    api = runtime.settings.api
    return decode_token(
        runtime.settings.jwt_secret,
        token,
        leeway_seconds=api.jwt_leeway_seconds,
        audience=api.jwt_audience,
    )


def optional_user(request: Request, runtime: RuntimeDep, _: object = _Scheme) -> Identity | None:
    """The caller when a bearer token is sent, else None (signed download links)."""
    token = _bearer(request)
    return None if token is None else _decode(runtime, token)


CurrentUser = Annotated[Identity, Depends(current_user)]
OptionalUser = Annotated[Identity | None, Depends(optional_user)]


#: Query parameters that take a comma-separated list instead of repeating.
_LIST_PARAMETERS = frozenset({"state", "exportType"})


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameter names a route and its dependencies declare."""
    names = {param.alias for param in dependant.query_params}
    for sub_dependant in dependant.dependencies:
        names |= _query_names(sub_dependant)
    return names


def strict_query(request: Request) -> None:
    """Refuse query parameters the matched route does not declare, or one given twice.

    Every router depends on this, so ``?x=1`` on a create or a retry is a 400 instead of
    being ignored (a typo such as ``?limt=5`` must not silently mean the default).

    Raises:
        RequestError: 400 ``UNKNOWN_PARAMETER`` or ``REPEATED_PARAMETER`` naming it.
    """
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    allowed = _query_names(dependant)
    names = [name for name, _ in request.query_params.multi_items()]
    for name in names:
        if name not in allowed:
            raise RequestError(
                f"unknown query parameter {name!r}"
                + (f"; this endpoint takes {', '.join(sorted(allowed))}" if allowed else ""),
                code="UNKNOWN_PARAMETER",
                field=name,
            )
    for name in names:
        if names.count(name) > 1:
            hint = " (it takes a comma-separated list)" if name in _LIST_PARAMETERS else ""
            raise RequestError(
                f"query parameter {name!r} is given more than once; give it once{hint}",
                code="REPEATED_PARAMETER",
                field=name,
            )


def idempotency_key(
    request: Request,
    declared: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="Idempotency key (same as requestId in the body; UTF-8)",
        ),
    ] = None,
) -> str | None:
    """The ``Idempotency-Key`` header, read as UTF-8 (HTTP hands header bytes over as
    Latin-1, so ``新键`` would otherwise become another key than the same text in
    ``requestId``).

    Raises:
        RequestError: 400 ``REPEATED_HEADER`` when it is sent twice;
            ``INVALID_IDEMPOTENCY_KEY`` when it is not UTF-8 text.
    """
    values = request.headers.getlist("idempotency-key")
    if not values:
        return None
    if len(values) > 1:
        raise RequestError(
            "the Idempotency-Key header is sent more than once; send it once",
            code="REPEATED_HEADER",
            field="Idempotency-Key",
        )
    try:
        return values[0].encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise RequestError(
            "the Idempotency-Key header must be UTF-8 text",
            code="INVALID_IDEMPOTENCY_KEY",
            field="Idempotency-Key",
        ) from None


IdempotencyKey = Annotated[str | None, Depends(idempotency_key)]


def trace_context(
    request: Request,
    declared: Annotated[
        str | None,
        Header(
            alias="traceparent",
            description="W3C trace context; the task keeps its trace id "
            "(an invalid header is ignored and a new trace started)",
            examples=["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
        ),
    ] = None,
) -> str | None:
    """The trace id of the request's ``traceparent`` header, or None to start a new
    trace: when it is absent, sent more than once, or not valid W3C Trace Context."""
    values = request.headers.getlist("traceparent")
    return trace_id_of(values[0]) if len(values) == 1 else None


TraceId = Annotated[str | None, Depends(trace_context)]
