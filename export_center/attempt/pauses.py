"""Pauses of this process: seconds in which none of its threads ran.

A process stopped with SIGSTOP, a virtual machine frozen or migrated, or a host swapping
hard does not run at all for a while; to the process it looks as if time jumped. Its
leases may have run out meanwhile, and whatever it was waiting for (a provider's answer,
a batch's time limit) seems to have taken that long. :class:`PauseMonitor` tells such a
jump from a slow call: one daemon thread that only sleeps a quarter of a second at a
time and never waits for I/O, so a wake-up far later than asked means the whole process
did not run. Each pause is logged once (a WARNING naming its length) and remembered, so
that an attempt reports what it caused as the pause, not as the provider's fault or the
database's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

__all__ = ["PAUSE_SECONDS", "PauseMonitor", "pause_monitor"]

log = logging.getLogger(__name__)

PAUSE_SECONDS = 5.0
"""A wake-up later than planned by more than this counts as a pause of the process."""

_TICK_SECONDS = 0.25


class PauseMonitor:
    """Notices when the process did not run (see the module docstring).

    Args:
        tick_seconds: how long the thread sleeps between two looks.
        threshold: a wake-up this much later than planned is a pause (seconds).
    """

    def __init__(self, tick_seconds: float = _TICK_SECONDS, threshold: float = PAUSE_SECONDS):
        self.tick_seconds = tick_seconds
        self.threshold = threshold
        #: ``(monotonic end, seconds)`` of the pauses seen, newest last.
        self.pauses: deque[tuple[float, float]] = deque(maxlen=32)
        self._awake = time.monotonic()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pause-monitor", daemon=True)
        self._thread.start()

    def paused_within(self, seconds: float) -> float:
        """The longest pause that ended in the last ``seconds``, or one going on now
        (the monitor's thread has not woken since), in seconds; 0.0 when none."""
        now = time.monotonic()
        with self._lock:
            ended = max(
                (length for end, length in self.pauses if end >= now - seconds), default=0.0
            )
            asleep = now - self._awake - self.tick_seconds
        return max(ended, asleep if asleep > self.threshold else 0.0)

    def _run(self) -> None:
        while True:
            before = time.monotonic()
            time.sleep(self.tick_seconds)
            now = time.monotonic()
            late = now - before - self.tick_seconds
            with self._lock:
                self._awake = now
                if late > self.threshold:
                    self.pauses.append((now, late))
            if late > self.threshold:
                log.warning(
                    "this worker did not run for %.0f s (the process was stopped, its "
                    "machine paused or starved): leases and time limits passed meanwhile",
                    late,
                )


_MONITOR: PauseMonitor | None = None
_MONITOR_LOCK = threading.Lock()


def pause_monitor() -> PauseMonitor:
    """The process's monitor, started on first use."""
    global _MONITOR
    with _MONITOR_LOCK:
        if _MONITOR is None:
            _MONITOR = PauseMonitor()
        return _MONITOR
