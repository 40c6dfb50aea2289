"""A worker process for crash tests: reconciler, publisher and consumer, no API.

Usage: ``python -m tests.support.fault_worker [POINT [N]]`` with the settings in the
environment (``EXPORT_CENTER_*``). With POINT (``fetch``, ``render``, ``store``,
``before_commit``, ``after_commit``) the process kills itself with SIGKILL the N-th
time an export reaches that point (default 1): no cleanup, no goodbye, like a crash.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from export_center.logs import configure_logging
from export_center.runtime import Runtime
from export_center.settings import Settings
from export_center.testing import FaultInjectingRun


def _skew_python_clock(seconds: float) -> None:
    """Move this process's Python clocks ahead (time.time, datetime.now)."""
    import datetime as dt
    import time

    real_time, real_time_ns = time.time, time.time_ns
    time.time = lambda: real_time() + seconds  # type: ignore[assignment]
    time.time_ns = lambda: real_time_ns() + int(seconds * 1e9)  # type: ignore[assignment]

    class SkewedDateTime(dt.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def,override]
            return dt.datetime.fromtimestamp(time.time(), tz)

        @classmethod
        def utcnow(cls):  # type: ignore[no-untyped-def,override]
            return dt.datetime.fromtimestamp(time.time(), dt.UTC).replace(tzinfo=None)

    dt.datetime = SkewedDateTime  # type: ignore[misc]


def main() -> None:
    import time

    skew = float(os.environ.get("EXPORT_CENTER_TEST_CLOCK_SKEW", "0"))
    if skew:
        _skew_python_clock(skew)
    point = sys.argv[1] if len(sys.argv) > 1 else None
    nth = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    settings = Settings()
    configure_logging("INFO", file=settings.data_dir / "logs" / f"worker-{os.getpid()}.log")
    runtime = Runtime(settings, self_url=settings.api.public_base_url, migrate=False)
    seen = {"count": 0}
    lock = threading.Lock()

    def fault(reached: str) -> None:
        if reached != point:
            return
        with lock:
            seen["count"] += 1
            if seen["count"] == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    runtime.consumer.run_factory = FaultInjectingRun.with_fault(fault)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if skew:
        # A half-patched clock confuses APScheduler's own timing, so the passes are
        # driven here; the passes themselves are the code under test.
        runtime.consumer.start()

        def passes() -> None:
            while not stop.is_set():
                runtime.publisher.run_once()
                runtime.reconciler.run_once()
                stop.wait(0.2)

        threading.Thread(target=passes, daemon=True).start()
    else:
        runtime.start()
    # What this process believes the time is; the test compares it with its own clock.
    print(f"worker ready; clock {time.time():.3f}", flush=True)
    while not stop.wait(0.5):
        pass
    runtime.stop()


if __name__ == "__main__":
    main()
