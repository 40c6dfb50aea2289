"""The audit trail: one append-only row per disposal, automatic or by a person.

A disposal is anything that ends, revives or sets aside a task or a command outside the
normal run of an export: a dead letter quarantined (or found stale), a manual retry or
cancel (web API, admin API, operator CLI), a lease recovered by the reconciler, a
task handed back by its worker after an interruption, a registry reload. Each row says
who (a user ``user:<id>``, an operator ``operator:<login>``, or ``system:<component>``),
when (database clock), what (action and outcome), on which task, event and dispatch
version, and why. Rows are written in the
transaction of the change they record, never updated, and deleted only by the retention
purge (:func:`purge_audit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

import orjson
from sqlalchemy import Connection, func, insert, select

from export_center.db import db_now, db_now_plus
from export_center.repository.rows import Task
from export_center.repository.tables import AUDIT as A

__all__ = [
    "ActorRole",
    "AuditAction",
    "AuditEntry",
    "Disposition",
    "actor_role",
    "audit_entries",
    "dispositions",
    "purge_audit",
    "record_audit",
]

#: Who an actor is to a task: its owner, another user of its tenant (an administrator:
#: only the download-all permission sees another user's task), an operator at the CLI,
#: or a component of the service.
ActorRole = Literal["owner", "administrator", "operator", "system"]


class AuditAction(StrEnum):
    """What was done."""

    DEAD_LETTER = "dead_letter"
    MANUAL_RETRY = "manual_retry"
    MANUAL_CANCEL = "manual_cancel"
    LEASE_RECOVERY = "lease_recovery"
    REGISTRY_RELOAD = "registry_reload"
    RESUME = "resume"
    #: A worker handed its task back after an interruption outside the export (the
    #: database did not answer while its lease lasted, the process was paused).
    HAND_BACK = "hand_back"
    #: A notification was not delivered for 24 h (or can never be): marked dead.
    NOTIFICATION_DEAD = "notification_dead"
    #: A notification target could not be written (an e-mail target without address).
    NOTIFY_SKIPPED = "notify_skipped"
    #: Download links of a task were revoked (one link, or every link).
    LINK_REVOKE = "link_revoke"
    #: An export waits for approval / was approved, rejected, or its request expired.
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECISION = "approval_decision"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audit row (``details`` decoded from JSON)."""

    id: int
    occurred_at: datetime
    actor: str
    action: str
    outcome: str
    tenant_id: str | None
    task_id: int | None
    task_no: str | None
    event_id: str | None
    dispatch_version: int | None
    reason: str | None
    details: dict[str, Any] | None


