"""The lease watchdog of one execution attempt.

A thread started right after the claim commits and stopped in ``finally``. Every
``heartbeat_seconds`` it renews the lease with a conditional UPDATE that also
requires ``execution_deadline_at > db now``; every ``cancel_poll_seconds`` (at most
2 s) it reads ``cancel_requested`` and whether ``execution_deadline_at`` has passed
(database clock), so a cancel or the deadline stops the attempt within seconds, not at
the next renewal. Zero rows renewed, a raised error or a cancel
request set the abort flag; the worker calls :meth:`Watchdog.check` between batches
and inside long loops and stops there.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Engine

from export_center import repository
from export_center.errors import DeadlinePassed, ExportCancelled, LeaseLost, WorkerStopping
from export_center.states import TaskStatus

__all__ = ["Watchdog"]

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
    ) -> None:
        self.engine = engine
        self.task_id = task_id
        self.version = version
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.cancel_poll_seconds = min(cancel_poll_seconds, heartbeat_seconds)
        self._stop = threading.Event()
        self._abort = threading.Event()
        self.stopping = stopping or threading.Event()
        self.reason: str | None = None
        self.renewals = 0
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

    def abort(self, reason: str) -> None:
        """Raise the abort flag with a reason (``cancel``, ``lease``, ``deadline``, ``error``)."""
        if not self._abort.is_set():
            self.reason = reason
            self._abort.set()

    def check(self) -> None:
        """Raise when the attempt must stop; return when it may go on.

        Raises:
            WorkerStopping: the process is shutting down (the attempt is handed back).
            ExportCancelled: the user asked to cancel.
            DeadlinePassed: ``execution_deadline_at`` passed (transient, retried).
            LeaseLost: the lease or version is gone, or the watchdog failed.
        """
        if not self._abort.is_set():
            if self.stopping.is_set():
                raise WorkerStopping("the worker is shutting down")
            return
        if self.reason == "cancel":
            raise ExportCancelled("cancel requested")
        if self.reason == "deadline":
            raise DeadlinePassed("execution ran past its deadline")
        raise LeaseLost(f"attempt stopped: {self.reason}")

    def _run(self) -> None:
        next_renewal = time.monotonic() + self.heartbeat_seconds
        while not self._stop.wait(self._sleep(next_renewal)):
            try:
                if time.monotonic() >= next_renewal:
                    next_renewal = time.monotonic() + self.heartbeat_seconds
                    with self.engine.begin() as conn:
                        renewed, cancel = repository.renew_lease(
                            conn, self.task_id, self.version, self.owner, self.lease_seconds
                        )
                    if renewed:
                        self.renewals += 1
                    else:
                        self.abort(self._why_not_renewed())
                        return
                else:
                    with self.engine.connect() as conn:
                        cancel, past_deadline = repository.cancel_or_deadline(conn, self.task_id)
                    if not cancel and past_deadline:
                        self.abort("deadline")
                        return
                if cancel:
                    self.abort("cancel")
                    return
            except Exception:  # a dead watchdog must never go unnoticed
                log.exception("watchdog failed", extra={"taskId": self.task_id})
                self.abort("error")
                return

    def _sleep(self, next_renewal: float) -> float:
        return max(0.01, min(self.cancel_poll_seconds, next_renewal - time.monotonic()))

    def _why_not_renewed(self) -> str:
        with self.engine.connect() as conn:
            state = repository.attempt_state(conn, self.task_id)
        if state is None:
            return "task deleted"
        if (
            state.status == TaskStatus.RUNNING
            and state.dispatch_version == self.version
            and state.lease_owner == self.owner
        ):
            if state.cancel_requested:
                return "cancel"
            if state.past_deadline:
                return "deadline"
        return "lease"
