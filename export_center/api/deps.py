"""FastAPI dependencies: the runtime and the caller's identity."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPBearer

from export_center.auth import Identity, decode_token
from export_center.errors import Unauthorized
from export_center.runtime import Runtime

__all__ = ["CurrentUser", "OptionalUser", "RuntimeDep", "get_runtime"]


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


def current_user(request: Request, runtime: RuntimeDep, _: object = _Scheme) -> Identity:
    """The caller from the bearer token; 401 when absent or invalid."""
    token = _bearer(request)
    if token is None:
        raise Unauthorized("a bearer token is required", code="UNAUTHORIZED")
    return _decode(runtime, token)


def _decode(runtime: Runtime, token: str) -> Identity:
    return decode_token(
        runtime.settings.jwt_secret, token, leeway_seconds=runtime.settings.api.jwt_leeway_seconds
    )


def optional_user(request: Request, runtime: RuntimeDep, _: object = _Scheme) -> Identity | None:
    """The caller when a bearer token is sent, else None (signed download links)."""
    token = _bearer(request)
    return None if token is None else _decode(runtime, token)


CurrentUser = Annotated[Identity, Depends(current_user)]
OptionalUser = Annotated[Identity | None, Depends(optional_user)]
