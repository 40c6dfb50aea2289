"""Running ``run_once()`` loops on a schedule (CONVENTIONS: one class per loop).

Each background component exposes ``run_once() -> int`` (work done in one bounded
pass). :class:`LoopRunner` calls it every ``loop_seconds`` on APScheduler's background
scheduler (named in the design card), never overlapping itself, and stops cleanly.
Tests call ``run_once()`` directly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from apscheduler.schedulers.background import BackgroundScheduler

__all__ = ["LoopRunner", "PassLoop"]

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
            _guarded(name, loop.run_once), "interval", seconds=every_seconds, id=name
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


def _guarded(name: str, fn: Callable[[], int]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception:  # a failed pass is logged; the next one runs on schedule
            log.exception("loop %s: pass failed", name)

    return run
