"""``/api/v1/admin``: operator actions (the admin permission)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from export_center.api import service
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, GUARD, errors
from export_center.auth import ADMIN
from export_center.errors import Conflict, Forbidden
from export_center.registry import RegistryError

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/admin", tags=["admin"], dependencies=[Depends(strict_query)])


@router.post(
    "/registry/reload",
    responses=errors(GUARD, AUTH, {403: ["PERMISSION_DENIED"], 409: ["REGISTRY_INVALID"]}),
)
def reload_registry(user: CurrentUser, runtime: RuntimeDep) -> dict[str, object]:
    """Reload the export-type file; an invalid file keeps the old registry (409)."""
    if not user.can(ADMIN):
        raise Forbidden(
            "reloading the registry needs the admin permission", code="PERMISSION_DENIED"
        )
    try:
        registry = runtime.reload_registry(actor=service.actor_of(user))
    except RegistryError as exc:
        raise Conflict(f"kept the previous registry: {exc}", code="REGISTRY_INVALID") from None
    return {"status": "reloaded", "exportTypes": sorted(registry.types)}