def record_audit(
    conn: Connection,
    *,
    actor: str,
    action: AuditAction,
    outcome: str,
    task: Task | None = None,
    task_no: str | None = None,
    event_id: str | None = None,
    dispatch_version: int | None = None,
    reason: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> None:
    """Append one audit row, in the caller's transaction.

    Args:
        actor: ``user:<id>``, ``operator:<login>`` or ``system:<component>``.
        action: what was done.
        outcome: how it ended (``quarantined``, ``stale``, ``retried``, ``refused``...).
        task: the task concerned (its id, public id, tenant and version are recorded).
        task_no: the public task id when the task itself is unknown (a dead letter).
        event_id: the command's event id, when a command is concerned.
        dispatch_version: the version concerned (default: the task's).
        reason: the sentence a person gave, or the cause.
        details: JSON-able extra facts (a broker message id, raw message properties).
    """
    conn.execute(
        insert(A).values(
            occurred_at=db_now(),
            actor=actor[:160],
            action=action.value,
            outcome=outcome[:32],
            tenant_id=task.tenant_id if task is not None else None,
            task_id=task.id if task is not None else None,
            task_no=task.task_no if task is not None else (task_no[:32] if task_no else None),
            event_id=event_id[:64] if event_id else None,
            dispatch_version=(
                dispatch_version
                if dispatch_version is not None
                else (task.dispatch_version if task is not None else None)
            ),
            reason=reason[:1000] if reason else None,
            details_json=orjson.dumps(dict(details)).decode() if details else None,
        )
    )


def audit_entries(
    conn: Connection,
    *,
    task_id: int | None = None,
    tenant_id: str | None = None,
    event_id: str | None = None,
    limit: int = 50,
) -> list[AuditEntry]:
    """Audit rows, newest first, of one task, one tenant or one event (all when None).

    Args:
        limit: at most this many rows (a bounded read).
    """
    conds: list[Any] = []
    if task_id is not None:
        conds.append(A.c.task_id == task_id)
    if tenant_id is not None:
        conds.append(A.c.tenant_id == tenant_id)
    if event_id is not None:
        conds.append(A.c.event_id == event_id)
    rows = conn.execute(select(A).where(*conds).order_by(A.c.id.desc()).limit(limit)).mappings()
    return [
        AuditEntry(
            id=row["id"],
            occurred_at=row["occurred_at"],
            actor=row["actor"],
            action=row["action"],
            outcome=row["outcome"],
            tenant_id=row["tenant_id"],
            task_id=row["task_id"],
            task_no=row["task_no"],
            event_id=row["event_id"],
            dispatch_version=row["dispatch_version"],
            reason=row["reason"],
            details=orjson.loads(row["details_json"]) if row["details_json"] else None,
        )
        for row in rows
    ]


def purge_audit(conn: Connection, older_than_days: float, limit: int) -> int:
    """Delete at most ``limit`` audit rows older than ``older_than_days`` (retention).

    Returns:
        How many rows were deleted.
    """
    ids = [
        r[0]
        for r in conn.execute(
            select(A.c.id)
            .where(A.c.occurred_at <= db_now_plus(-older_than_days * 86400))
            .order_by(A.c.id)
            .limit(limit)
        )
    ]
    if not ids:
        return 0
    return int(conn.execute(A.delete().where(A.c.id.in_(ids))).rowcount)


def actor_role(actor: str, *, tenant_id: str, owner: str) -> tuple[ActorRole, str | None]:
    """What an audit ``actor`` is to the task of ``owner`` in ``tenant_id``.

    The actor names are ``user:<tenant>/<user>`` (web and admin API), ``operator:<login>``
    (the operator CLI) and ``system:<component>``.

    Returns:
        ``(role, user)``: ``("owner", owner)`` for the task's own user,
        ``("administrator", user)`` for another user of the tenant, ``("operator", None)``
        and ``("system", None)`` otherwise (an operator's login is not a tenant's business).
    """
    kind, _, name = actor.partition(":")
    if kind == "user":
        if name == f"{tenant_id}/{owner}":
            return "owner", owner
        prefix = f"{tenant_id}/"
        user = name.removeprefix(prefix) if name.startswith(prefix) else name.partition("/")[2]
        return "administrator", user or name
    if kind == "operator":
        return "operator", None
    return "system", None


@dataclass(frozen=True, slots=True)
class Disposition:
    """What people last did to one task, from the audit trail: the last manual retry
    (when, by whom) and who last asked for a cancel (actor names as in the trail)."""

    retried_at: datetime | None = None
    retried_by: str | None = None
    cancelled_by: str | None = None


def dispositions(conn: Connection, task_ids: list[int]) -> dict[int, Disposition]:
    """The :class:`Disposition` of each task of ``task_ids`` that has one.

    One indexed read of at most two rows per task (the newest ``manual_retry`` and
    ``manual_cancel``), whatever the length of the trail.

    Args:
        task_ids: internal task ids (a page of a list: at most a few hundred).

    Returns:
        ``{task_id: Disposition}``; tasks nobody retried or cancelled by hand are absent.
    """
    if not task_ids:
        return {}
    actions = (AuditAction.MANUAL_RETRY.value, AuditAction.MANUAL_CANCEL.value)
    newest = (
        select(func.max(A.c.id))
        .where(A.c.task_id.in_(task_ids), A.c.action.in_(actions))
        .group_by(A.c.task_id, A.c.action)
    )
    rows = conn.execute(
        select(A.c.task_id, A.c.action, A.c.actor, A.c.occurred_at).where(A.c.id.in_(newest))
    ).all()
    found: dict[int, dict[str, Any]] = {}
    for task_id, action, actor, occurred_at in rows:
        values = found.setdefault(int(task_id), {})
        if action == AuditAction.MANUAL_RETRY.value:
            values.update(retried_at=occurred_at, retried_by=actor)
        else:
            values["cancelled_by"] = actor
    return {task_id: Disposition(**values) for task_id, values in found.items()}
