"""Typed rows and the outcomes the repository reports.

:class:`Task` and :class:`OutboxRow` are frozen snapshots of one row, read with
attribute access only (``task.dispatch_version``), so the type checker knows every name
a caller reads. Their fields are the table's columns (a test holds them equal, so a
migration that adds a column adds the field). Outcomes are :class:`enum.StrEnum`
values, so they compare and print as the short strings used in logs and metric labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

__all__ = [
    "ApprovalNeed",
    "AttemptEnd",
    "CreateLimits",
    "CreateReason",
    "CreateResult",
    "LimitReached",
    "NewTask",
    "OutboxRow",
    "QuarantineOutcome",
    "Recovery",
    "StoredFile",
    "Task",
]


class _Row:
    """A typed row read from a ``SELECT`` of every column of its table."""

    __slots__ = ()

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        """The typed row of a ``SELECT`` of every column of the table."""
        return cls(**{field.name: row[field.name] for field in dataclasses.fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, eq=False)
class Task(_Row):
    """One ``export_task`` row (times are naive UTC, written by the database clock)."""

    id: int
    task_no: str
    export_type: str
    format: str
    task_name: str
    parameters_json: str
    parameters_hash: str
    request_id: str | None
    tenant_id: str
    app_code: str
    requested_by: str
    status: str
    phase: str
    processed_rows: int
    total_rows: int | None
    shards_done: int | None
    shards_total: int | None
    dispatch_version: int
    attempt_count: int
    max_attempts: int
    lease_recoveries: int
    next_retry_at: datetime
    lease_owner: str | None
    lease_until: datetime | None
    last_heartbeat_at: datetime | None
    execution_deadline_at: datetime | None
    cancel_requested: bool
    failure_code: str | None
    failure_message: str | None
    warning_message: str | None
    object_key: str | None
    file_name: str | None
    content_type: str | None
    size_bytes: int | None
    row_count: int | None
    trace_id: str
    time_zone: str
    requested_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    expires_at: datetime | None
    updated_at: datetime
    file_spec_json: str | None
    manifest_json: str | None
    schedule_id: int | None
    notify_json: str | None
    expiry_notified_at: datetime | None
    row_ceiling: int | None


@dataclass(frozen=True, slots=True, eq=False)
class OutboxRow(_Row):
    """One ``export_outbox`` row: the command of one dispatch version."""

    id: int
    event_id: str
    task_id: int
    dispatch_version: int
    topic: str
    tag: str
    message_key: str
    payload_json: str
    status: str
    attempt_count: int
    next_retry_at: datetime
    lease_owner: str | None
    lease_until: datetime | None
    sent_at: datetime | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    #: ``task`` (the command) or ``shard-<no>.<attempt>`` (a shard wake-up).
    unit: str


@dataclass(frozen=True, slots=True)
class NewTask:
    """What a create request asks for, after validation."""

    export_type: str
    format: str
    task_name: str
    parameters: Mapping[str, Any]
    tenant_id: str
    app_code: str
    requested_by: str
    max_attempts: int
    request_id: str | None = None
    time_zone: str = "UTC"
    trace_id: str | None = None  # from the caller's traceparent; None starts a new trace
    file_spec_json: str | None = None  # canonical FileSpec JSON; None: the defaults
    schedule_id: int | None = None  # the schedule whose run asks; None: a person or service
    notify_json: str | None = None  # the create's notify targets (JSON); None: the defaults
    row_ceiling: int | None = None  # the requester's row ceiling; None: the type's max_rows
    estimated_rows: int | None = None  # the provider's estimate at create (total_rows)
    approval: ApprovalNeed | None = None  # it waits for approval; None: queued at once


@dataclass(frozen=True, slots=True)
class ApprovalNeed:
    """Why a new task waits for approval (``reasons``, one sentence), who may decide
    (``approver_permission``) and for how long (``expire_seconds``, database clock)."""

    approver_permission: str
    reasons: str
    expire_seconds: float
    rules_json: str | None = None  # governance_rules.ApprovalRule.matches, as JSON


@dataclass(frozen=True, slots=True)
class CreateLimits:
    """The creation guard: duplicate window (seconds) and active-task limits."""

    duplicate_window_seconds: float = 60.0
    max_active_per_user: int = 3
    max_active_per_type: int = 5


class CreateReason(StrEnum):
    """Why :func:`create_task` returned its task."""

    CREATED = "created"
    IDEMPOTENT = "idempotent"
    KEY_REUSED = "key_reused"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class CreateResult:
    """Outcome of a create: the task and why it was returned."""

    task: Task
    created: bool
    reason: CreateReason


class LimitReached(Exception):
    """An active-task limit refused the create; ``scope`` is ``user`` or ``type``."""

    def __init__(self, scope: str, limit: int):
        super().__init__(scope, limit)
        self.scope = scope
        self.limit = limit


@dataclass(frozen=True, slots=True)
class StoredFile:
    """The file an attempt produced: key, name, MIME type, bytes, rows, warning, and the
    manifest body (JSON text: its files, hashes and control totals; signed when read)."""

    object_key: str
    file_name: str
    content_type: str
    size_bytes: int
    row_count: int
    warning: str | None = None
    manifest_json: str | None = None


class AttemptEnd(StrEnum):
    """How a failed attempt ended: another attempt follows, or the task failed."""

    RETRY = "retry"
    FAILED = "failed"


class Recovery(StrEnum):
    """What the reconciler made of an attempt whose worker stopped renewing its lease."""

    CANCELLED = "cancelled"
    RETRY = "retry"
    FAILED = "failed"


class QuarantineOutcome(StrEnum):
    """What the dead-letter handler did with a dead-lettered command."""

    QUARANTINED = "quarantined"
    STALE = "stale"
