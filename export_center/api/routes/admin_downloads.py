"""``/api/v1/admin``: the download audit, link revocation and file trace (the admin
permission; an admin acts within their tenant, a platform operator across tenants, as
every admin route: :func:`export_center.api.routes.admin.admin_tenant`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from export_center import download_ops
from export_center.api import service
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.download_schemas import (
    AdminRevokeBody,
    DownloadPublic,
    DownloadsPublic,
    RevokedPublic,
    TraceBody,
    TraceMatch,
    TracePublic,
)
from export_center.api.openapi import AUTH, BODY, GUARD, QUERY, errors
from export_center.api.routes.admin import admin_tenant
from export_center.auth import TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH, Identity
from export_center.db import reading
from export_center.download_ops import Traced
from export_center.errors import NotFound
from export_center.repository import Task, read_task_by_no
from export_center.repository.downloads import download_rows

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/admin", tags=["admin"], dependencies=[Depends(strict_query)])

_ADMIN = {403: ["PERMISSION_DENIED"]}
_TASK = {404: ["TASK_NOT_FOUND"]}
_BINARY = {"type": "string", "format": "binary"}


def _naive(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


@router.get(
    "/downloads",
    response_model=DownloadsPublic,
    responses=errors(QUERY, AUTH, _ADMIN, {422: ["INVALID_VALUE"]}),
)
def list_downloads(
    user: CurrentUser,
    runtime: RuntimeDep,
    download_user: Annotated[
        str | None, Query(alias="user", max_length=USER_ID_MAX_LENGTH, description="Only this user")
    ] = None,
    kind: Annotated[
        Literal["bearer", "link", "presigned"] | None,
        Query(alias="type", description="bearer, link or presigned"),
    ] = None,
    since: Annotated[datetime | None, Query(description="From this time (ISO 8601, incl.)")] = None,
    until: Annotated[datetime | None, Query(description="Before this time (ISO 8601)")] = None,
    task: Annotated[str | None, Query(max_length=32, description="Only this task")] = None,
    tenant: Annotated[
        str | None,
        Query(max_length=TENANT_ID_MAX_LENGTH, description="Platform operators: one tenant"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[int | None, Query(ge=1, description="nextBefore of the last page")] = None,
) -> DownloadsPublic:
    """Recorded download answers of the tenant, newest first, filtered by user, type,
    time and task."""
    scope = admin_tenant(user, tenant)
    with reading(runtime.engine) as conn:
        task_id = None
        if task is not None:
            found = read_task_by_no(conn, task)
            if found is None or (scope is not None and found.tenant_id != scope):
                return DownloadsPublic(items=[])
            task_id = found.id
        rows = download_rows(
            conn,
            task_id=task_id,
            tenant_id=scope,
            user=download_user,
            kind=kind,
            since=_naive(since),
            until=_naive(until),
            before_id=before,
            limit=limit,
        )
    return DownloadsPublic(
        items=[DownloadPublic.of(r) for r in rows],
        nextBefore=rows[-1].id if len(rows) == limit else None,
    )


def _tenant_task(runtime: RuntimeDep, user: Identity, task_no: str) -> Task:
    scope = admin_tenant(user)
    with reading(runtime.engine) as conn:
        task = read_task_by_no(conn, task_no)
    if task is None or (scope is not None and task.tenant_id != scope):
        raise NotFound("no such export task", code="TASK_NOT_FOUND")
    return task


@router.post(
    "/exports/{task_id}/links/revoke",
    response_model=RevokedPublic,
    responses=errors(
        GUARD, AUTH, BODY, _ADMIN, _TASK, {404: ["LINK_NOT_FOUND"], 422: ["INVALID_VALUE"]}
    ),
)
def admin_revoke(
    task_id: str, body: AdminRevokeBody, user: CurrentUser, runtime: RuntimeDep
) -> RevokedPublic:
    """Revoke one link of a task of the tenant (``linkId``) or every link, with a reason
    (audit trail)."""
    task = _tenant_task(runtime, user, task_id)
    download_ops.revoke_task_links(
        runtime.engine,
        task,
        body.linkId,
        secret=runtime.settings.download_secret,
        actor=service.actor_of(user),
        reason=body.reason,
    )
    return RevokedPublic(
        taskId=task.task_no, linkId=body.linkId, scope="link" if body.linkId else "all"
    )


def _visible(found: list[Traced], scope: str | None) -> list[Traced]:
    return [t for t in found if scope is None or t.task.tenant_id == scope]


def _traced(sha: str, found: list[Traced], scope: str | None) -> TracePublic:
    matches = [TraceMatch.of(t) for t in _visible(found, scope)]
    return TracePublic(sha256=sha, known=bool(matches), matches=matches)


@router.post(
    "/trace",
    response_model=TracePublic,
    responses=errors(GUARD, AUTH, BODY, _ADMIN, {422: ["INVALID_VALUE"]}),
)
def trace_hash(body: TraceBody, user: CurrentUser, runtime: RuntimeDep) -> TracePublic:
    """Which task produced the file with this SHA-256, its requester and every download
    (``known: false`` for a hash no task of the tenant stored: an edited file is unknown)."""
    scope = admin_tenant(user)
    found = download_ops.trace_hash(runtime.engine, body.sha256)
    return _traced(body.sha256.strip().lower(), found, scope)


@router.post(
    "/trace/file",
    response_model=TracePublic,
    responses=errors(GUARD, AUTH, _ADMIN),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": _BINARY}},
        }
    },
)
async def trace_upload(request: Request, user: CurrentUser, runtime: RuntimeDep) -> TracePublic:
    """The same from the file's bytes, uploaded as the request body (any size; hashed
    while it arrives, never stored)."""
    scope = admin_tenant(user)
    digest = download_ops.new_digest()
    async for chunk in request.stream():
        digest.update(chunk)
    sha = digest.hexdigest()
    found = await run_in_threadpool(download_ops.trace_hash, runtime.engine, sha)
    return _traced(sha, found, scope)
