"""Health, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST

from export_center import metrics, repository
from export_center.api.deps import RuntimeDep, strict_query
from export_center.db import reading

__all__ = ["router"]

router = APIRouter(tags=["system"], dependencies=[Depends(strict_query)])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Answers once the process has started."""
    return {"status": "ok"}


router.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False)


@router.get("/readyz", responses={503: {"description": "The database does not answer"}})
def readyz(runtime: RuntimeDep, response: Response) -> dict[str, object]:
    """Ready when the database answers and the registry is loaded."""
    try:
        with reading(runtime.engine) as conn:
            repository.ping(conn)
    except Exception:
        response.status_code = 503
        return {"status": "database unavailable"}
    return {"status": "ready", "exportTypes": len(runtime.registry.types)}


router.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)


@router.get("/metrics")
def prometheus_metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics of this process; database gauges are read now (database clock)."""
    return Response(metrics.exposition(runtime.engine), media_type=CONTENT_TYPE_LATEST)
