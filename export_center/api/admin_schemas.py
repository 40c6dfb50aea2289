"""Bodies of the admin API (operators' reads and actions), JSON in camelCase."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from export_center.operations import DeadLetter, Overview, TaskReport
from export_center.repository import AuditEntry, OutboxEntry, OutboxRow, Task
from export_center.states import api_state

__all__ = [
    "ActionBody",
    "AdminTask",
    "AuditPublic",
    "CommandPublic",
    "DeadLetterPublic",
    "DeadLetterReportPublic",
    "OverviewPublic",
    "TaskReportPublic",
]


def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class ActionBody(BaseModel):
    """Body of an admin retry or cancel: why (kept in the audit trail)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=3, max_length=500, description="Why, for the audit trail")
    fresh: bool = Field(
        False,
        description="Retry only: start every shard from zero instead of resuming from "
        "the checkpoints",
    )


class AdminTask(BaseModel):
    """A task as an operator sees it (ids, attempt and lease included)."""

    taskId: str
    taskName: str = Field(description="The name the requester gave the export")
    tenant: str
    app: str
    owner: str
    exportType: str
    format: str
    state: str
    phase: str
    processed: int
    total: int | None
    shardsDone: int | None = Field(default=None, description="Sharded export: shards done")
    shardsTotal: int | None = Field(
        default=None, description="Sharded export: shards in all (None when not sharded)"
    )
    attempts: int
    maxAttempts: int
    dispatchVersion: int
    traceId: str
    leaseOwner: str | None
    leaseUntil: datetime | None
    requestedAt: datetime | None
    startedAt: datetime | None
    finishedAt: datetime | None
    errorCode: str | None
    error: str | None

    @classmethod
    def of(cls, task: Task) -> AdminTask:
        """The admin view of a task row."""
        return cls(
            taskId=task.task_no,
            taskName=task.task_name,
            tenant=task.tenant_id,
            app=task.app_code,
            owner=task.requested_by,
            exportType=task.export_type,
            format=task.format.lower(),
            state=api_state(task.status),
            phase=task.phase,
            processed=task.processed_rows,
            total=task.total_rows,
            shardsDone=task.shards_done,
            shardsTotal=task.shards_total,
            attempts=task.attempt_count,
            maxAttempts=task.max_attempts,
            dispatchVersion=task.dispatch_version,
            traceId=task.trace_id,
            leaseOwner=task.lease_owner,
            leaseUntil=_utc(task.lease_until),
            requestedAt=_utc(task.requested_at),
            startedAt=_utc(task.started_at),
            finishedAt=_utc(task.completed_at),
            errorCode=task.failure_code,
            error=task.failure_message,
        )


class CommandPublic(BaseModel):
    """One outbox row: the command of a dispatch version, or a shard wake-up of a
    distributed export (``unit``)."""

    eventId: str
    taskId: str | None
    taskName: str | None = None
    dispatchVersion: int
    unit: str = Field(
        "task",
        description="task: the command; shard-<no>.<claims>: the wake-up of one shard of a "
        "distributed export",
    )
    status: str
    sends: int
    ageSeconds: float | None = Field(
        description="Seconds since the command became due (0 while it is scheduled)"
    )
    scheduled: bool = Field(
        False,
        description="An automatic retry whose time has not come (dueAt): it waits by "
        "design and is no backlog",
    )
    dueAt: datetime | None = Field(None, description="When the command is or became due")
    createdAt: datetime | None
    sentAt: datetime | None
    nextTryAt: datetime | None
    lastError: str | None

    @classmethod
    def of(
        cls,
        row: OutboxRow,
        task_no: str | None = None,
        age: float | None = None,
        task_name: str | None = None,
    ) -> CommandPublic:
        """The public view of an outbox row."""
        return cls(
            eventId=row.event_id,
            taskId=task_no or row.message_key,
            taskName=task_name,
            dispatchVersion=row.dispatch_version,
            unit=row.unit,
            status=row.status.lower(),
            sends=row.attempt_count,
            ageSeconds=age,
            createdAt=_utc(row.created_at),
            sentAt=_utc(row.sent_at),
            nextTryAt=_utc(row.next_retry_at),
            lastError=row.last_error,
        )

    @classmethod
    def of_entry(cls, entry: OutboxEntry) -> CommandPublic:
        """The public view of an outbox row with its task id and name, and when it is
        due (its age counts from then)."""
        public = cls.of(entry.row, entry.task_no, round(max(entry.age_seconds, 0.0), 1))
        return public.model_copy(
            update={
                "taskName": entry.task_name,
                "scheduled": entry.scheduled,
                "dueAt": _utc(entry.due_at),
            }
        )


