"""The command consumer: claim, execute, commit (seed 002 §8).

For each command ``{taskId, dispatchVersion}`` the consumer runs the claim UPDATE
(status PENDING, same version, ``next_retry_at <= db now``). When it touches no row,
the task is read again and one of the seven branches of 002 §8.2 applies; every
branch acknowledges the command, logs why and does nothing else. When it wins the
claim it runs :class:`~export_center.pipeline.ExportRun` under a
:class:`~export_center.watchdog.Watchdog`.

A command whose body does not parse or whose ``schemaVersion`` is unsupported is
released, not acknowledged, so the broker redelivers it and finally dead-letters it
(002 §6.4): the only legal source of dead letters.
"""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass

import orjson
from sqlalchemy import Engine, select

from export_center import repository
from export_center.db import db_now
from export_center.models import ExportTask
from export_center.pipeline import ExportRun, RunContext
from export_center.states import TaskStatus
from export_center.storage import file_extension, new_object_key
from export_center.transport.base import Delivery, Transport

__all__ = ["ClaimBranch", "Command", "Consumer", "InvalidCommand", "parse_command"]

log = logging.getLogger(__name__)
T = ExportTask.__table__
SUPPORTED_SCHEMA_VERSIONS = frozenset({repository.COMMAND_SCHEMA_VERSION})


class InvalidCommand(ValueError):
    """A message body that is not a command this version understands."""


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed command message (identifiers only, seed 002 §6.4)."""

    event_id: str
    task_no: str
    dispatch_version: int
    schema_version: int
    trace_id: str | None = None


def parse_command(body: bytes) -> Command:
    """Parse and check a command body.

    Raises:
        InvalidCommand: not JSON, a field missing or mistyped, or an unsupported
            ``schemaVersion``.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidCommand(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidCommand("body is not a JSON object")
    schema = data.get("schemaVersion")
    if schema not in SUPPORTED_SCHEMA_VERSIONS:
        raise InvalidCommand(f"unsupported schemaVersion {schema!r}")
    event_id, task_no, version = (
        data.get("eventId"),
        data.get("taskId"),
        data.get("dispatchVersion"),
    )
    if not isinstance(event_id, str) or not isinstance(task_no, str):
        raise InvalidCommand("eventId and taskId must be strings")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidCommand("dispatchVersion must be a positive integer")
    trace = data.get("traceId")
    return Command(
        event_id, task_no, version, int(schema), trace if isinstance(trace, str) else None
    )


class ClaimBranch:
    """Names of the outcomes of handling one command (002 §8.2 plus ``executed``)."""

    EXECUTED = "executed"
    TASK_MISSING = "task_missing"
    OLDER_VERSION = "older_version"
    TERMINAL = "terminal"
    RUNNING_LIVE_LEASE = "running_live_lease"
    RUNNING_EXPIRED_LEASE = "running_expired_lease"
    PENDING_BACKOFF = "pending_backoff"
    LOST_RACE = "lost_race"


def classify_unclaimed(engine: Engine, command: Command) -> str:
    """Tell why a claim touched no row (002 §8.2), judging times with the db clock."""
    with engine.connect() as conn:
        row = conn.execute(
            select(
                T.c.status,
                T.c.dispatch_version,
                T.c.lease_until > db_now(),
                T.c.next_retry_at > db_now(),
            ).where(T.c.task_no == command.task_no)
        ).first()
    if row is None:
        return ClaimBranch.TASK_MISSING
    status, version, lease_live, in_backoff = row
    if version != command.dispatch_version:
        return ClaimBranch.OLDER_VERSION
    if TaskStatus(status).is_terminal:
        return ClaimBranch.TERMINAL
    if status == TaskStatus.RUNNING:
        return ClaimBranch.RUNNING_LIVE_LEASE if lease_live else ClaimBranch.RUNNING_EXPIRED_LEASE
    if in_backoff:
        return ClaimBranch.PENDING_BACKOFF
    return ClaimBranch.LOST_RACE


class Consumer:
    """Receives commands from a transport and executes the tasks it claims.

    Args:
        engine: the export center's database.
        transport: where commands come from.
        context: everything an export run needs (registry, storage, client, settings).
        owner: this instance's lease owner id (one per process; attempts add nothing,
            the version names the attempt).
        threads: exports run at once.
    """

    def __init__(
        self,
        engine: Engine,
        transport: Transport,
        context: RunContext,
        *,
        owner: str,
        threads: int = 1,
    ) -> None:
        self.engine = engine
        self.transport = transport
        self.context = context
        self.owner = owner
        self.threads = threads
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self.handled: list[tuple[str, str]] = []  # (task_no, outcome), for tests and logs

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
        while not self._stop.is_set():
            try:
                delivery = self.transport.receive(0.5)
            except Exception:
                log.exception("receive failed")
                self._stop.wait(1.0)
                continue
            if delivery is not None:
                self.handle_delivery(delivery)

    def handle_delivery(self, delivery: Delivery) -> str:
        """Parse, handle and settle one delivery; returns the outcome name."""
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
            return "invalid"
        try:
            outcome = self.handle(command, delivery)
        except Exception:
            # The database decides what happens next (the reconciler recovers the
            # task); redelivering would only repeat the same failure.
            log.exception("command handling failed", extra={"taskId": command.task_no})
            outcome = "error"
        delivery.ack()
        return outcome

    def handle(self, command: Command, delivery: Delivery | None = None) -> str:
        """Claim and execute one command, or explain why not (002 §8.2).

        Returns:
            ``executed`` or the name of the claim branch that applied.
        """
        if self._stop.is_set():
            # Shutting down: the command is acknowledged unexecuted; the database still
            # has the task PENDING and the reconciler sends the command again.
            self.handled.append((command.task_no, "stopping"))
            return "stopping"
        # The lease owner names this attempt, not just this process: a restarted process
        # with the same instance id can never renew or commit an old attempt (CASES E24).
        owner = f"{self.owner}/{secrets.token_hex(4)}"
        object_key: str | None = None
        with self.engine.begin() as conn:
            task = repository.read_task_by_no(conn, command.task_no)
            if task is not None:
                object_key = new_object_key(task["task_no"], file_extension(task["format"]))
            claimed = task is not None and repository.claim_task(
                conn,
                task["id"],
                command.dispatch_version,
                owner,
                lease_seconds=self.context.settings.task.lease_seconds,
                max_duration_seconds=self.context.settings.task.max_duration_minutes * 60,
                object_key=object_key,
            )
        if not claimed:
            branch = classify_unclaimed(self.engine, command)
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
        if delivery is not None:
            # The claim is committed: from here the database protects the attempt
            # (lease, watchdog, reconciler), so the message is acknowledged now rather
            # than held for the whole export (docs/operations.md, "Acknowledgement").
            delivery.ack()
        ExportRun(
            self.engine, self.context, task, command.dispatch_version, owner, object_key=object_key
        ).run()
        self.handled.append((command.task_no, ClaimBranch.EXECUTED))
        return ClaimBranch.EXECUTED
