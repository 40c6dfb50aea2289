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


_NOT_READY = "The database does not answer, or the sample-provider process is down"


@router.get("/readyz", responses={503: {"description": _NOT_READY}})
def readyz(runtime: RuntimeDep, response: Response) -> dict[str, object]:
    """Ready when the database answers, the registry is loaded and the sample providers serve."""
    # The embedded default's sample-provider child is the data source of its export
    # types: while it is down every export that starts fails its attempt, so this
    # process is not ready (the child is restarted by itself, within seconds).
    samples = runtime.sample_providers.health() if runtime.sample_providers else None
    extra: dict[str, object] = {} if samples is None else {"sampleProviders": samples}
    try:
        with reading(runtime.engine) as conn:
            repository.ping(conn)
    except Exception:
        response.status_code = 503
        return {"status": "database unavailable", **extra}
    if samples is not None and samples["state"] != "running":
        response.status_code = 503
        return {"status": "sample providers unavailable", **extra}
    return {"status": "ready", "exportTypes": len(runtime.registry.types), **extra}


router.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)


@router.get("/metrics")
def prometheus_metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics of this process; database gauges are read now (database clock)."""
    return Response(metrics.exposition(runtime.engine), media_type=CONTENT_TYPE_LATEST)
