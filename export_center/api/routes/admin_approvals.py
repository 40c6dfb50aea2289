"""``/api/v1/admin/approvals``: the approval queue for administrators.

An admin (``platform:export:admin``) sees and decides the requests of their own tenant
whatever the approver permission (a platform operator: of every tenant, or the one
asked for with ``tenant``); an admin's own request is still refused (403
``SELF_APPROVAL``). Decisions are those of :mod:`export_center.approvals` (fenced,
audited with the admin as actor).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from export_center import approvals
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, BODY, errors
from export_center.api.routes.admin import admin_tenant
from export_center.api.routes.approvals import (
    ApprovalsPublic,
    DecisionBody,
    approval_public,
    decide,
)
from export_center.api.schemas import ExportPublic
from export_center.api.service import actor_of
from export_center.auth import TENANT_ID_MAX_LENGTH, Identity
from export_center.runtime import Runtime

__all__ = ["router"]

router = APIRouter(
    prefix="/api/v1/admin/approvals", tags=["admin"], dependencies=[Depends(strict_query)]
)

_DECIDE: dict[int, list[str]] = {
    403: ["PERMISSION_DENIED", "SELF_APPROVAL"],
    404: ["TASK_NOT_FOUND"],
    409: ["NOT_AWAITING_APPROVAL"],
    422: ["UNKNOWN_FIELD", "INVALID_TYPE", "TOO_LONG", "INVALID_VALUE"],
}


def _admin(runtime: Runtime, user: Identity, tenant: str | None = None) -> approvals.Requester:
    """The admin as a decider: every approver permission, their tenant (or any)."""
    return approvals.Requester(
        user=user.user,
        tenant=admin_tenant(user, tenant),
        app=None,
        permissions=frozenset(approvals.approver_permissions(runtime)),
        actor=actor_of(user),
    )


@router.get(
    "", response_model=ApprovalsPublic, responses=errors(AUTH, {403: ["PERMISSION_DENIED"]})
)
def queue(
    user: CurrentUser,
    runtime: RuntimeDep,
    tenant: Annotated[str | None, Query(max_length=TENANT_ID_MAX_LENGTH)] = None,
) -> ApprovalsPublic:
    """Every request awaiting approval in the admin's tenant, oldest first."""
    who = _admin(runtime, user, tenant)
    items = approvals.pending_for(runtime, who, limit=1000)
    return ApprovalsPublic(canApprove=True, items=[approval_public(i) for i in items])


@router.post(
    "/{task_id}/approve", response_model=ExportPublic, responses=errors(BODY, AUTH, _DECIDE)
)
def approve(
    task_id: str, user: CurrentUser, runtime: RuntimeDep, body: DecisionBody | None = None
) -> ExportPublic:
    """Approve a request of the admin's tenant: the export is queued."""
    return decide(runtime, user, _admin(runtime, user), task_id, body, approved=True)


@router.post(
    "/{task_id}/reject",
    response_model=ExportPublic,
    responses=errors(BODY, AUTH, _DECIDE, {422: ["REASON_REQUIRED"]}),
)
def reject(
    task_id: str, user: CurrentUser, runtime: RuntimeDep, body: DecisionBody | None = None
) -> ExportPublic:
    """Reject a request of the admin's tenant with a reason."""
    return decide(runtime, user, _admin(runtime, user), task_id, body, approved=False)
