"""``/api/v1/admin``: what operators read and do (the admin permission).

Every route needs ``platform:export:admin``. An admin acts within their own tenant; a
caller that also holds ``platform:operator`` acts across tenants (and may narrow a read
with ``tenant``). Retry and cancel follow the web API's rules and are written to the
audit trail with the caller and the reason given.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from export_center import operations
from export_center.api import service
from export_center.api.admin_schemas import (
    ActionBody,
    AdminTask,
    CommandPublic,
    DeadLetterPublic,
    DeadLetterReportPublic,
    OverviewPublic,
    TaskReportPublic,
)
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, BODY, GUARD, errors
from export_center.auth import (
    ADMIN,
    OPERATOR,
    TENANT_ID_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
    Identity,
)
from export_center.errors import Conflict, Forbidden
from export_center.registry import RegistryError

__all__ = ["admin_tenant", "router"]

router = APIRouter(prefix="/api/v1/admin", tags=["admin"], dependencies=[Depends(strict_query)])

_ADMIN = {403: ["PERMISSION_DENIED"]}
_TASK = {404: ["TASK_NOT_FOUND"]}
_REASON = {422: ["MISSING_FIELD", "UNKNOWN_FIELD", "TOO_SHORT", "TOO_LONG", "INVALID_TYPE"]}
_LIMIT = {422: ["INVALID_VALUE"]}


def admin_tenant(user: Identity, tenant: str | None = None) -> str | None:
    """The tenant an admin call acts in: the admin's own, or (platform operators) the
    one asked for, or every tenant.

    Raises:
        Forbidden: ``PERMISSION_DENIED`` without the admin permission, or when an admin
            who is not a platform operator names another tenant.
    """
    if not user.can(ADMIN):
        raise Forbidden("this needs the admin permission", code="PERMISSION_DENIED")
    if user.can(OPERATOR):
        return tenant
    if tenant is not None and tenant != user.tenant:
        raise Forbidden(
            "only platform operators (platform:operator) see other tenants",
            code="PERMISSION_DENIED",
        )
    return user.tenant


@router.post(
    "/registry/reload",
    responses=errors(GUARD, AUTH, _ADMIN, {409: ["REGISTRY_INVALID"]}),
)
def reload_registry(user: CurrentUser, runtime: RuntimeDep) -> dict[str, object]:
    """Reload the export-type file; an invalid file keeps the old registry (409)."""
    admin_tenant(user)
    try:
        registry = runtime.reload_registry(actor=service.actor_of(user))
    except RegistryError as exc:
        raise Conflict(f"kept the previous registry: {exc}", code="REGISTRY_INVALID") from None
    return {"status": "reloaded", "exportTypes": sorted(registry.types)}


@router.get("/overview", response_model=OverviewPublic, responses=errors(AUTH, _ADMIN))
def overview(user: CurrentUser, runtime: RuntimeDep) -> OverviewPublic:
    """Backlog, scheduled retries, dead letters, failures and audit of the admin's tenant."""
    return OverviewPublic.of(operations.overview(runtime, tenant_id=admin_tenant(user)))


