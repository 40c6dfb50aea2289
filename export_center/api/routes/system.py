"""Health, readiness and metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST

from export_center import metrics, repository
from export_center.api.deps import RuntimeDep, strict_query
from export_center.db import reading
from export_center.storage.base import reported_space

if TYPE_CHECKING:
    from export_center.runtime import Runtime

__all__ = ["router"]

router = APIRouter(tags=["system"], dependencies=[Depends(strict_query)])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Answers once the process has started."""
    return {"status": "ok"}


router.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False)


_NOT_READY = "The database does not answer, or the sample-provider process is down"


def _storage_room(runtime: Runtime) -> dict[str, object] | None:
    """``{"freeBytes": int, "lowSpace": bool}`` of the export storage's volume, or None
    for object storage (no fixed size). An unreadable volume is 0 bytes free, low."""
    space = reported_space(runtime.storage)
    if space is None:
        return None
    return {"freeBytes": space.free_bytes, "lowSpace": space.is_low(runtime.low_space_bytes)}


@router.get("/readyz", responses={503: {"description": _NOT_READY}})
def readyz(runtime: RuntimeDep, response: Response) -> dict[str, object]:
    """Ready when the database answers, the registry is loaded and the sample providers serve.

    The ready answer also carries ``storage: {freeBytes, lowSpace}`` for a local storage
    (low space below ``storage.low_space_mb``); low space alone keeps the answer 200.
    """
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
    # Low space is reported, not "not ready": the API still lists, creates and serves
    # downloads, and taking it out of a load balancer frees no byte. The alert
    # ExportStorageLowSpace and doctor tell the operator.
    storage = _storage_room(runtime)
    if storage is not None:
        extra["storage"] = storage
    return {"status": "ready", "exportTypes": len(runtime.registry.types), **extra}


router.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)


@router.get("/metrics")
def prometheus_metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics of this process; database gauges are read now (database clock)."""
    storage = (runtime.storage, runtime.low_space_bytes)
    return Response(metrics.exposition(runtime.engine, storage), media_type=CONTENT_TYPE_LATEST)
