"""The database writes of one execution attempt, each tried again through a blip.

Every write an attempt makes is fenced: a conditional UPDATE naming the task, RUNNING, the
attempt's dispatch version and its lease owner (:mod:`export_center.repository.attempts`).
This module runs them through :func:`export_center.outages.retry_transaction`, with two
budgets:

* **while the lease lasts** (progress, shard plan, checkpoints, audit rows): a write
  that cannot get through before the lease may have run out by this process's clock
  (:meth:`Watchdog.lease_left`) raises :class:`WorkerInterrupted`, and the attempt
  stops writing;
* **until the database answers** (the settle writes: success, failure, cancel, hand-back):
  these are fenced by owner and version, not by the lease's time, so they are right
  whenever they get through; they are tried for up to :data:`SETTLE_SECONDS`, or until
  the process stops. A hand-back that gets through after another worker took the task
  touches nothing.

A write whose first run committed but whose answer was lost is run again; each one here
gives the same result then (a commit that finds the task already SUCCEEDED with this
attempt's file reports success).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from export_center import repository
from export_center.attempt.watchdog import Watchdog
from export_center.commands import COMMAND_TAG
from export_center.errors import (
    DatabaseUnavailable,
    DeadlinePassed,
    LeaseLost,
    WorkerInterrupted,
)
from export_center.outages import retry_transaction
from export_center.repository import AttemptEnd, ShardCheckpoint, StoredFile, Task
from export_center.settings import TaskSettings
from export_center.states import Phase, TaskStatus

__all__ = ["SETTLE_SECONDS", "AttemptWrites"]

log = logging.getLogger(__name__)
T = TypeVar("T")

SETTLE_SECONDS = 900.0
"""How long a settle write (success, failure, cancel, hand-back) waits for the database
to answer again before the attempt gives up and leaves the task to the reconciler."""


class AttemptWrites:
    """The fenced writes of one attempt (dispatch version ``version`` held by ``owner``).

    Args:
        engine: the export center's database.
        task: the task row as read at claim.
        version: the attempt's dispatch version.
        owner: its lease owner.
        watchdog: the attempt's watchdog (its lease clock bounds the progress writes; a
            progress write that touches no row raises the abort flag there).
        settings: the task settings (backoff, retention).
        topic: the command topic of the outbox row a retry or hand-back writes.
        stopping: set when the process shuts down (settle writes stop waiting).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        task: Task,
        version: int,
        owner: str,
        watchdog: Watchdog,
        settings: TaskSettings,
        topic: str,
        stopping: threading.Event,
    ) -> None:
        self.engine = engine
        self.task = task
        self.version = version
        self.owner = owner
        self.watchdog = watchdog
        self.settings = settings
        self.topic = topic
        self.stopping = stopping

    # ------------------------------------------------------------------ budgets

    def while_leased(self, work: Callable[[Connection], T], what: str) -> T:
        """Run ``work`` in a transaction, tried again through blips while the lease lasts.

        Raises:
            WorkerInterrupted: the database did not answer before the lease may have run
                out (nothing more may be written by this attempt).
        """
        try:
            return retry_transaction(
                self.engine,
                work,
                what=f"{what} of {self.task.task_no}",
                seconds_left=self.watchdog.lease_left,
                stop=self.stopping,
            )
        except DatabaseUnavailable as exc:
            raise WorkerInterrupted(
                f"the database did not answer for {exc.seconds:.0f} s, as long as the lease "
                f"lasted ({exc.cause})"
            ) from exc

    def until_answer(self, work: Callable[[Connection], T], what: str) -> T:
        """Run ``work`` in a transaction, tried again through blips for up to
        :data:`SETTLE_SECONDS` (or until the process stops).

        Raises:
            DatabaseUnavailable: the database did not answer in that time.
        """
        deadline = time.monotonic() + SETTLE_SECONDS
        return retry_transaction(
            self.engine,
            work,
            what=f"{what} of {self.task.task_no}",
            seconds_left=lambda: deadline - time.monotonic(),
            stop=self.stopping,
        )

    # ------------------------------------------------------------------ progress

    def progress(
        self,
        *,
        processed: int,
        total: int | None,
        phase: Phase,
        shards: tuple[int, int] | None = None,
    ) -> None:
        """Write rows done, total estimate and phase (and the shard counts).

        Raises:
            LeaseLost, ExportCancelled, ...: the write touched no row (the attempt lost
                its lease; the watchdog says why).
            WorkerInterrupted: the database did not answer while the lease lasted.
        """
        ok = self.while_leased(
            lambda conn: repository.update_progress(
                conn,
                self.task.id,
                self.version,
                self.owner,
                processed=processed,
                total=total,
                phase=phase,
                shards=shards,
            ),
            "write the progress",
        )
        if not ok:
            self._lost()

    def checkpoint(
        self, shard: ShardCheckpoint, *, processed: int, total: int | None, shards: tuple[int, int]
    ) -> None:
        """Write the task's progress and one shard's checkpoint in one transaction.

        Raises:
            LeaseLost, WorkerInterrupted: as :meth:`progress`.
        """

        def work(conn: Connection) -> bool:
            return repository.update_progress(
                conn,
                self.task.id,
                self.version,
                self.owner,
                processed=processed,
                total=total,
                phase=Phase.FETCH,
                shards=shards,
            ) and repository.save_checkpoint(conn, self.task.id, self.version, self.owner, shard)

        if not self.while_leased(work, f"write the checkpoint of shard {shard.key}"):
            self._lost()

    def plan_shards(self, planned: Sequence[ShardCheckpoint]) -> tuple[list[ShardCheckpoint], bool]:
        """Write the shard plan, or keep the same plan with its checkpoints.

        Returns:
            ``(shards with their checkpoints, whether another plan was replaced)``.

        Raises:
            LeaseLost, WorkerInterrupted: as :meth:`progress`.
        """
        answer = self.while_leased(
            lambda conn: repository.plan_task_shards(
                conn, self.task.id, self.version, self.owner, planned
            ),
            "write the shard plan",
        )
        if answer is None:
            self._lost()
            raise AssertionError("unreachable")  # pragma: no cover
        return answer

    def audit_resume(
        self, outcome: str, reason: str, details: Mapping[str, object] | None = None
    ) -> None:
        """Append a ``resume`` row (resumed / restarted) to the task's audit trail;
        ``details`` are its facts (shards done, rows kept, the cause of a restart)."""

        def work(conn: Connection) -> None:
            repository.record_audit(
                conn,
                actor="system:worker",
                action=repository.AuditAction.RESUME,
                outcome=outcome,
                task=repository.read_task(conn, self.task.id),
                dispatch_version=self.version,
                reason=reason,
                details=details,
            )

        self.while_leased(work, "write the audit trail")

    def forget_shards(self, *, forget_counts: bool = False) -> None:
        """Delete the task's shard rows (and with ``forget_counts`` its shard counts)."""
        self.until_answer(
            lambda conn: repository.delete_shards(conn, self.task.id, forget_counts=forget_counts),
            "delete the shard rows",
        )

    def _lost(self) -> None:
        self.watchdog.abort("lease")
        self.watchdog.check()

    # ------------------------------------------------------------------ settle

    def commit(self, stored: StoredFile, *, retention_seconds: float) -> None:
        """RUNNING -> SUCCEEDED with the stored file, fenced by owner, version, deadline.

        Raises:
            DeadlinePassed: the deadline passed before the commit (transient).
            LeaseLost: the commit touched no row otherwise (the caller deletes the file).
            DatabaseUnavailable: the database did not answer for :data:`SETTLE_SECONDS`.
        """

        def work(conn: Connection) -> str:
            if repository.commit_success(
                conn,
                self.task.id,
                self.version,
                self.owner,
                stored,
                retention_seconds=retention_seconds,
            ):
                return "ok"
            current = repository.read_task(conn, self.task.id)
            if (
                current is not None
                and current.status == TaskStatus.SUCCEEDED
                and current.dispatch_version == self.version
                and current.object_key == stored.object_key
            ):
                return "ok"  # an earlier try committed; its answer was lost
            return "late" if repository.deadline_passed(conn, self.task.id) else "lost"

        answer = self.until_answer(work, "commit the file")
        if answer == "late":
            raise DeadlinePassed("execution ran past its deadline before commit")
        if answer == "lost":
            raise LeaseLost("commit touched no row: the attempt lost its lease")

    def record_failure(
        self, *, code: str, message: str, retry: bool, storage_full: bool = False
    ) -> AttemptEnd | None:
        """End the attempt as failed: FAILED, or PENDING after a backoff when ``retry``.

        Returns:
            ``AttemptEnd.RETRY`` or ``FAILED``; None when the attempt had lost its lease.
        """
        return self.until_answer(
            lambda conn: repository.record_failure(
                conn,
                self.task.id,
                self.version,
                self.owner,
                code=code,
                message=message,
                retry=retry,
                backoff_seconds=self.settings.retry_backoff_seconds,
                jitter=self.settings.retry_jitter,
                topic=self.topic,
                tag=COMMAND_TAG,
                min_backoff_seconds=self.settings.storage_full_backoff_seconds
                if storage_full
                else (),
            ),
            "record the failure",
        )

    def cancel(self) -> bool:
        """RUNNING -> CANCELLED; False when the attempt had lost its lease."""
        return self.until_answer(
            lambda conn: repository.finish_cancelled(conn, self.task.id, self.version, self.owner),
            "record the cancel",
        )

    def release(self) -> bool:
        """Hand the task back on shutdown (PENDING, due now, the attempt not counted);
        False when the attempt had lost its lease."""
        return self.until_answer(
            lambda conn: repository.release_for_shutdown(
                conn, self.task.id, self.version, self.owner, topic=self.topic, tag=COMMAND_TAG
            ),
            "hand the task back",
        )

    def hand_back(self, reason: str) -> bool:
        """Hand the task back after an interruption outside the export, and say why in its
        audit trail (``hand_back``/``released``), in one transaction.

        Returns:
            False when the attempt had lost its lease meanwhile (nothing written).

        Raises:
            DatabaseUnavailable: the database did not answer for :data:`SETTLE_SECONDS`.
        """

        def work(conn: Connection) -> bool:
            released = repository.release_for_shutdown(
                conn, self.task.id, self.version, self.owner, topic=self.topic, tag=COMMAND_TAG
            )
            if released:
                repository.record_audit(
                    conn,
                    actor="system:worker",
                    action=repository.AuditAction.HAND_BACK,
                    outcome="released",
                    task=self.task,
                    dispatch_version=self.version,
                    reason=reason,
                )
            return released

        return self.until_answer(work, "hand the task back")

    def log_fields(self) -> dict[str, Any]:
        """The attempt's identifiers for log lines."""
        return {
            "taskId": self.task.task_no,
            "dispatchVersion": self.version,
            "exportType": self.task.export_type,
            "tenantId": self.task.tenant_id,
            "traceId": self.task.trace_id,
        }
