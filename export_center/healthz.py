"""Waiting for a served process to answer ``GET /healthz``: the one poll of the embedded
server's start, the sample-provider child's start, the bench and the tests.

``/healthz`` answers 200 as soon as the HTTP server serves (it reads nothing); a process
that has not bound its port yet refuses the connection, which counts as "not yet".
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

__all__ = ["NotHealthy", "wait_healthy"]


class NotHealthy(RuntimeError):
    """The process stopped, or did not answer ``/healthz`` in time.

    Attributes:
        url: the base URL that was polled.
        stopped: True when the process ended (``alive()`` said so), False when the
            time ran out.
    """

    def __init__(self, url: str, *, stopped: bool, timeout: float) -> None:
        super().__init__(
            f"{url} stopped before it answered /healthz"
            if stopped
            else f"{url} did not answer /healthz within {timeout:g} s"
        )
        self.url = url
        self.stopped = stopped


def wait_healthy(
    url: str,
    *,
    timeout: float = 120.0,
    alive: Callable[[], bool] | None = None,
    interval: float = 0.1,
    request_timeout: float = 2.0,
) -> None:
    """Poll ``GET <url>/healthz`` until it answers 200.

    Args:
        url: the base URL (``http://127.0.0.1:8000``), without a trailing slash.
        timeout: how long to wait in all, seconds.
        alive: tells whether the process is still running (a thread's ``is_alive``, a
            child's ``poll() is None``); asked before each try, so a process that died
            is reported at once instead of after ``timeout``.
        interval: the pause between two tries, seconds.
        request_timeout: the longest one try waits for an answer, seconds.

    Raises:
        NotHealthy: the process stopped (``stopped=True``) or the time ran out.
    """
    deadline = time.monotonic() + timeout
    while True:
        if alive is not None and not alive():
            raise NotHealthy(url, stopped=True, timeout=timeout)
        try:
            if httpx.get(f"{url}/healthz", timeout=request_timeout).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet, or busy starting
        if time.monotonic() >= deadline:
            raise NotHealthy(url, stopped=False, timeout=timeout)
        time.sleep(interval)
