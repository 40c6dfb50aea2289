"""The lease watchdog of one execution attempt.

A thread started right after the claim commits and stopped in ``finally``. Every
``heartbeat_seconds`` it renews the lease with a conditional UPDATE that also
requires ``execution_deadline_at > db now``; every ``cancel_poll_seconds`` (at most
2 s) it reads ``cancel_requested`` and whether ``execution_deadline_at`` has passed
(database clock), so a cancel or the deadline stops the attempt within seconds, not at
the next renewal. Zero rows renewed, an error that is not a database blip, or a cancel
request set the abort flag; the worker calls :meth:`Watchdog.check` between batches,
inside long loops and right before every write to storage, and stops there.

The lease by this process's clock: the database wrote ``lease_until = db now +
lease_seconds`` no earlier than the moment this process sent the claim or the renewal,
so the lease surely holds until that moment plus ``lease_seconds`` by this process's
monotonic clock (less a small margin). :meth:`Watchdog.lease_left` says how much of it
remains. While it remains, no other worker can own the task; once it is gone,
:meth:`check` stops the attempt, so nothing reaches storage after the lease may have
been lost.

A database blip (:func:`export_center.outages.is_database_blip`) never aborts the
attempt by itself: renewals are tried again with back-off (0.2 s doubling to 5 s, never
longer than the heartbeat nor a third of the lease left) and cancel polls are skipped, for
as long as the lease lasts by this clock. When it runs out
first, :meth:`check` raises :class:`~export_center.errors.WorkerInterrupted` and the
attempt hands its task back as soon as the database answers.

A pause of the process (SIGSTOP, a frozen VM, heavy swapping) is seen by the process's
:class:`~export_center.attempt.pauses.PauseMonitor` (:meth:`paused_within`), so that what it
causes (a batch past its time limit, a lease run out) is reported as the pause, not as
the provider's fault or the database's.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Connection, Engine

from export_center import repository
from export_center.attempt.pauses import pause_monitor
from export_center.errors import (
    DeadlinePassed,
    ExportCancelled,
    LeaseLost,
    WorkerInterrupted,
    WorkerStopping,
)
from export_center.outages import Backoff, is_database_blip, outage_log
from export_center.repository import shard_units
from export_center.states import TaskStatus

__all__ = ["ShardWatchdog", "Watchdog"]

log = logging.getLogger(__name__)


class Watchdog:
    """Keeps one attempt's lease alive and raises the abort flag when it must stop.

    Args:
        engine: the export center's database.
        task_id: internal task id.
        version: the attempt's ``dispatch_version``.
        owner: the attempt's lease owner.
        lease_seconds: lease length written at each renewal.
        heartbeat_seconds: renewal period (60 s for a 300 s lease).
        cancel_poll_seconds: how often ``cancel_requested`` is read (<= 2 s).
        stopping: set when the process shuts down.
        claimed_at: ``time.monotonic()`` just before the claim was sent (default: now).
        name: the task's public id, for log lines.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        task_id: int,
        version: int,
        owner: str,
        lease_seconds: float,
        heartbeat_seconds: float,
        cancel_poll_seconds: float = 2.0,
        stopping: threading.Event | None = None,
        claimed_at: float | None = None,
        name: str | None = None,
    ) -> None:
        self.engine = engine
        self.task_id = task_id
        self.version = version
        self.owner = owner
        self.name = name or str(task_id)
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.cancel_poll_seconds = min(cancel_poll_seconds, heartbeat_seconds)
        #: Taken off the lease by this clock: the clocks of the database and of this
        #: process may run at slightly different rates.
        self.margin = min(2.0, lease_seconds * 0.1)
        self._lease_base = time.monotonic() if claimed_at is None else claimed_at
        self._stop = threading.Event()
        self._abort = threading.Event()
        self.stopping = stopping or threading.Event()
        self.reason: str | None = None
        self.detail: str | None = None
        self.renewals = 0
        self._outages = outage_log(engine)
        self._pauses = pause_monitor()
        #: Since when the watchdog's thread waits for the database (monotonic; None
        #: between calls).
        self._calling_since: float | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"watchdog-{task_id}-v{version}", daemon=True
        )

    def start(self) -> None:
        """Start renewing."""
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and wait for the thread (called in ``finally``)."""
        self._stop.set()
        self._thread.join(timeout=max(5.0, self.heartbeat_seconds))

    @property
    def aborted(self) -> bool:
        """True once the attempt must stop."""
        return self._abort.is_set()

    def abort(self, reason: str, detail: str | None = None) -> None:
        """Raise the abort flag with a reason (``cancel``, ``lease``, ``deadline``,
        ``error``, ``interrupted``) and, for ``interrupted``, the sentence of what
        happened."""
        if not self._abort.is_set():
            self.reason = reason
            self.detail = detail
            self._abort.set()

    def lease_left(self) -> float:
        """Seconds the lease surely still holds by this process's clock (may be < 0)."""
        return self._lease_base + self.lease_seconds - self.margin - time.monotonic()

    def paused_within(self, seconds: float) -> float:
        """The longest pause of the process that ended in the last ``seconds`` (or goes
        on now), in seconds; 0.0 when there was none."""
        return self._pauses.paused_within(seconds)

    def check(self) -> None:
        """Raise when the attempt must stop; return when it may go on (and may write).

        Raises:
            WorkerStopping: the process is shutting down (the attempt is handed back).
            ExportCancelled: the user asked to cancel.
            DeadlinePassed: ``execution_deadline_at`` passed (transient, retried).
            WorkerInterrupted: the lease may have run out by this process's clock (the
                database did not answer, or the process did not run): hand back.
            LeaseLost: the lease or version is gone, or the watchdog failed.
        """
        if not self._abort.is_set():
            if self.stopping.is_set():
                raise WorkerStopping("the worker is shutting down")
            if self.lease_left() > 0:
                return
            self.abort("interrupted", self._why_lease_ran_out())
        if self.reason == "cancel":
            raise ExportCancelled("cancel requested")
        if self.reason == "deadline":
            raise DeadlinePassed("execution ran past its deadline")
        if self.reason == "interrupted":
            raise WorkerInterrupted(self.detail or "the lease ran out by this worker's clock")
        raise LeaseLost(f"attempt stopped: {self.detail or self.reason}")

    def _why_lease_ran_out(self) -> str:
        paused = self.paused_within(self.lease_seconds + self.heartbeat_seconds)
        if paused:
            return (
                f"this worker did not run for {paused:.0f} s (the process was stopped, "
                "its machine paused or starved) and its lease may have run out meanwhile"
            )
        if self._outages.down:
            return (
                f"the database did not answer for {self._outages.seconds:.0f} s, as long as "
                "the lease lasted"
            )
        calling = self._calling_since
        if calling is not None:
            return (
                f"the database has not answered the lease renewal for "
                f"{time.monotonic() - calling:.0f} s, as long as the lease lasted"
            )
        return "this worker could not renew its lease in time"

    def _run(self) -> None:
        next_renewal = self._lease_base + self.heartbeat_seconds
        backoff = Backoff(0.2, 5.0)
        while True:
            if self._stop.wait(self._sleep(next_renewal)):
                return
            self._calling_since = time.monotonic()
            try:
                if time.monotonic() >= next_renewal:
                    sent = time.monotonic()
                    with self.engine.begin() as conn:
                        renewed, cancel = self.renew(conn)
                    self._outages.worked()
                    backoff = Backoff(0.2, 5.0)
                    if not renewed:
                        self.abort(*self.why_not_renewed())
                        return
                    self._lease_base = sent
                    self.renewals += 1
                    next_renewal = sent + self.heartbeat_seconds
                else:
                    with self.engine.connect() as conn:
                        cancel, past_deadline = repository.cancel_or_deadline(conn, self.task_id)
                    self._outages.worked()
                    if not cancel and past_deadline:
                        self.abort("deadline")
                        return
                if cancel:
                    self.abort("cancel")
                    return
            except Exception as exc:
                if not is_database_blip(exc):  # a dead watchdog must never go unnoticed
                    log.exception("watchdog failed", extra={"taskId": self.name})
                    self.abort("error", f"the watchdog failed: {type(exc).__name__}")
                    return
                self._outages.failed(exc, f"the lease of {self.name}")
                if self.lease_left() <= 0:
                    self.abort("interrupted", self._why_lease_ran_out())
                    return
                if time.monotonic() >= next_renewal:  # a renewal failed: try it again soon
                    pause = min(backoff.next(), self.heartbeat_seconds, self.lease_left() / 3)
                    next_renewal = time.monotonic() + max(0.05, pause)
            finally:
                self._calling_since = None

    def renew(self, conn: Connection) -> tuple[bool, bool]:
        """One renewal in the open transaction ``conn``: the task's lease (and the
        leases of the shards this attempt's threads hold).

        Returns:
            ``(renewed, cancel requested)``.
        """
        return repository.renew_lease(
            conn, self.task_id, self.version, self.owner, self.lease_seconds
        )

    def _sleep(self, next_renewal: float) -> float:
        return max(0.01, min(self.cancel_poll_seconds, next_renewal - time.monotonic()))

    def why_not_renewed(self) -> tuple[str, str | None]:
        """``(abort reason, detail)`` after a renewal touched no row."""
        return self._why_not_renewed()

    def _why_not_renewed(self) -> tuple[str, str | None]:
        try:
            with self.engine.connect() as conn:
                state = repository.attempt_state(conn, self.task_id)
        except Exception as exc:
            if not is_database_blip(exc):
                raise
            return "lease", None
        if state is None:
            return "lease", "task deleted"
        if (
            state.status == TaskStatus.RUNNING
            and state.dispatch_version == self.version
            and state.lease_owner == self.owner
        ):
            if state.cancel_requested:
                return "cancel", None
            if state.past_deadline:
                return "deadline", None
        paused = self.paused_within(self.lease_seconds + self.heartbeat_seconds)
        if paused:
            return "lease", (
                f"this worker did not run for {paused:.0f} s (the process was stopped, its "
                "machine paused or starved) and another worker took the task meanwhile"
            )
        return "lease", None


class ShardWatchdog(Watchdog):
    """The watchdog of one claimed shard: renews the shards its owner holds on the task
    (the claimed one) instead of the task's lease; cancel and deadline are the task's."""

    def renew(self, conn: Connection) -> tuple[bool, bool]:
        """Renew the shard's lease; ``(renewed, cancel requested)``."""
        renewed, cancel = shard_units.renew_owned_shards(
            conn, self.task_id, self.version, self.owner, self.lease_seconds
        )
        return renewed > 0, cancel

    def why_not_renewed(self) -> tuple[str, str | None]:
        """The shard was taken by another worker, or the attempt ended."""
        return "lease", "the shard's lease was taken over or the export's attempt ended"