class AuditPublic(BaseModel):
    """One audit entry."""

    at: datetime
    actor: str
    action: str
    outcome: str
    taskId: str | None
    taskName: str | None = None
    eventId: str | None
    dispatchVersion: int | None
    reason: str | None
    details: dict[str, Any] | None

    @classmethod
    def of(cls, entry: AuditEntry, names: Mapping[str, str] | None = None) -> AuditPublic:
        """The public view of an audit row; ``names`` maps task ids to task names."""
        at = _utc(entry.occurred_at)
        assert at is not None
        return cls(
            at=at,
            actor=entry.actor,
            action=entry.action,
            outcome=entry.outcome,
            taskId=entry.task_no,
            taskName=(names or {}).get(entry.task_no or ""),
            eventId=entry.event_id,
            dispatchVersion=entry.dispatch_version,
            reason=entry.reason,
            details=entry.details,
        )


class TaskReportPublic(BaseModel):
    """A task, its commands, its audit trail (newest first) and its last failure."""

    task: AdminTask
    commands: list[CommandPublic]
    audit: list[AuditPublic]
    manifest: dict[str, Any] | None = Field(
        default=None, description="The signed manifest of a succeeded export, else null"
    )

    @classmethod
    def of(cls, report: TaskReport, manifest: dict[str, Any] | None = None) -> TaskReportPublic:
        """The public view of an operator's task report (with its signed manifest)."""
        task = report.task
        return cls(
            task=AdminTask.of(task),
            commands=[CommandPublic.of(row, task_name=task.task_name) for row in report.outbox],
            audit=[AuditPublic.of(a, {task.task_no: task.task_name}) for a in report.audit],
            manifest=manifest,
        )


class DeadLetterPublic(BaseModel):
    """A quarantined command, its task's state, and the audit entry that set it aside."""

    command: CommandPublic
    taskState: str
    quarantinedAt: datetime | None
    reason: str | None

    @classmethod
    def of(cls, letter: DeadLetter) -> DeadLetterPublic:
        """The public view of a dead letter."""
        return cls(
            command=CommandPublic.of_entry(letter.entry),
            taskState=api_state(letter.entry.task_status),
            quarantinedAt=_utc(letter.audit.occurred_at) if letter.audit else None,
            reason=letter.audit.reason if letter.audit else letter.entry.row.last_error,
        )


class DeadLetterReportPublic(BaseModel):
    """One command by its event id, its task's state and every audit entry about it."""

    command: CommandPublic
    taskState: str
    audit: list[AuditPublic]

    @classmethod
    def of(cls, entry: OutboxEntry, audit: list[AuditEntry]) -> DeadLetterReportPublic:
        """The public view of one dead letter with its audit trail."""
        return cls(
            command=CommandPublic.of_entry(entry),
            taskState=api_state(entry.task_status),
            audit=[AuditPublic.of(a) for a in audit],
        )


class OverviewPublic(BaseModel):
    """What the operations view shows first, all of one tenant (an admin's own), or of
    every tenant (``tenant`` null: a platform operator)."""

    tenant: str | None = Field(description="The tenant of every figure and list; null: all")
    queueAgeSeconds: float
    outboxPending: int = Field(description="Commands due and not yet sent (the backlog)")
    outboxOldestAgeSeconds: float = Field(
        description="Seconds since the oldest of those became due"
    )
    outboxMaxAttempt: int
    outboxScheduled: int = Field(
        description="Automatic retries whose time has not come (no backlog)"
    )
    outboxNextScheduledAt: datetime | None = Field(description="When the first of those is due")
    quarantined: list[DeadLetterPublic]
    failuresByType: dict[str, int] = Field(description="FAILED in the last 24 h, by type")
    failed: list[AdminTask]
    audit: list[AuditPublic]

    @classmethod
    def of(cls, overview: Overview) -> OverviewPublic:
        """The public view of the operations overview."""
        figures = overview.figures
        return cls(
            tenant=overview.tenant_id,
            queueAgeSeconds=round(figures.queue_age_seconds, 1),
            outboxPending=figures.outbox_pending,
            outboxOldestAgeSeconds=round(figures.outbox_oldest_age_seconds, 1),
            outboxMaxAttempt=figures.outbox_max_attempt,
            outboxScheduled=figures.outbox_scheduled,
            outboxNextScheduledAt=_utc(figures.outbox_next_scheduled_at),
            quarantined=[DeadLetterPublic.of(d) for d in overview.quarantined],
            failuresByType=overview.failures_by_type,
            failed=[AdminTask.of(t) for t in overview.failed],
            audit=[AuditPublic.of(a, overview.task_names) for a in overview.audit],
        )
