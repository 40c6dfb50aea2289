"""What operators do: look at tasks, the outbox and dead letters, and retry or cancel.

Shared by the operator CLI (``export-center tasks|outbox|dlq``) and the admin API. No one
runs SQL by hand: every read is bounded, every action goes through the same rules as the
web API (a retry needs a FAILED task whose type is still registered and enabled; a
cancel needs a queued or running one) and is written to the audit trail with who did it
and why. ``tenant_id`` narrows every read and action to one tenant (the admin API passes
the admin's tenant unless the caller is a platform operator); None means every tenant.
"""

from __future__ import annotations

import getpass
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import Engine

from export_center import repository
from export_center.commands import COMMAND_TAG
from export_center.errors import Conflict, NotFound, ValidationFailed
from export_center.registry import Registry
from export_center.repository import AuditEntry, OutboxEntry, QueueFigures, Task
from export_center.settings import Settings
from export_center.states import OutboxStatus, TaskStatus, api_state, state_phrase
from export_center.storage.base import Storage

log = logging.getLogger(__name__)

__all__ = [
    "DeadLetter",
    "Overview",
    "ServiceContext",
    "TaskReport",
    "cancel_task",
    "dead_letter",
    "dead_letters",
    "find_task",
    "list_tasks",
    "operator_actor",
    "outbox",
    "overview",
    "retry_task",
    "task_report",
]


class ServiceContext(Protocol):
    """What the operator functions need: the database, the registry and the settings
    (a :class:`~export_center.runtime.Runtime` is one)."""

    @property
    def engine(self) -> Engine:
        """The export center's database."""

    @property
    def registry(self) -> Registry:
        """The export types."""

    @property
    def settings(self) -> Settings:
        """The process settings."""

    @property
    def storage(self) -> Storage:
        """File storage (a fresh retry deletes the shard parts)."""


def operator_actor() -> str:
    """How the audit trail names a person at the operator CLI: ``operator:<login>``."""
    try:
        login = getpass.getuser()
    except Exception:  # no login name (a container without passwd entry)
        login = "unknown"
    return f"operator:{login}"


def find_task(ctx: ServiceContext, task_no: str, tenant_id: str | None = None) -> Task:
    """The task ``task_no`` (of ``tenant_id`` when given).

    Raises:
        NotFound: ``TASK_NOT_FOUND`` (also for another tenant's task).
    """
    with ctx.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_no)
    if task is None or (tenant_id is not None and task.tenant_id != tenant_id):
        raise NotFound(f"no export task {task_no}", code="TASK_NOT_FOUND")
    return task


def list_tasks(
    ctx: ServiceContext,
    *,
    states: list[str] | None = None,
    export_types: list[str] | None = None,
    user: str | None = None,
    tenant_id: str | None = None,
    since: datetime | None = None,
    name: str | None = None,
    limit: int = 50,
) -> list[Task]:
    """Tasks by any filter, newest first; ``states`` are API states (``failed``...);
    ``name`` is a part of the task name (letters compare without case).

    Raises:
        ValidationFailed: ``INVALID_STATE`` for a state name that does not exist.
    """
    statuses = None
    if states:
        known = {api_state(s): s.value for s in TaskStatus}
        unknown = [s for s in states if s not in known]
        if unknown:
            raise ValidationFailed(
                f"unknown state {unknown[0]!r}; one of {', '.join(known)}",
                code="INVALID_STATE",
                field="state",
            )
        statuses = [known[s] for s in states]
    with ctx.engine.connect() as conn:
        return repository.search_tasks(
            conn,
            statuses=statuses,
            export_types=export_types,
            requested_by=user,
            tenant_id=tenant_id,
            since=since,
            name=name,
            limit=limit,
        )


@dataclass(frozen=True, slots=True)
class TaskReport:
    """Everything about one task an operator needs: the task, its commands (one per
    dispatch version) and its audit trail (newest first); the task row holds its last
    failure (code and message)."""

    task: Task
    outbox: list[repository.OutboxRow]
    audit: list[AuditEntry]


def task_report(ctx: ServiceContext, task_no: str, tenant_id: str | None = None) -> TaskReport:
    """The :class:`TaskReport` of ``task_no``.

    Raises:
        NotFound: ``TASK_NOT_FOUND``.
    """
    task = find_task(ctx, task_no, tenant_id)
    with ctx.engine.connect() as conn:
        rows = repository.outbox_rows(conn, task.id)
        audit = repository.audit_entries(conn, task_id=task.id, limit=100)
    return TaskReport(task, rows, audit)


def retry_task(
    ctx: ServiceContext,
    task: Task,
    *,
    actor: str,
    reason: str | None = None,
    fresh: bool = False,
) -> Task:
    """Run a FAILED task again (new dispatch version, counters reset), audited.

    The same rules as the web API: the task is FAILED, and its export type is still
    registered and enabled. A sharded export resumes from its checkpoints (the shards
    done are kept, the others continue from their last checkpoint); ``fresh=True``
    forgets the checkpoints and deletes the parts, so every shard starts from zero.

    Raises:
        Conflict: ``EXPORT_TYPE_DISABLED`` or ``NOT_RETRYABLE``.
    """
    etype = ctx.registry.get(task.export_type)
    if etype is None or not etype.enabled:
        raise Conflict(f"{task.export_type} exports are disabled", code="EXPORT_TYPE_DISABLED")
    if task.status != TaskStatus.FAILED:
        raise Conflict(
            f"only failed exports can be retried; this one {state_phrase(task.status)}",
            code="NOT_RETRYABLE",
        )
    with ctx.engine.begin() as conn:
        again = repository.manual_retry(
            conn, task.id, topic=ctx.settings.command_topic, tag=COMMAND_TAG
        )
        if again is not None:
            kept = 0 if fresh else sum(s.done for s in repository.load_shards(conn, task.id))
            if fresh:
                repository.delete_shards(conn, task.id, forget_counts=True)
            repository.record_audit(
                conn,
                actor=actor,
                action=repository.AuditAction.MANUAL_RETRY,
                outcome="requeued",
                task=again,
                reason=reason,
                details={
                    "previousFailure": task.failure_message,
                    "fresh": fresh,
                    "shardsKept": kept,
                },
            )
    if again is None:
        raise Conflict("the export changed state; look again", code="NOT_RETRYABLE")
    if fresh:
        try:
            ctx.storage.delete_parts(task.task_no)
        except Exception:  # the attempt writes new segment keys; the rest is cleaned later
            log.warning("could not delete the parts of %s", task.task_no, exc_info=True)
    return again


