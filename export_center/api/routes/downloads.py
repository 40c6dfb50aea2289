"""``/api/v1/exports/{taskId}/downloads`` and ``/links/revoke``: a task's download audit
and the revocation of its links, for its owner and for admins (the download-all
permission: every task of the tenant), with the one visibility rule of every task route
(a task the caller may not see is 404 ``TASK_NOT_FOUND``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from export_center import download_ops
from export_center.api import service
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.download_schemas import (
    DownloadPublic,
    DownloadsPublic,
    RevokeBody,
    RevokedPublic,
)
from export_center.api.openapi import AUTH, GUARD, QUERY, errors

__all__ = ["router"]

router = APIRouter(prefix="/api/v1/exports", tags=["exports"], dependencies=[Depends(strict_query)])

_TASK = {404: ["TASK_NOT_FOUND"]}


@router.get(
    "/{task_id}/downloads",
    response_model=DownloadsPublic,
    responses=errors(QUERY, AUTH, _TASK),
)
def downloads(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> DownloadsPublic:
    """Every recorded download answer of the task (bearer, signed link, presigned hop),
    newest first (at most 500): when, who, from which address and agent, which link, the
    range asked and the answer code."""
    task = service.visible_task(runtime, task_id, user)
    rows = download_ops.task_downloads(runtime.engine, task)
    return DownloadsPublic(items=[DownloadPublic.of(r) for r in rows])


@router.post(
    "/{task_id}/links/revoke",
    response_model=RevokedPublic,
    responses=errors(
        GUARD,
        AUTH,
        _TASK,
        {404: ["LINK_NOT_FOUND"]},
        {422: ["UNKNOWN_FIELD", "TOO_LONG", "INVALID_TYPE", "INVALID_VALUE"]},
    ),
)
def revoke(
    task_id: str, user: CurrentUser, runtime: RuntimeDep, body: RevokeBody | None = None
) -> RevokedPublic:
    """Revoke one download link of the task (``linkId``) or, without it, every link
    issued so far: from then on they answer 410 ``LINK_REVOKED`` on every API process.
    A presigned GET of the bucket already handed out lives out its 300 s (S3 storage with
    ``download = redirect``); with ``download = proxy`` nothing outlives the revocation."""
    task = service.visible_task(runtime, task_id, user)
    link_id = body.linkId if body is not None else None
    reason = body.reason if body is not None else None
    download_ops.revoke_task_links(
        runtime.engine,
        task,
        link_id,
        secret=runtime.settings.download_secret,
        actor=service.actor_of(user),
        reason=reason,
    )
    return RevokedPublic(taskId=task.task_no, linkId=link_id, scope="link" if link_id else "all")
