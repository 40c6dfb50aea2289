"""Approvals of sensitive exports: the queue, approve, reject, expiry (issue 25 item 5).

Shared by the web API (``/api/v1/approvals``), the admin API and the operator CLI
(``export-center approvals list|approve|reject``). The rules:

* a task waits in ``AWAITING_APPROVAL`` when its type's ``approval`` rule matches at
  create (:mod:`export_center.api.governance`); it has no command until approved;
* an approver holds the request's ``approver_permission`` and belongs to the task's
  tenant and app; the requester never decides their own request (403
  ``SELF_APPROVAL``), an operator at the CLI may;
* approve: ``AWAITING_APPROVAL -> PENDING`` and the first outbox row, in one
  transaction fenced on the status; reject: ``-> REJECTED`` (terminal) with the reason;
  a task not awaiting approval answers 409 ``NOT_AWAITING_APPROVAL``;
* a request older than ``approvals.expire_hours`` (database clock) ends ``REJECTED``
  with ``APPROVAL_EXPIRED`` (:func:`expire_due`, a reconciler step);
* every step is written to ``export_audit`` (``approval_requested``,
  ``approval_decision`` with outcome ``approved|rejected|expired``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from export_center import metrics, repository
from export_center.commands import COMMAND_TAG
from export_center.db import reading
from export_center.errors import Conflict, Forbidden, NotFound, ValidationFailed
from export_center.ids import TASK_NO_PATTERN
from export_center.operations import ServiceContext
from export_center.repository import Task
from export_center.repository import approvals as store
from export_center.repository.notifications import enqueue_task_event
from export_center.states import state_phrase

__all__ = [
    "MAX_REASON_CHARS",
    "Pending",
    "Requester",
    "approve",
    "approver_permissions",
    "can_approve",
    "expire_due",
    "pending_for",
    "reject",
]

MAX_REASON_CHARS = 1000
"""Longest decision reason, in characters."""


@dataclass(frozen=True, slots=True)
class Requester:
    """Who decides: ``user`` of ``tenant``/``app`` (None: any) holding ``permissions``;
    ``actor`` names them in the audit trail. An operator at the CLI is ``operator=True``:
    no approver permission needed and never "self" (they requested nothing)."""

    user: str
    tenant: str | None
    app: str | None
    permissions: frozenset[str]
    actor: str
    operator: bool = False


@dataclass(frozen=True, slots=True)
class Pending:
    """A task waiting for approval and its request."""

    task: Task
    approval: store.Approval


def approver_permissions(ctx: ServiceContext) -> set[str]:
    """Every ``approver_permission`` the registry names."""
    return {t.approval.approver_permission for t in ctx.registry if t.approval is not None}


def can_approve(ctx: ServiceContext, who: Requester) -> bool:
    """True when ``who`` holds an approver permission some type names (or operates)."""
    return who.operator or bool(approver_permissions(ctx) & set(who.permissions))


def pending_for(ctx: ServiceContext, who: Requester, limit: int = 200) -> list[Pending]:
    """The queue ``who`` may decide: tasks of their tenant and app awaiting approval whose
    approver permission they hold, oldest first (an operator: every tenant's, with
    ``who.tenant`` None).

    Someone who holds no approver permission has an empty queue (the page asks
    everyone, and shows the queue to approvers only).
    """
    allowed = approver_permissions(ctx) & set(who.permissions)
    if not allowed and not who.operator:
        return []
    with reading(ctx.engine) as conn:
        rows = store.queue(
            conn,
            tenant_id=who.tenant,
            app_code=who.app,
            permissions=None if who.operator else sorted(allowed),
            limit=limit,
        )
    return [Pending(task, approval) for task, approval in rows]


def _waiting(ctx: ServiceContext, who: Requester, task_no: str) -> tuple[Task, store.Approval]:
    """The task and its approval request, when ``who`` may decide it.

    Raises:
        NotFound: ``TASK_NOT_FOUND`` (no such task, another tenant or app).
        Conflict: ``NOT_AWAITING_APPROVAL`` (it never needed approval).
        Forbidden: ``PERMISSION_DENIED`` (not an approver of it), ``SELF_APPROVAL``.
    """
    missing = NotFound("no such export task", code="TASK_NOT_FOUND")
    if not TASK_NO_PATTERN.match(task_no):
        raise missing
    with reading(ctx.engine) as conn:
        task = repository.read_task_by_no(conn, task_no)
        approval = store.read_approval(conn, task.id) if task is not None else None
    if task is None or (
        (who.tenant is not None and task.tenant_id != who.tenant)
        or (who.app is not None and task.app_code != who.app)
    ):
        raise missing
    if approval is None:
        raise Conflict(
            f"the export {state_phrase(task.status)}; it never needed approval",
            code="NOT_AWAITING_APPROVAL",
        )
    if not who.operator and approval.approver_permission not in who.permissions:
        raise Forbidden(
            f"deciding this request needs the permission {approval.approver_permission}",
            code="PERMISSION_DENIED",
        )
    if not who.operator and task.requested_by == who.user:
        raise Forbidden(
            "you cannot approve or reject your own export request; another approver must",
            code="SELF_APPROVAL",
        )
    return task, approval


def _not_waiting(engine: Engine, task: Task) -> Conflict:
    with reading(engine) as conn:
        now = repository.read_task(conn, task.id) or task
    return Conflict(
        f"the export {state_phrase(now.status)}; only an export awaiting approval can be "
        "approved or rejected",
        code="NOT_AWAITING_APPROVAL",
    )


def _reason(reason: str | None, *, required: bool) -> str | None:
    text = (reason or "").strip()
    if required and not text:
        raise ValidationFailed(
            "give a reason: the requester reads it", code="REASON_REQUIRED", field="reason"
        )
    if len(text) > MAX_REASON_CHARS:
        raise ValidationFailed(
            f"reason must have at most {MAX_REASON_CHARS} characters",
            code="INVALID_VALUE",
            field="reason",
        )
    return text or None


def _told(conn: Connection, task: Task, *, actor: str, outcome: str, reason: str | None) -> None:
    """In the decision's transaction: the requester's event (``export.approved`` or
    ``export.rejected``, shown in the page whatever their targets) and the audit row."""
    event = "export.approved" if outcome == "approved" else "export.rejected"
    enqueue_task_event(conn, task.id, event, page_always=True)
    repository.record_audit(
        conn,
        actor=actor,
        action=repository.AuditAction.APPROVAL_DECISION,
        outcome=outcome,
        task=task,
        reason=reason,
    )


def approve(ctx: ServiceContext, who: Requester, task_no: str, reason: str | None = None) -> Task:
    """Approve a waiting export: it is queued (PENDING) with its first outbox row, in the
    transaction that checks it still waits; audited.

    Raises:
        NotFound, Forbidden, Conflict: as :func:`_waiting`; Conflict
            ``NOT_AWAITING_APPROVAL`` when another decision or the expiry came first.
        ValidationFailed: ``INVALID_VALUE`` (reason too long).
    """
    text = _reason(reason, required=False)
    task, _ = _waiting(ctx, who, task_no)
    with ctx.engine.begin() as conn:
        queued = store.decide_approve(conn, task.id, by=who.user, reason=text)
        if queued is not None:
            repository.insert_outbox(
                conn, queued, topic=ctx.settings.command_topic, tag=COMMAND_TAG
            )
            _told(conn, queued, actor=who.actor, outcome="approved", reason=text)
    if queued is None:
        raise _not_waiting(ctx.engine, task)
    metrics.APPROVAL_DECISIONS.labels(task.export_type, "approved").inc()
    return queued


def reject(ctx: ServiceContext, who: Requester, task_no: str, reason: str | None) -> Task:
    """Reject a waiting export with a reason (required): it ends REJECTED, the reason is
    its error message; audited.

    Raises:
        ValidationFailed: ``REASON_REQUIRED``, ``INVALID_VALUE``.
        NotFound, Forbidden, Conflict: as :func:`approve`.
    """
    text = _reason(reason, required=True)
    assert text is not None
    task, _ = _waiting(ctx, who, task_no)
    message = f"rejected by {who.user}: {text}"
    with ctx.engine.begin() as conn:
        done = store.decide_reject(conn, task.id, by=who.user, reason=message)
        if done is not None:
            _told(conn, done, actor=who.actor, outcome="rejected", reason=text)
    if done is None:
        raise _not_waiting(ctx.engine, task)
    metrics.APPROVAL_DECISIONS.labels(task.export_type, "rejected").inc()
    return done


def expire_due(engine: Engine, limit: int = 100) -> int:
    """End the approval requests whose time ran out (database clock) as REJECTED with
    ``APPROVAL_EXPIRED``; audited as ``system:reconciler``. Returns how many."""
    done = 0
    with engine.begin() as conn:
        for task in store.due_approvals(conn, limit):
            ended = store.decide_reject(
                conn,
                task.id,
                by=None,
                reason="the approval request expired without a decision",
                code=store.APPROVAL_EXPIRED,
            )
            if ended is None:
                continue
            reason = "no decision before the request expired"
            _told(conn, ended, actor="system:reconciler", outcome="expired", reason=reason)
            metrics.APPROVAL_DECISIONS.labels(task.export_type, "expired").inc()
            done += 1
    return done