def cancel_task(ctx: ServiceContext, task: Task, *, actor: str, reason: str | None = None) -> Task:
    """Cancel a queued task at once, or ask a running one to stop (within 10 s), audited.

    Raises:
        Conflict: ``NOT_CANCELLABLE`` (it already ended).
    """
    with ctx.engine.begin() as conn:
        outcome = repository.request_cancel(conn, task.id, actor=actor)
        fresh = repository.read_task(conn, task.id)
        if outcome is not None:
            repository.record_audit(
                conn,
                actor=actor,
                action=repository.AuditAction.MANUAL_CANCEL,
                outcome="cancelled" if outcome == TaskStatus.CANCELLED else "stop_requested",
                task=task,
                reason=reason,
            )
    if outcome is None:
        now = (fresh or task).status  # the state that refused, not the one read before
        raise Conflict(
            f"the export {state_phrase(now)}"
            + ("" if now == TaskStatus.CANCELLED else " and cannot be cancelled"),
            code="NOT_CANCELLABLE",
        )
    assert fresh is not None
    return fresh


def outbox(
    ctx: ServiceContext,
    *,
    stuck_seconds: float | None = None,
    tenant_id: str | None = None,
    limit: int = 50,
) -> list[OutboxEntry]:
    """Unsent commands (PENDING or CLAIMED), the longest due first, then the scheduled
    retries (not yet due); with ``stuck_seconds``, only commands due for longer than
    that (a scheduled retry is never stuck)."""
    with ctx.engine.connect() as conn:
        return repository.unsent_outbox(
            conn, stuck_seconds=stuck_seconds, tenant_id=tenant_id, limit=limit
        )


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A quarantined command: its outbox row, its task and the disposal's audit entry."""

    entry: OutboxEntry
    audit: AuditEntry | None


def dead_letters(
    ctx: ServiceContext, *, tenant_id: str | None = None, limit: int = 50
) -> list[DeadLetter]:
    """Quarantined commands, oldest first, each with the audit entry that quarantined it."""
    with ctx.engine.connect() as conn:
        rows = repository.unsent_outbox(
            conn, status=OutboxStatus.QUARANTINED, tenant_id=tenant_id, limit=limit
        )
        return [
            DeadLetter(entry, _first(repository.audit_entries(conn, event_id=entry.row.event_id)))
            for entry in rows
        ]


def dead_letter(
    ctx: ServiceContext, event_id: str, tenant_id: str | None = None
) -> tuple[OutboxEntry, list[AuditEntry]]:
    """One command by its event id, with every audit entry that names it.

    Raises:
        NotFound: ``EVENT_NOT_FOUND``.
    """
    with ctx.engine.connect() as conn:
        entry = repository.outbox_entry(conn, event_id, tenant_id)
        if entry is None:
            raise NotFound(f"no command with event id {event_id}", code="EVENT_NOT_FOUND")
        return entry, repository.audit_entries(conn, event_id=event_id, limit=100)


def _first(entries: list[AuditEntry]) -> AuditEntry | None:
    return entries[-1] if entries else None


@dataclass(frozen=True, slots=True)
class Overview:
    """What the operations view shows first, all of one tenant (``tenant_id``), or of
    every tenant when ``tenant_id`` is None (platform operators)."""

    tenant_id: str | None
    figures: QueueFigures
    quarantined: list[DeadLetter]
    failures_by_type: dict[str, int]
    failed: list[Task]
    audit: list[AuditEntry]
    task_names: dict[str, str]


def overview(ctx: ServiceContext, *, tenant_id: str | None = None, limit: int = 20) -> Overview:
    """The backlog figures, quarantined commands, failures of the last 24 h by type, the
    latest failed tasks and the latest audit entries (each list at most ``limit``), all
    of ``tenant_id`` (None: every tenant)."""
    with ctx.engine.connect() as conn:
        figures = repository.queue_figures(conn, tenant_id=tenant_id)
        failures = repository.failures_by_type(conn, tenant_id=tenant_id)
        failed = repository.search_tasks(
            conn, statuses=[TaskStatus.FAILED.value], tenant_id=tenant_id, limit=limit
        )
        audit = repository.audit_entries(conn, tenant_id=tenant_id, limit=limit)
        names = repository.task_names(conn, [a.task_no for a in audit if a.task_no])
    return Overview(
        tenant_id=tenant_id,
        figures=figures,
        quarantined=dead_letters(ctx, tenant_id=tenant_id, limit=limit),
        failures_by_type=failures,
        failed=failed,
        audit=audit,
        task_names=names,
    )