@router.get(
    "/tasks",
    response_model=list[AdminTask],
    responses=errors(AUTH, _ADMIN, {422: ["INVALID_STATE", "INVALID_VALUE", "TOO_LONG"]}),
)
def tasks(
    user: CurrentUser,
    runtime: RuntimeDep,
    state: Annotated[
        str | None, Query(description="queued, running, ... (comma-separated)")
    ] = None,
    export_type: Annotated[str | None, Query(alias="exportType", max_length=1000)] = None,
    owner: Annotated[str | None, Query(max_length=USER_ID_MAX_LENGTH)] = None,
    name: Annotated[
        str | None,
        Query(max_length=200, description="part of the task name (letters without case)"),
    ] = None,
    tenant: Annotated[
        str | None, Query(max_length=TENANT_ID_MAX_LENGTH, description="platform operators")
    ] = None,
    since: Annotated[datetime | None, Query(description="requested at or after (ISO 8601)")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[AdminTask]:
    """Tasks of the tenant (every tenant for platform operators), newest first."""
    scope = admin_tenant(user, tenant)
    states = [s.strip() for s in state.split(",") if s.strip()] if state else None
    found = operations.list_tasks(
        runtime,
        states=states,
        export_types=[t.strip() for t in export_type.split(",")] if export_type else None,
        user=owner,
        tenant_id=scope,
        since=since.astimezone(UTC) if since and since.tzinfo else since,
        name=name,
        limit=limit,
    )
    return [AdminTask.of(t) for t in found]


@router.get(
    "/tasks/{task_id}", response_model=TaskReportPublic, responses=errors(AUTH, _ADMIN, _TASK)
)
def task(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> TaskReportPublic:
    """A task with its commands (one per dispatch version) and its audit trail."""
    return TaskReportPublic.of(operations.task_report(runtime, task_id, admin_tenant(user)))


@router.post(
    "/tasks/{task_id}/retry",
    response_model=AdminTask,
    responses=errors(
        BODY, AUTH, _ADMIN, _TASK, _REASON, {409: ["EXPORT_TYPE_DISABLED", "NOT_RETRYABLE"]}
    ),
)
def retry(task_id: str, body: ActionBody, user: CurrentUser, runtime: RuntimeDep) -> AdminTask:
    """Run a failed task again, with a reason kept in the audit trail."""
    found = operations.find_task(runtime, task_id, admin_tenant(user))
    again = operations.retry_task(
        runtime, found, actor=service.actor_of(user), reason=body.reason, fresh=body.fresh
    )
    runtime.publish_soon()
    return AdminTask.of(again)


@router.post(
    "/tasks/{task_id}/cancel",
    response_model=AdminTask,
    responses=errors(BODY, AUTH, _ADMIN, _TASK, _REASON, {409: ["NOT_CANCELLABLE"]}),
)
def cancel(task_id: str, body: ActionBody, user: CurrentUser, runtime: RuntimeDep) -> AdminTask:
    """Cancel a queued or running task, with a reason kept in the audit trail."""
    found = operations.find_task(runtime, task_id, admin_tenant(user))
    return AdminTask.of(
        operations.cancel_task(runtime, found, actor=service.actor_of(user), reason=body.reason)
    )


@router.get("/outbox", response_model=list[CommandPublic], responses=errors(AUTH, _ADMIN, _LIMIT))
def outbox(
    user: CurrentUser,
    runtime: RuntimeDep,
    stuck_seconds: Annotated[
        float | None, Query(alias="stuckSeconds", ge=0, description="only due for longer than this")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[CommandPublic]:
    """Unsent commands, the longest due first and scheduled retries last."""
    rows = operations.outbox(
        runtime, stuck_seconds=stuck_seconds, tenant_id=admin_tenant(user), limit=limit
    )
    return [CommandPublic.of_entry(e) for e in rows]


@router.get("/dlq", response_model=list[DeadLetterPublic], responses=errors(AUTH, _ADMIN, _LIMIT))
def dead_letters(
    user: CurrentUser, runtime: RuntimeDep, limit: Annotated[int, Query(ge=1, le=200)] = 50
) -> list[DeadLetterPublic]:
    """Quarantined commands with their reason, task and version."""
    return [
        DeadLetterPublic.of(d)
        for d in operations.dead_letters(runtime, tenant_id=admin_tenant(user), limit=limit)
    ]


@router.get(
    "/dlq/{event_id}",
    response_model=DeadLetterReportPublic,
    responses=errors(AUTH, _ADMIN, {404: ["EVENT_NOT_FOUND"]}),
)
def dead_letter(event_id: str, user: CurrentUser, runtime: RuntimeDep) -> DeadLetterReportPublic:
    """One command by its event id, with every audit entry about it."""
    entry, audit = operations.dead_letter(runtime, event_id, admin_tenant(user))
    return DeadLetterReportPublic.of(entry, audit)
