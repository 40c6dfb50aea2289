"""All SQL of the export center, by role, returning typed rows.

Every statement that creates, claims, renews, commits, retries, recovers or reads a
task lives in this package, and all of it compares and computes times with the
database clock (:func:`~export_center.db.db_now`, :func:`~export_center.db.db_now_plus`),
never the process clock. Every write that belongs to one execution attempt names
``dispatch_version`` and ``lease_owner``; an UPDATE that touches no row means the
attempt lost its lease.

The functions take an open :class:`sqlalchemy.Connection` inside a transaction
(``engine.begin()``) unless they say otherwise, so callers can group them.

Modules:

* :mod:`.rows`: :class:`Task`, :class:`OutboxRow` and the outcome enums;
* :mod:`.tables`: the tables, named for what they hold;
* :mod:`.create`: the guard row, idempotency keys, the duplicate window, the limits;
* :mod:`.outbox`: the transactional outbox and its publisher's writes;
* :mod:`.attempts`: one attempt's claim, renewal, progress and end;
* :mod:`.reads`: lookups, lists and the questions of consumer, watchdog and metrics;
* :mod:`.recovery`: lost leases and files past retention (the reconciler);
* :mod:`.actions`: cancel and manual retry (a person's actions);
* :mod:`.quarantine`: the dead-letter disposal;
* :mod:`.audit`: the append-only trail of every disposal;
* :mod:`.operators`: reads across owners for the operator tools;
* :mod:`.shards`: the shards of sharded exports and their fenced checkpoints.
"""

from __future__ import annotations

from export_center.commands import COMMAND_SCHEMA_VERSION
from export_center.db import db_now, db_now_plus
from export_center.repository.actions import manual_retry, request_cancel
from export_center.repository.attempts import (
    claim_task,
    commit_success,
    finish_cancelled,
    record_failure,
    release_for_shutdown,
    renew_lease,
    start_next_attempt,
    update_progress,
)
from export_center.repository.audit import (
    ActorRole,
    AuditAction,
    AuditEntry,
    Disposition,
    actor_role,
    audit_entries,
    dispositions,
    purge_audit,
    record_audit,
)
from export_center.repository.create import canonical_parameters, create_task, guard_row_exists
from export_center.repository.operators import (
    OutboxEntry,
    failures_by_type,
    outbox_entry,
    search_tasks,
    task_names,
    unsent_outbox,
)
from export_center.repository.outbox import (
    OUTBOX_BACKOFF_SECONDS,
    claim_outbox_row,
    due_outbox_ids,
    insert_outbox,
    mark_outbox_sent,
    outbox_backoff,
    outbox_rows,
    outbox_send_failed,
    purge_sent_outbox,
    release_expired_outbox_claims,
    release_outbox_backoff,
    resend_outbox_row,
    stale_sent_outbox_ids,
    tasks_missing_outbox,
)
from export_center.repository.quarantine import QUARANTINE_MESSAGE, QuarantineMismatch, quarantine
from export_center.repository.reads import (
    AttemptState,
    ClaimState,
    QueueFigures,
    active_tasks,
    attempt_state,
    cancel_or_deadline,
    claim_state,
    deadline_passed,
    list_tasks,
    ping,
    queue_figures,
    read_task,
    read_task_by_no,
    retention_left_seconds,
    retention_passed,
    task_file_states,
    task_ids_by_no,
)
from export_center.repository.recovery import (
    expired_running_tasks,
    mark_expired,
    recover_expired_lease,
    tasks_past_retention,
)
from export_center.repository.rows import (
    AttemptEnd,
    CreateLimits,
    CreateReason,
    CreateResult,
    LimitReached,
    NewTask,
    OutboxRow,
    QuarantineOutcome,
    Recovery,
    StoredFile,
    Task,
)
from export_center.repository.shards import (
    ShardCheckpoint,
    ShardStatus,
    delete_shards,
    load_shards,
    plan_task_shards,
    save_checkpoint,
)

__all__ = [
    "COMMAND_SCHEMA_VERSION",
    "OUTBOX_BACKOFF_SECONDS",
    "QUARANTINE_MESSAGE",
    "ActorRole",
    "AttemptEnd",
    "AuditAction",
    "AuditEntry",
    "AttemptState",
    "ClaimState",
    "CreateLimits",
    "CreateReason",
    "CreateResult",
    "Disposition",
    "LimitReached",
    "NewTask",
    "OutboxEntry",
    "OutboxRow",
    "QuarantineMismatch",
    "QuarantineOutcome",
    "QueueFigures",
    "Recovery",
    "ShardCheckpoint",
    "ShardStatus",
    "StoredFile",
    "Task",
    "active_tasks",
    "actor_role",
    "attempt_state",
    "audit_entries",
    "canonical_parameters",
    "cancel_or_deadline",
    "claim_outbox_row",
    "claim_state",
    "claim_task",
    "commit_success",
    "create_task",
    "db_now",
    "db_now_plus",
    "deadline_passed",
    "delete_shards",
    "dispositions",
    "due_outbox_ids",
    "expired_running_tasks",
    "failures_by_type",
    "finish_cancelled",
    "guard_row_exists",
    "insert_outbox",
    "list_tasks",
    "load_shards",
    "manual_retry",
    "mark_expired",
    "mark_outbox_sent",
    "outbox_backoff",
    "outbox_entry",
    "outbox_rows",
    "outbox_send_failed",
    "ping",
    "plan_task_shards",
    "purge_audit",
    "purge_sent_outbox",
    "quarantine",
    "queue_figures",
    "read_task",
    "read_task_by_no",
    "record_audit",
    "record_failure",
    "recover_expired_lease",
    "release_expired_outbox_claims",
    "release_for_shutdown",
    "renew_lease",
    "request_cancel",
    "release_outbox_backoff",
    "resend_outbox_row",
    "search_tasks",
    "retention_left_seconds",
    "retention_passed",
    "save_checkpoint",
    "stale_sent_outbox_ids",
    "start_next_attempt",
    "task_file_states",
    "task_ids_by_no",
    "task_names",
    "tasks_missing_outbox",
    "tasks_past_retention",
    "unsent_outbox",
    "update_progress",
]
