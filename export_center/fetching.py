"""The attempt's fetch thread: one batch in flight, never holding a cancel.

Every fetch of an attempt, the first one too, runs in one background thread, so that
while the writer renders batch N, batch N+1 is already being fetched (one batch in
flight, so memory stays bounded). The attempt's own thread waits for a fetch in slices
of at most 0.5 s, checking the watchdog (cancel, deadline, lease, shutdown) and the
batch's time limit between slices. When it stops waiting it sets the fetch's abort
event and does not wait for the fetch thread: a read blocked inside it ends at the read
timeout at worst, and its answer is never used, so a fetch in flight never holds a
cancel past the watchdog's poll plus half a second.

:class:`CursorLog` refuses a provider that pages in a loop: a ``nextCursor`` that
repeats any earlier cursor of the attempt is a contract error at once.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from export_center.errors import ProviderContractError
from export_center.provider_client import Batch, too_slow

__all__ = ["AWAIT_GRACE_SECONDS", "AWAIT_SLICE_SECONDS", "BatchFetcher", "CursorLog", "InFlight"]

AWAIT_SLICE_SECONDS = 0.5
"""Longest wait for a fetch between two checks of the watchdog and the batch limit."""
AWAIT_GRACE_SECONDS = 1.0
"""After the batch deadline, how long the attempt still waits for the fetch thread to
report the limit itself (its message names the last try); then it stops waiting."""

#: ``fetch(cursor, snapshot_token, abort, time_limit_seconds) -> Batch``.
FetchFunction = Callable[[str | None, str | None, threading.Event, float], Batch]


@dataclass(frozen=True, slots=True)
class InFlight:
    """A fetch submitted to the fetch thread.

    Attributes:
        future: the fetch's result.
        deadline: ``time.monotonic()`` value when its time limit ends.
        seconds: the time limit (for the message).
    """

    future: Future[Batch]
    deadline: float
    seconds: float


def _short(text: str, limit: int = 40) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters (``'abc...'``)."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


class CursorLog:
    """The cursors one attempt has sent, to refuse a provider that pages in a loop.

    A cursor that repeats any earlier cursor of the attempt (A -> B -> A) would send the
    same rows again until the row cap. Only a 16-byte BLAKE2b digest per cursor is kept
    (about 100 bytes with its dict entry, whatever the cursor's length).
    """

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}

    def add(self, cursor: str | None, batch_no: int) -> None:
        """Record the ``nextCursor`` of batch ``batch_no`` (which said ``hasMore``).

        Raises:
            ProviderContractError: the cursor is missing or empty, or it repeats the
                cursor of an earlier batch (the message names both, cursor shortened).
        """
        if not cursor:
            raise ProviderContractError(f"batch {batch_no} says hasMore but has no nextCursor")
        digest = hashlib.blake2b(cursor.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first = self._seen.get(digest)
        if first is not None:
            raise ProviderContractError(
                f"nextCursor {_short(cursor)} of batch {batch_no} repeats the cursor "
                f"already sent for batch {first} (the provider pages in a loop)"
            )
        self._seen[digest] = batch_no + 1


class BatchFetcher:
    """Fetches an attempt's batches in one background thread.

    Args:
        fetch: does one fetch (in the fetch thread); stops when its abort event is set.
        check: raises when the attempt must stop (the watchdog's ``check``); called
            between waiting slices.
        time_limit: seconds one batch may take, retries included.
        name: the thread's name prefix.
    """

    def __init__(
        self, fetch: FetchFunction, check: Callable[[], None], time_limit: float, name: str
    ) -> None:
        self._fetch = fetch
        self._check = check
        self.time_limit = time_limit
        self.cursors = CursorLog()
        self._abort = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit(self, cursor: str | None, snapshot: str | None) -> InFlight:
        """Start fetching the batch at ``cursor`` (the fetch thread is idle)."""
        deadline = time.monotonic() + self.time_limit
        future = self._pool.submit(
            contextvars.copy_context().run,  # the fetch thread logs with the task's ids
            self._fetch,
            cursor,
            snapshot,
            self._abort,
            self.time_limit,
        )
        return InFlight(future, deadline, self.time_limit)

    def wait(self, flight: InFlight) -> Batch:
        """Wait for a fetch, checking the watchdog and the batch limit every 0.5 s.

        Returns:
            The batch.

        Raises:
            ExportCancelled, DeadlinePassed, LeaseLost, WorkerStopping: from ``check``,
                within 0.5 s of its flag.
            ProviderTooSlow: the batch's time limit passed (the fetch thread's own error
                when it reports within a second, else this thread's).
            ExportFailure: what the fetch raised.
        """
        give_up = flight.deadline + AWAIT_GRACE_SECONDS
        while True:
            left = give_up - time.monotonic()
            try:
                return flight.future.result(timeout=max(0.0, min(AWAIT_SLICE_SECONDS, left)))
            except TimeoutError:
                self._check()
                if time.monotonic() >= give_up:
                    raise too_slow(flight.seconds) from None

    def abandon(self) -> None:
        """Stop without waiting: the fetch thread stops at its next chunk or timeout."""
        self._abort.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Release the fetch thread after the last batch (nothing is in flight)."""
        self._pool.shutdown(wait=True)
