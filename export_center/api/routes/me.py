"""``GET /api/v1/me``: who the bearer token says the caller is."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from export_center.api.deps import CurrentUser, strict_query
from export_center.api.openapi import AUTH, errors
from export_center.api.schemas import MePublic
from export_center.auth import ADMIN, DOWNLOAD_ALL

__all__ = ["router"]

router = APIRouter(tags=["exports"], dependencies=[Depends(strict_query)])


@router.get("/api/v1/me", response_model=MePublic, responses=errors(AUTH))
def me(user: CurrentUser) -> MePublic:
    """Who the bearer token says the caller is, and what it may do."""
    return MePublic(
        user=user.user,
        tenant=user.tenant,
        app=user.app_code,
        permissions=sorted(user.permissions),
        seesAllOwners=user.can(DOWNLOAD_ALL),
        isAdmin=user.can(ADMIN),
        expiresAt=user.expires_at,
    )
