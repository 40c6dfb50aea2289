"""The older order-export shape, kept as an alias of the ORDERS type.

``POST /api/orders/export`` takes ``{requestId, from, to, format}`` and answers
``{taskId, state, progressUrl}``; ``GET /api/orders/export/{taskId}`` answers like the
task detail.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from export_center.api import service
from export_center.api.deps import (
    CurrentUser,
    IdempotencyKey,
    RuntimeDep,
    TraceId,
    strict_query,
)
from export_center.api.present import one_public
from export_center.api.routes.exports import CREATE_ROUTE, TASK_ERRORS, accepted
from export_center.api.schemas import ExportAccepted, ExportCreate, ExportPublic, LegacyOrderExport
from export_center.errors import RequestError

__all__ = ["router"]

router = APIRouter(
    prefix="/api/orders/export", tags=["orders"], dependencies=[Depends(strict_query)]
)


@router.post("", **CREATE_ROUTE)
def legacy_order_export(
    body: LegacyOrderExport,
    user: CurrentUser,
    runtime: RuntimeDep,
    response: Response,
    idempotency_key: IdempotencyKey,
    trace_id: TraceId,
) -> ExportAccepted:
    """The older order export: an alias of the ORDERS type."""
    parameters = {k: v for k, v in {"from": body.from_, "to": body.to}.items() if v is not None}
    create = ExportCreate(
        exportType="ORDERS",
        format=body.format,
        taskName="Orders export",
        parameters=parameters,
        requestId=body.requestId,
    )
    try:
        created = service.create_export(runtime, user, create, idempotency_key, trace_id)
    except RequestError as exc:
        # This body has from/to at the top level: name the field the caller sent.
        if exc.field in ("parameters.from", "parameters.to"):
            exc.field = exc.field.removeprefix("parameters.")
        raise
    return accepted(created, response, "/api/orders/export/")


@router.get("/{task_id}", response_model=ExportPublic, responses=TASK_ERRORS)
def legacy_order_progress(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> ExportPublic:
    """The older progress query: the same answer as ``GET /api/v1/exports/{taskId}``."""
    return one_public(runtime, service.visible_task(runtime, task_id, user), user)
