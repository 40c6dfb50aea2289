"""``export-center approvals list|approve|reject``: the approval queue at the CLI.

An operator sees the requests awaiting approval of every tenant (``--tenant`` narrows)
and decides them under the rules of :mod:`export_center.approvals` (fenced on the
task's status, audited as ``operator:<login>``); no approver permission is needed and an
operator is never the requester.
"""

from __future__ import annotations

from typing import Annotated

import typer

from export_center import approvals, operations
from export_center.cli_ops import JsonOption, LimitOption, TenantOption, _Context, _fail, _group
from export_center.errors import RequestError
from export_center.states import api_state
from export_center.terminal import console, print_json, print_table, visible

__all__ = ["approvals_app", "register"]

approvals_app = _group("Exports waiting for approval: list, approve, reject.")
out = console()


def _operator(tenant: str | None) -> approvals.Requester:
    actor = operations.operator_actor()
    return approvals.Requester(
        user=actor.split(":", 1)[1],
        tenant=tenant,
        app=None,
        permissions=frozenset(),
        actor=actor,
        operator=True,
    )


@approvals_app.command("list")
def approvals_list(
    tenant: TenantOption = None, limit: LimitOption = 100, as_json: JsonOption = False
) -> None:
    """Requests awaiting approval, oldest first."""
    ctx = _Context("approvals list")
    items = approvals.pending_for(ctx, _operator(tenant), limit=limit)
    if as_json:
        print_json(
            [
                {
                    "taskId": i.task.task_no,
                    "tenant": i.task.tenant_id,
                    "requestedBy": i.task.requested_by,
                    "exportType": i.task.export_type,
                    "taskName": i.task.task_name,
                    "reasons": i.approval.reasons,
                    "approverPermission": i.approval.approver_permission,
                    "requestedAt": i.approval.requested_at.isoformat(),
                    "expiresAt": i.approval.expires_at.isoformat(),
                }
                for i in items
            ]
        )
        return
    print_table(
        out,
        "Awaiting approval",
        ["task", "tenant", "requested by", "type", "why", "approver", "expires (UTC)"],
        [
            [
                i.task.task_no,
                i.task.tenant_id,
                i.task.requested_by,
                i.task.export_type,
                i.approval.reasons,
                i.approval.approver_permission,
                i.approval.expires_at.strftime("%Y-%m-%d %H:%M:%S"),
            ]
            for i in items
        ],
    )


def _decide(verb: str, task: str, reason: str | None, tenant: str | None) -> None:
    ctx = _Context(f"approvals {verb}")
    who = _operator(tenant)
    try:
        if verb == "approve":
            done = approvals.approve(ctx, who, task, reason)
        else:
            done = approvals.reject(ctx, who, task, reason)
    except RequestError as exc:
        raise _fail(exc) from None
    typer.echo(
        visible(
            f"{done.task_no} ({done.task_name}): {api_state(done.status)}; recorded in the "
            f"audit trail as {who.actor}"
        )
    )


TaskArgument = Annotated[
    str, typer.Argument(help="Task id (exp_...), awaiting approval", metavar="TASK")
]


@approvals_app.command("approve")
def approvals_approve(
    task: TaskArgument,
    reason: Annotated[
        str | None, typer.Option(help="Why (kept in the audit trail)", metavar="TEXT")
    ] = None,
    tenant: TenantOption = None,
) -> None:
    """Approve a waiting export: it is queued and runs."""
    _decide("approve", task, reason, tenant)


@approvals_app.command("reject")
def approvals_reject(
    task: TaskArgument,
    reason: Annotated[
        str, typer.Option(help="Why (the requester reads it)", metavar="TEXT", show_default=False)
    ],
    tenant: TenantOption = None,
) -> None:
    """Reject a waiting export with a reason; it ends rejected."""
    _decide("reject", task, reason, tenant)


def register(app: typer.Typer) -> None:
    """Add ``approvals`` to the ``export-center`` command."""
    app.add_typer(approvals_app, name="approvals")
