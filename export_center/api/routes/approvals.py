"""``/api/v1/approvals``: the approval queue of the caller's tenant, approve and reject.

* ``GET /api/v1/approvals``: ``{canApprove, items: [{taskId, exportType, taskName,
  requestedBy, requestedAt, expiresAt, reasons (one sentence per rule), rules,
  estimatedRows, format, parameters, columns}]}``, oldest first: the tasks of the
  caller's tenant and app awaiting approval whose approver permission the caller holds
  (empty, ``canApprove: false``, for anyone else);
* ``POST /api/v1/approvals/{taskId}/approve`` (optional ``{reason}``) and ``/reject``
  (``{reason}`` required): the task as ``GET /api/v1/exports/{taskId}`` shows it
  (``queued`` or ``rejected``). 403 ``SELF_APPROVAL`` for the requester's own request,
  403 ``PERMISSION_DENIED`` without the approver permission, 409
  ``NOT_AWAITING_APPROVAL`` when the task no longer waits, 404 ``TASK_NOT_FOUND``
  outside the caller's tenant.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from export_center import approvals
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, BODY, errors
from export_center.api.present import one_public, utc
from export_center.api.schemas import ExportPublic
from export_center.api.service import actor_of
from export_center.auth import Identity
from export_center.filespec import FileSpec
from export_center.governance_rules import reason_text

__all__ = [
    "ApprovalPublic",
    "ApprovalsPublic",
    "DecisionBody",
    "decide",
    "requester_of",
    "router",
]

router = APIRouter(
    prefix="/api/v1/approvals", tags=["approvals"], dependencies=[Depends(strict_query)]
)


class DecisionBody(BaseModel):
    """The body of approve (reason optional) and reject (reason required)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(
        None,
        max_length=approvals.MAX_REASON_CHARS,
        description="Why: optional on approve, required (not blank) on reject; kept in the "
        "audit trail and the approval record, and told to the requester",
    )


class ApprovalPublic(BaseModel):
    """One export awaiting approval."""

    taskId: str
    exportType: str
    taskName: str
    format: str
    requestedBy: str
    requestedAt: datetime | None
    expiresAt: datetime | None
    reasons: list[str] = Field(
        description="Why it needs approval: one English sentence per matched rule (the "
        "page words them from ``rules`` in its own language)"
    )
    rules: list[dict[str, Any]] = Field(
        description='The rules that matched: {"rule": "always"}, {"rule": "rows_over", '
        '"limit": N, "estimate": E or null}, {"rule": "columns", "columns": [...]}'
    )
    estimatedRows: int | None
    parameters: dict[str, Any]
    columns: list[str] = Field(description="The chosen columns (empty: every column)")


class ApprovalsPublic(BaseModel):
    """The caller's approval queue."""

    canApprove: bool = Field(description="The caller holds an approver permission")
    items: list[ApprovalPublic]


def requester_of(user: Identity) -> approvals.Requester:
    """The deciding identity of a signed-in user."""
    return approvals.Requester(
        user=user.user,
        tenant=user.tenant,
        app=user.app_code,
        permissions=frozenset(user.permissions),
        actor=actor_of(user),
    )


def approval_public(item: approvals.Pending) -> ApprovalPublic:
    """The API shape of a waiting task."""
    task, request = item.task, item.approval
    spec = FileSpec.from_text(task.file_spec_json)
    rules = orjson.loads(request.rules_json) if request.rules_json else []
    return ApprovalPublic(
        taskId=task.task_no,
        exportType=task.export_type,
        taskName=task.task_name,
        format=str(task.format).lower(),
        requestedBy=task.requested_by,
        requestedAt=utc(request.requested_at),
        expiresAt=utc(request.expires_at),
        reasons=[reason_text(r) for r in rules] or [request.reasons],
        rules=rules,
        estimatedRows=request.estimated_rows,
        parameters=orjson.loads(task.parameters_json),
        columns=[c.key for c in spec.columns],
    )


def decide(
    runtime: RuntimeDep,
    user: Identity,
    who: approvals.Requester,
    task_no: str,
    body: DecisionBody | None,
    *,
    approved: bool,
) -> ExportPublic:
    """Approve (then publish the command at once) or reject ``task_no`` as ``who``, and
    answer the task as ``user`` sees it.

    Raises:
        RequestError: what :func:`export_center.approvals.approve` / ``reject`` raise.
    """
    reason = body.reason if body is not None else None
    if approved:
        task = approvals.approve(runtime, who, task_no, reason)
        runtime.publish_soon()
    else:
        task = approvals.reject(runtime, who, task_no, reason)
    return one_public(runtime, task, user)


_DECIDE: dict[int, list[str]] = {
    403: ["PERMISSION_DENIED", "SELF_APPROVAL"],
    404: ["TASK_NOT_FOUND"],
    409: ["NOT_AWAITING_APPROVAL"],
    422: ["UNKNOWN_FIELD", "INVALID_TYPE", "TOO_LONG", "INVALID_VALUE"],
}


@router.get("", response_model=ApprovalsPublic, responses=errors(AUTH))
def queue(user: CurrentUser, runtime: RuntimeDep) -> ApprovalsPublic:
    """The exports of the caller's tenant awaiting the caller's approval, oldest first."""
    who = requester_of(user)
    items = approvals.pending_for(runtime, who)
    return ApprovalsPublic(
        canApprove=approvals.can_approve(runtime, who), items=[approval_public(i) for i in items]
    )


@router.post(
    "/{task_id}/approve", response_model=ExportPublic, responses=errors(BODY, AUTH, _DECIDE)
)
def approve(
    task_id: str, user: CurrentUser, runtime: RuntimeDep, body: DecisionBody | None = None
) -> ExportPublic:
    """Approve an export awaiting approval: it is queued and runs."""
    return decide(runtime, user, requester_of(user), task_id, body, approved=True)


@router.post(
    "/{task_id}/reject",
    response_model=ExportPublic,
    responses=errors(BODY, AUTH, _DECIDE, {422: ["REASON_REQUIRED"]}),
)
def reject(
    task_id: str, user: CurrentUser, runtime: RuntimeDep, body: DecisionBody | None = None
) -> ExportPublic:
    """Reject an export awaiting approval, with a reason the requester reads."""
    return decide(runtime, user, requester_of(user), task_id, body, approved=False)
