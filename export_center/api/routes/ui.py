"""The download-center web page's server side: the development sign-in.

On the embedded default a person signs in to the page with a user, a tenant, an app and
a role; the server mints a bearer token for them with this installation's key. This is
for trying the product on one machine: it exists only when ``api.dev_sign_in`` is on
(default: on for the embedded default, off in production and tests unless set), and it
answers only callers on loopback. In production the page takes a token from the host
application instead (docs: README "Download center").
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from export_center.api.deps import RuntimeDep, strict_query
from export_center.api.openapi import BODY, errors
from export_center.auth import ADMIN, DOWNLOAD_ALL, issue_token
from export_center.errors import Forbidden, NotFound

__all__ = ["DevSignIn", "DevToken", "dev_sign_in_enabled", "router"]

router = APIRouter(tags=["download center"], dependencies=[Depends(strict_query)])

DEV_TOKEN_TTL_SECONDS = 8 * 3600


class DevSignIn(BaseModel):
    """Body of the development sign-in."""

    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1, max_length=128, pattern=r"^\S(.*\S)?$")
    tenant: str = Field(min_length=1, max_length=64, pattern=r"^\S(.*\S)?$")
    app: Literal["PLATFORM", "MERCHANT"] = "PLATFORM"
    role: Literal["user", "admin"] = Field(
        default="user",
        description="admin adds platform:download:all (every task of the tenant and app) "
        "and platform:export:admin",
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
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@router.get("/api/v1/dev/sign-in", response_model=dict[str, bool], include_in_schema=False)
def dev_sign_in_available(runtime: RuntimeDep, request: Request) -> dict[str, bool]:
    """Whether the page may offer the development sign-in to this caller."""
    return {"available": dev_sign_in_enabled(runtime) and _loopback(request)}


@router.post(
    "/api/v1/dev/sign-in",
    response_model=DevToken,
    responses=errors(BODY, {403: ["NOT_LOOPBACK"], 404: ["NOT_FOUND"]}),
)
def dev_sign_in(body: DevSignIn, runtime: RuntimeDep, request: Request) -> DevToken:
    """Embedded default only: mint a token for a user, tenant, app and role (8 hours)."""
    if not dev_sign_in_enabled(runtime):
        raise NotFound("there is no development sign-in here", code="NOT_FOUND")
    if not _loopback(request):
        raise Forbidden(
            "the development sign-in answers only on this machine (loopback)",
            code="NOT_LOOPBACK",
        )
    permissions = {t.required_permission for t in runtime.registry}
    if body.role == "admin":
        permissions |= {DOWNLOAD_ALL, ADMIN}
    token = issue_token(
        runtime.settings.jwt_secret,
        user=body.user,
        tenant=body.tenant,
        app_code=body.app,
        permissions=permissions,
        ttl_seconds=DEV_TOKEN_TTL_SECONDS,
    )
    expires = datetime.fromtimestamp(datetime.now(UTC).timestamp() + DEV_TOKEN_TTL_SECONDS, UTC)
    return DevToken(token=token, expiresAt=expires)
