"""Running ``run_once()`` loops on a schedule (CONVENTIONS: one class per loop).

Each background component exposes ``run_once() -> int`` (work done in one bounded
pass). :class:`LoopRunner` calls it every ``loop_seconds`` on APScheduler's background
scheduler (named in the design card), never overlapping itself, and stops cleanly.
Tests call ``run_once()`` directly.

A pass that fails on a database blip (:func:`export_center.outages.is_database_blip`)
is not logged with a traceback: the loop logs the outage once when it starts and once
when it ends (:class:`~export_center.outages.OutageLog`), and skips its passes with a
back-off meanwhile (1 s doubling up to 30 s), so a database restart costs two log lines
per loop instead of one traceback every half second.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from apscheduler.schedulers.background import BackgroundScheduler

from export_center.outages import Backoff, OutageLog, is_database_blip
from export_center.transport.base import Delivery

__all__ = ["GuardedPass", "LoopRunner", "PassLoop", "ReceiveFailures", "receive_loop"]

T = TypeVar("T")

log = logging.getLogger(__name__)
# "skipped: maximum number of running instances reached" is the point of max_instances=1.
logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)


class PassLoop(Protocol):
    """Anything with a bounded ``run_once()`` pass."""

    def run_once(self) -> int:
        """Do one bounded pass; return the amount of work done."""


class LoopRunner:
    """Schedules several ``run_once`` passes on one background scheduler."""

    def __init__(self) -> None:
        self._scheduler = BackgroundScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
        )

    def add(self, name: str, loop: PassLoop, every_seconds: float) -> None:
        """Run ``loop.run_once`` every ``every_seconds`` (the first pass after one period)."""
        self._scheduler.add_job(
            GuardedPass(name, loop.run_once), "interval", seconds=every_seconds, id=name
        )

    def run_soon(self, name: str) -> None:
        """Bring the next pass of loop ``name`` forward to now (the schedule stays).

        A no-op when no such loop runs here, or while a pass of it is running (that
        pass, or the next one on schedule, sees the new work). Thread-safe.
        """
        job = self._scheduler.get_job(name)
        if job is not None and self._scheduler.running:
            job.modify(next_run_time=datetime.now(UTC))

    def start(self) -> None:
        """Start the scheduler thread."""
        self._scheduler.start()

    def pause(self) -> None:
        """Run no further passes (returns at once; a running pass finishes)."""
        if self._scheduler.running:
            self._scheduler.pause()

    def stop(self) -> None:
        """Stop scheduling and wait for running passes to end."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)


class GuardedPass:
    """One loop's pass as the scheduler calls it: errors logged, database outages
    ridden out quietly.

    A pass that raises a database blip records it in the loop's :class:`OutageLog`
    (one WARNING when the outage starts, one INFO when a pass works again) and makes the
    next passes wait: 1 s after the first failure, doubling up to 30 s. Any other error
    is logged with its traceback and the next pass runs on schedule.

    Args:
        name: the loop's name ("publisher").
        fn: the pass (``run_once``).
    """

    def __init__(self, name: str, fn: Callable[[], int]) -> None:
        self.name = name
        self.fn = fn
        self.outage = OutageLog(f"loop {name}: the database", log)
        self._backoff = Backoff(1.0, 30.0)
        self._next = 0.0

    def __call__(self) -> None:
        """Run the pass unless a database outage makes it wait."""
        if time.monotonic() < self._next:
            return
        try:
            self.fn()
        except Exception as exc:
            if not is_database_blip(exc):  # logged; the next pass runs on schedule
                log.exception("loop %s: pass failed", self.name)
                return
            self.outage.failed(exc, f"a {self.name} pass")
            self._next = time.monotonic() + self._backoff.next()
            return
        if self.outage.down:
            self._backoff = Backoff(1.0, 30.0)
        self.outage.worked()


class ReceiveFailures:
    """How a receive loop lives through a broker outage: quietly and with backoff.

    The first failed receive is one WARNING with the reason (no traceback); while it
    lasts, one WARNING a minute says it still fails; the first receive that works again
    is one INFO line. Between failed receives the loop waits ``pause()`` seconds:
    1 s, doubling up to ``max_pause`` (10 s), so consumption resumes within 10 s of the
    broker's return without a flood of logs or reconnects meanwhile.

    Args:
        what: the loop's name in the log lines ("command receive").
        logger: where to write.
        max_pause: the longest wait between two failed receives, seconds.
    """

    def __init__(self, what: str, logger: logging.Logger, *, max_pause: float = 10.0) -> None:
        self.what = what
        self.logger = logger
        self.max_pause = max_pause
        self.failures = 0
        self._since = 0.0
        self._last_report = 0.0

    def failed(self, exc: BaseException) -> float:
        """Record a failed receive; returns the seconds to wait before the next one."""
        now = time.monotonic()
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        if self.failures == 0:
            self._since = self._last_report = now
            self.logger.warning("%s failed: %s; retrying", self.what, reason)
        elif now - self._last_report >= 60:
            self._last_report = now
            self.logger.warning(
                "%s still failing after %.0f s (%d tries): %s",
                self.what,
                now - self._since,
                self.failures + 1,
                reason,
            )
        self.failures += 1
        return float(min(self.max_pause, 2 ** (self.failures - 1)))

    def worked(self) -> None:
        """Record a receive that worked (after failures: one INFO line)."""
        if self.failures:
            self.logger.info(
                "%s works again after %.0f s (%d failed tries)",
                self.what,
                time.monotonic() - self._since,
                self.failures,
            )
            self.failures = 0


def receive_loop(
    receive: Callable[[float], Delivery | None],
    handle: Callable[[Delivery], T],
    stop: threading.Event,
    *,
    what: str,
    logger: logging.Logger,
    timeout_seconds: float,
    failed: Callable[[T], bool] | None = None,
    pause: Backoff | None = None,
) -> None:
    """Receive and handle deliveries until ``stop`` is set (the body of a receive thread).

    A receive that raises (the broker is down or restarting) is ridden out as
    :class:`ReceiveFailures` says: quiet logs, 1 s doubling up to 10 s between tries.
    When ``failed`` says a handled delivery failed (it went back to the broker because
    the database failed), the loop waits ``pause`` before the next receive (doubling,
    :class:`~export_center.outages.Backoff`) instead of spinning on the same failure; a
    delivery handled without failure resets the pause.

    Args:
        receive: ``receive(timeout_seconds) -> Delivery | None`` of the source.
        handle: handles and settles one delivery; returns its outcome.
        stop: set to end the loop (checked between receives; waits end at once).
        what: the loop's name in the log lines ("command receive").
        logger: where the outage lines go.
        timeout_seconds: the longest one receive waits for a message, seconds.
        failed: tells from an outcome that the handling failed; None: never.
        pause: the waits after failed handlings; given together with ``failed``.

    Raises:
        ValueError: only one of ``failed`` and ``pause`` is given.
    """
    if (failed is None) != (pause is None):
        raise ValueError("failed and pause are given together")
    failures = ReceiveFailures(what, logger)
    while not stop.is_set():
        try:
            delivery = receive(timeout_seconds)
        except Exception as exc:  # the broker is down or restarting
            stop.wait(failures.failed(exc))
            continue
        failures.worked()
        if delivery is None:
            continue
        outcome = handle(delivery)
        if failed is None or pause is None:
            continue
        if failed(outcome):
            stop.wait(pause.next())
        else:
            pause.reset()
