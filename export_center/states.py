"""States of tasks and outbox rows, and the one table of allowed task transitions.

The task state machine of DESIGN.md "Task states". States are stored as short
upper-case strings; the API shows tasks in lower case (``queued`` for PENDING).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ALLOWED_TRANSITIONS",
    "OutboxStatus",
    "Phase",
    "TaskStatus",
    "api_state",
    "state_phrase",
]


class TaskStatus(StrEnum):
    """Status of an ``export_task`` row."""

    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"
    REJECTED = "REJECTED"

    @property
    def is_terminal(self) -> bool:
        """True for states no command can move forward (manual retry aside)."""
        return self in (
            TaskStatus.SUCCEEDED,
            TaskStatus.FAILED,
            TaskStatus.CANCELLED,
            TaskStatus.EXPIRED,
            TaskStatus.REJECTED,
        )

    @property
    def is_active(self) -> bool:
        """True while the task counts against the creation limits (PENDING, RUNNING)."""
        return self in (TaskStatus.PENDING, TaskStatus.RUNNING)


class OutboxStatus(StrEnum):
    """Status of an ``export_outbox`` row; QUARANTINED is its only end state."""

    PENDING = "PENDING"
    CLAIMED = "CLAIMED"
    SENT = "SENT"
    QUARANTINED = "QUARANTINED"


class Phase(StrEnum):
    """Where a task is: ``approval`` while it waits for (or ended at) an approver's
    decision, ``queued`` before a claim, then ``fetch``, ``render``, ``store``."""

    APPROVAL = "approval"
    QUEUED = "queued"
    FETCH = "fetch"
    RENDER = "render"
    STORE = "store"


#: Allowed task transitions (DESIGN.md state diagram). Every UPDATE in
#: ``repository`` names its source state, so a row can only move along these edges.
ALLOWED_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.AWAITING_APPROVAL: frozenset(
        {TaskStatus.PENDING, TaskStatus.REJECTED, TaskStatus.CANCELLED}
    ),
    TaskStatus.PENDING: frozenset({TaskStatus.RUNNING, TaskStatus.CANCELLED, TaskStatus.FAILED}),
    TaskStatus.RUNNING: frozenset(
        {TaskStatus.SUCCEEDED, TaskStatus.PENDING, TaskStatus.FAILED, TaskStatus.CANCELLED}
    ),
    TaskStatus.SUCCEEDED: frozenset({TaskStatus.EXPIRED}),
    TaskStatus.FAILED: frozenset({TaskStatus.PENDING}),
    TaskStatus.CANCELLED: frozenset(),
    TaskStatus.EXPIRED: frozenset(),
    TaskStatus.REJECTED: frozenset(),
}

_API_STATE = {
    TaskStatus.AWAITING_APPROVAL: "awaiting_approval",
    TaskStatus.PENDING: "queued",
    TaskStatus.RUNNING: "running",
    TaskStatus.SUCCEEDED: "succeeded",
    TaskStatus.FAILED: "failed",
    TaskStatus.CANCELLED: "cancelled",
    TaskStatus.EXPIRED: "expired",
    TaskStatus.REJECTED: "rejected",
}


def api_state(status: str) -> str:
    """Map a stored status to the lower-case state the API shows (PENDING -> queued)."""
    return _API_STATE[TaskStatus(status)]


_PHRASE = {
    TaskStatus.AWAITING_APPROVAL: "is awaiting approval",
    TaskStatus.PENDING: "is queued",
    TaskStatus.RUNNING: "is running",
    TaskStatus.SUCCEEDED: "has already succeeded",
    TaskStatus.FAILED: "has already failed",
    TaskStatus.CANCELLED: "has already been cancelled",
    TaskStatus.EXPIRED: "has already expired",
    TaskStatus.REJECTED: "was rejected",
}


def state_phrase(status: str) -> str:
    """Where a task is, as the verb phrase of an English sentence about "the export"
    ("is running", "has already been cancelled"): API messages read as sentences."""
    return _PHRASE[TaskStatus(status)]
