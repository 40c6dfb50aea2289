"""Health, readiness, metrics, the export-type list and the seed-000 order alias."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from export_center import metrics
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, GUARD, errors
from export_center.api.routes.exports import (
    CREATE_ERRORS,
    CREATE_REPLAYED,
    TASK_ERRORS,
    create_export,
    task_public,
)
from export_center.api.schemas import (
    ExportAccepted,
    ExportCreate,
    ExportPublic,
    ExportTypePublic,
    LegacyOrderExport,
    MePublic,
    ParameterPublic,
)
from export_center.api.service import visible_task
from export_center.auth import ADMIN, DOWNLOAD_ALL
from export_center.errors import Conflict, Forbidden, RequestError
from export_center.registry import RegistryError

__all__ = ["router"]

router = APIRouter(dependencies=[Depends(strict_query)])


@router.get("/healthz", tags=["system"])
def healthz() -> dict[str, str]:
    """Answers once the process has started."""
    return {"status": "ok"}


router.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False)


@router.get(
    "/readyz",
    tags=["system"],
    responses={503: {"description": "The database does not answer"}},
)
def readyz(runtime: RuntimeDep, response: Response) -> dict[str, object]:
    """Ready when the database answers and the registry is loaded."""
    try:
        with runtime.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception:
        response.status_code = 503
        return {"status": "database unavailable"}
    return {"status": "ready", "exportTypes": len(runtime.registry.types)}


router.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)


@router.get("/metrics", tags=["system"])
def prometheus_metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics; database gauges are computed with the database clock."""
    metrics.refresh_gauges(runtime.engine)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.get(
    "/api/v1/export-types",
    response_model=list[ExportTypePublic],
    tags=["exports"],
    responses=errors(AUTH),
)
def export_types(user: CurrentUser, runtime: RuntimeDep) -> list[ExportTypePublic]:
    """Export types the caller may create (permission, app scope, enabled)."""
    return [
        ExportTypePublic(
            exportType=t.code,
            title=t.title,
            titleZh=t.title_zh or t.title,
            formats=["csv", "xlsx"],
            parameters=[
                ParameterPublic(
                    name=p.name,
                    type=p.type,
                    required=p.required,
                    values=list(p.values) if p.values else None,
                    title=p.title or p.name,
                    titleZh=p.title_zh or p.title or p.name,
                )
                for p in t.parameters
            ],
            dateRange=list(t.date_range) if t.date_range else None,
            maxRows=t.max_rows,
        )
        for t in runtime.registry
        if t.enabled and user.can(t.required_permission) and user.app_code == t.app_scope
    ]


@router.get("/api/v1/me", response_model=MePublic, tags=["exports"], responses=errors(AUTH))
def me(user: CurrentUser, request: Request) -> MePublic:
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


@router.post(
    "/api/v1/admin/registry/reload",
    tags=["admin"],
    responses=errors(GUARD, AUTH, {403: ["PERMISSION_DENIED"], 409: ["REGISTRY_INVALID"]}),
)
def reload_registry(user: CurrentUser, runtime: RuntimeDep) -> dict[str, object]:
    """Reload the export-type file; an invalid file keeps the old registry (409)."""
    if not user.can(ADMIN):
        raise Forbidden(
            "reloading the registry needs the admin permission", code="PERMISSION_DENIED"
        )
    try:
        registry = runtime.reload_registry()
    except RegistryError as exc:
        raise Conflict(f"kept the previous registry: {exc}", code="REGISTRY_INVALID") from None
    return {"status": "reloaded", "exportTypes": sorted(registry.types)}


@router.post(
    "/api/orders/export",
    status_code=202,
    response_model=ExportAccepted,
    tags=["orders"],
    responses={**CREATE_REPLAYED, **CREATE_ERRORS},
)
def legacy_order_export(
    body: LegacyOrderExport,
    user: CurrentUser,
    runtime: RuntimeDep,
    response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> ExportAccepted:
    """Seed 000's order export: an alias of the ORDERS type."""
    parameters = {k: v for k, v in {"from": body.from_, "to": body.to}.items() if v is not None}
    create = ExportCreate(
        exportType="ORDERS",
        format=body.format,
        taskName="Orders export",
        parameters=parameters,
        requestId=body.requestId,
    )
    try:
        return create_export(
            runtime, user, create, idempotency_key, response, progress_prefix="/api/orders/export/"
        )
    except RequestError as exc:
        # The legacy body has from/to at the top level: name the field the caller sent.
        if exc.field in ("parameters.from", "parameters.to"):
            exc.field = exc.field.removeprefix("parameters.")
        raise


@router.get(
    "/api/orders/export/{task_id}",
    response_model=ExportPublic,
    tags=["orders"],
    responses=TASK_ERRORS,
)
def legacy_order_progress(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> ExportPublic:
    """Seed 000's progress query: same answer as ``GET /api/v1/exports/{taskId}``."""
    return task_public(runtime, visible_task(runtime, task_id, user), user)
