"""The command consumer: claim, execute, commit.

For each command ``{taskId, dispatchVersion}`` the consumer runs the claim UPDATE
(status PENDING, same version, ``next_retry_at <= db now``). When it touches no row,
the task is read again to tell why (:class:`ClaimBranch`: the task is missing, the
command is of an older version, the task ended, a live or an expired lease holds it,
its backoff is still running, or another worker won the race); every branch
acknowledges the command, logs why and does nothing else. When it wins the
claim it runs :class:`~export_center.attempt.run.ExportRun` under a
:class:`~export_center.attempt.watchdog.Watchdog`.

A command whose body does not parse or whose ``schemaVersion`` is unsupported is
released, not acknowledged, so the broker redelivers it and finally dead-letters it:
the only legal source of dead letters.

The claim rides out a database blip: it is tried again with back-off for up to
:data:`CLAIM_RETRY_SECONDS` (a claim whose commit succeeded but whose answer was lost is
recognised by its lease owner, which is new for every command). When the database stays
away longer, the command is acknowledged unexecuted and the reconciler sends it again
once the task is found waiting.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from enum import StrEnum
from typing import Protocol

from sqlalchemy import Connection, Engine

from export_center import repository
from export_center.attempt.context import AttemptOutcome, RunContext
from export_center.attempt.run import ExportRun
from export_center.attempt.shard_unit import run_shard_units
from export_center.commands import SHARD_KIND, Command, InvalidCommand
from export_center.commands import decode as parse_command
from export_center.errors import DatabaseUnavailable
from export_center.logs import log_context
from export_center.loops import receive_loop
from export_center.outages import is_database_blip, retry_transaction
from export_center.repository import Task
from export_center.states import TaskStatus
from export_center.storage.keys import new_object_key
from export_center.transport.base import Delivery, Transport
from export_center.writers.formats import task_format

__all__ = [
    "CLAIM_RETRY_SECONDS",
    "Attempt",
    "ClaimBranch",
    "Command",
    "Consumer",
    "InvalidCommand",
    "RunFactory",
    "parse_command",
]

log = logging.getLogger(__name__)

CLAIM_RETRY_SECONDS = 30.0
"""How long a claim is tried again through a database blip before the command is left
to the reconciler."""


class ClaimBranch(StrEnum):
    """The outcomes of handling one command: ``executed``, or why the claim touched no row
    (each of those branches acknowledges the command and changes nothing)."""

    EXECUTED = "executed"
    TASK_MISSING = "task_missing"
    OLDER_VERSION = "older_version"
    TERMINAL = "terminal"
    RUNNING_LIVE_LEASE = "running_live_lease"
    RUNNING_EXPIRED_LEASE = "running_expired_lease"
    PENDING_BACKOFF = "pending_backoff"
    LOST_RACE = "lost_race"
    #: A shard wake-up found no shard to claim (all taken, done, or the attempt ended).
    NO_SHARD = "no_shard"
    #: The process is stopping: acknowledged unexecuted (the reconciler sends it again).
    STOPPING = "stopping"
    #: The body is not a command this version reads: released for redelivery.
    INVALID = "invalid"
    #: Handling raised: acknowledged, the database decides what happens next.
    ERROR = "error"


def classify_unclaimed(engine: Engine, command: Command) -> ClaimBranch:
    """Tell why a claim touched no row, judging times with the database clock."""
    with engine.connect() as conn:
        state = repository.claim_state(conn, command.task_no)
    if state is None:
        return ClaimBranch.TASK_MISSING
    if state.dispatch_version != command.dispatch_version:
        return ClaimBranch.OLDER_VERSION
    if TaskStatus(state.status).is_terminal:
        return ClaimBranch.TERMINAL
    if state.status == TaskStatus.RUNNING:
        return (
            ClaimBranch.RUNNING_LIVE_LEASE
            if state.lease_live
            else ClaimBranch.RUNNING_EXPIRED_LEASE
        )
    if state.in_backoff:
        return ClaimBranch.PENDING_BACKOFF
    return ClaimBranch.LOST_RACE


class Attempt(Protocol):
    """One claimed attempt, run once to its end."""

    def run(self) -> AttemptOutcome:
        """Run the attempt and settle the task row; returns how it ended."""
        ...


class RunFactory(Protocol):
    """Builds the attempt of a claimed task: :class:`~export_center.attempt.run.ExportRun`
    (the class itself is the factory), or a subclass with a documented fault seam
    (:class:`export_center.testing.FaultInjectingRun`).

    Args, in order: the database, the run context, the task row as read at claim, the
    claimed ``dispatch_version`` and the lease owner; ``object_key`` is the key the
    claim recorded for this attempt's file, ``claimed_at`` the ``time.monotonic()``
    just before the claim was sent.
    """

    def __call__(
        self,
        engine: Engine,
        context: RunContext,
        task: Task,
        version: int,
        owner: str,
        /,
        *,
        object_key: str | None = ...,
        claimed_at: float | None = ...,
    ) -> Attempt:
        """The attempt, ready to :meth:`~Attempt.run`."""
        ...


class Consumer:
    """Receives commands from a transport and executes the tasks it claims.

    Args:
        engine: the export center's database.
        transport: where commands come from.
        context: everything an export run needs (registry, storage, client, settings).
        owner: this instance's lease owner id (one per process; attempts add nothing,
            the version names the attempt).
        threads: exports run at once.
        run_factory: builds the attempt (``ExportRun``; tests inject a subclass).
    """

    def __init__(
        self,
        engine: Engine,
        transport: Transport,
        context: RunContext,
        *,
        owner: str,
        threads: int = 1,
        run_factory: RunFactory = ExportRun,
    ) -> None:
        self.engine = engine
        self.transport = transport
        self.context = context
        self.owner = owner
        self.threads = threads
        self.run_factory: RunFactory = run_factory
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        #: The last outcomes as ``(task_no, outcome)``, newest last (bounded: a
        #: diagnostic of a long-running process, never a growing log).
        self.handled: deque[tuple[str, ClaimBranch]] = deque(maxlen=1000)

    def start(self) -> None:
        """Start the worker threads."""
        self._stop.clear()
        for i in range(self.threads):
            worker = threading.Thread(target=self._loop, name=f"consumer-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def request_stop(self) -> None:
        """Take no new command (running exports go on until they reach a check)."""
        self._stop.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking commands and wait for running exports (graceful stop)."""
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout)
        self._workers.clear()

    def _loop(self) -> None:
        receive_loop(
            self.transport.receive,
            self.handle_delivery,
            self._stop,
            what="command receive",
            logger=log,
            timeout_seconds=0.5,
        )

    def handle_delivery(self, delivery: Delivery) -> ClaimBranch:
        """Parse, handle and settle one delivery, exactly once: acknowledged as soon as
        the claim is committed (or when handling ends), released only when the body is
        not a command this version reads.

        Returns:
            The outcome.
        """
        try:
            command = parse_command(delivery.body)
        except InvalidCommand as exc:
            log.error(
                "unparseable command released for redelivery",
                extra={
                    "messageId": delivery.message_id,
                    "reason": str(exc),
                    "deliveryAttempt": delivery.delivery_attempt,
                },
            )
            delivery.release()
            return ClaimBranch.INVALID
        acked = False

        def ack_once() -> None:
            nonlocal acked
            if not acked:
                acked = True
                delivery.ack()

        with log_context(
            taskId=command.task_no,
            eventId=command.event_id,
            dispatchVersion=command.dispatch_version,
            traceId=command.trace_id,
            messageId=delivery.message_id,
        ):
            try:
                outcome = self.handle(command, on_claimed=ack_once)
            except Exception:
                # The database decides what happens next (the reconciler recovers the
                # task); redelivering would only repeat the same failure.
                log.exception("command handling failed")
                outcome = ClaimBranch.ERROR
        ack_once()
        return outcome

    def handle(
        self, command: Command, *, on_claimed: Callable[[], None] | None = None
    ) -> ClaimBranch:
        """Claim and execute one command, or explain why not.

        Args:
            command: the decoded command.
            on_claimed: called once the claim is committed, before the export runs:
                from then on the database protects the attempt (lease, watchdog,
                reconciler), so the message is acknowledged at once instead of being
                held for the whole export (docs/operations.md, "Acknowledgement").

        Returns:
            ``executed``, or the branch that explains why the claim touched no row.
        """
        if self._stop.is_set():
            # Shutting down: the command is acknowledged unexecuted; the database still
            # has the task PENDING and the reconciler sends the command again.
            self.handled.append((command.task_no, ClaimBranch.STOPPING))
            return ClaimBranch.STOPPING
        # The lease owner names this attempt, not just this process: a restarted process
        # with the same instance id can never renew or commit an old attempt (CASES E24).
        owner = f"{self.owner}/{secrets.token_hex(4)}"
        if command.kind == SHARD_KIND:
            return self._handle_shard(command, owner, on_claimed)
        claimed_at = time.monotonic()
        try:
            task, object_key, claimed = self._claim(command, owner)
        except DatabaseUnavailable as exc:
            log.warning(
                "command left for the reconciler: %s",
                exc,
                extra={"taskId": command.task_no, "dispatchVersion": command.dispatch_version},
            )
            self.handled.append((command.task_no, ClaimBranch.ERROR))
            return ClaimBranch.ERROR
        if not claimed:
            try:
                branch = classify_unclaimed(self.engine, command)
            except Exception as exc:
                if not is_database_blip(exc):
                    raise
                branch = ClaimBranch.ERROR
            log.info(
                "command acknowledged without execution: %s",
                branch,
                extra={
                    "taskId": command.task_no,
                    "eventId": command.event_id,
                    "dispatchVersion": command.dispatch_version,
                    "branch": branch,
                },
            )
            self.handled.append((command.task_no, branch))
            return branch
        assert task is not None
        if on_claimed is not None:
            on_claimed()
        self.run_factory(
            self.engine,
            self.context,
            task,
            command.dispatch_version,
            owner,
            object_key=object_key,
            claimed_at=claimed_at,
        ).run()
        self.handled.append((command.task_no, ClaimBranch.EXECUTED))
        return ClaimBranch.EXECUTED

    def _handle_shard(
        self, command: Command, owner: str, on_claimed: Callable[[], None] | None
    ) -> ClaimBranch:
        """A shard wake-up: claim and run shards of the task's running attempt
        (:func:`~export_center.attempt.shard_unit.run_shard_units`). Acknowledged at
        once: each claim is fenced by the database, and a shard nobody runs is taken
        over by its coordinator or freed by the reconciler."""
        if on_claimed is not None:
            on_claimed()
        until = time.monotonic() + CLAIM_RETRY_SECONDS
        task = retry_transaction(  # through blips; raises DatabaseUnavailable after them
            self.engine,
            lambda conn: repository.read_task_by_no(conn, command.task_no),
            what=f"read {command.task_no} for a shard wake-up",
            seconds_left=lambda: until - time.monotonic(),
            stop=self.context.stopping,
        )
        if task is None:
            branch = ClaimBranch.TASK_MISSING
        elif task.dispatch_version != command.dispatch_version:
            branch = ClaimBranch.OLDER_VERSION
        elif task.status != TaskStatus.RUNNING:
            branch = ClaimBranch.NO_SHARD
        else:
            ran = run_shard_units(
                self.engine,
                self.context,
                task,
                command.dispatch_version,
                owner,
                prefer=command.shard_no,
            )
            branch = ClaimBranch.EXECUTED if ran else ClaimBranch.NO_SHARD
        self.handled.append((command.task_no, branch))
        return branch

    def _claim(self, command: Command, owner: str) -> tuple[Task | None, str | None, bool]:
        """Claim the command's attempt for ``owner``, tried again through blips.

        Returns:
            ``(task as read, the attempt's object key, claimed)``.

        Raises:
            DatabaseUnavailable: the database did not answer for CLAIM_RETRY_SECONDS.
        """
        settings = self.context.settings.task

        def work(conn: Connection) -> tuple[Task | None, str | None, bool]:
            task = repository.read_task_by_no(conn, command.task_no)
            if task is None:
                return None, None, False
            if (
                task.status == TaskStatus.RUNNING
                and task.lease_owner == owner
                and task.dispatch_version == command.dispatch_version
            ):
                return task, task.object_key, True  # an earlier try committed the claim
            extension = task_format(task.format).extension
            key = new_object_key(task.task_no, extension, tenant=task.tenant_id)
            claimed = repository.claim_task(
                conn,
                task.id,
                command.dispatch_version,
                owner,
                lease_seconds=settings.lease_seconds,
                max_duration_seconds=settings.max_duration_minutes * 60,
                object_key=key,
            )
            return task, key, claimed

        deadline = time.monotonic() + CLAIM_RETRY_SECONDS
        return retry_transaction(
            self.engine,
            work,
            what=f"claim {command.task_no}",
            seconds_left=lambda: deadline - time.monotonic(),
            stop=self._stop,
        )
