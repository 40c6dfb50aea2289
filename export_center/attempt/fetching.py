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
repeats any earlier cursor of the stream is a contract error at once, and so are
:data:`EMPTY_PAGES_IN_A_ROW` (100) pages in a row without rows that all say
``hasMore`` (each with a new cursor, such a provider was called 14,000 to 26,000 times a
minute until the attempt's deadline).

:class:`PageSizer` holds the page size (``limit``) of one fetch stream: it halves it
when a page is too large (413, over 4 MB, out of memory) and asks for the same cursor
again, and grows it back after pages that fit.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from export_center.errors import (
    ExportFailure,
    PageTooLarge,
    ProviderContractError,
    ProviderRejected,
)
from export_center.provider_client import Batch, too_slow

__all__ = [
    "AWAIT_GRACE_SECONDS",
    "AWAIT_SLICE_SECONDS",
    "EMPTY_PAGES_IN_A_ROW",
    "PAGE_FLOOR_ROWS",
    "PAGE_GROW_AFTER",
    "BatchFetcher",
    "CursorLog",
    "InFlight",
    "PageSizer",
]

log = logging.getLogger(__name__)

AWAIT_SLICE_SECONDS = 0.5
"""Longest wait for a fetch between two checks of the watchdog and the batch limit."""
AWAIT_GRACE_SECONDS = 1.0
"""After the batch deadline, how long the attempt still waits for the fetch thread to
report the limit itself (its message names the last try); then it stops waiting."""

PAGE_FLOOR_ROWS = 200
"""The smallest page :class:`PageSizer` halves down to (or the type's batch size when
that is smaller)."""
PAGE_GROW_AFTER = 4
"""Pages that fit in a row after which :class:`PageSizer` doubles a reduced size."""

EMPTY_PAGES_IN_A_ROW = 100
"""Pages in a row with no rows and ``hasMore: true`` that end a stream as a contract
error. A provider may answer an empty page before the end (one that filters rows after
reading them, or stops a slow scan at a time budget), so the bound leaves room for
long stretches without rows; a provider that never ends costs 100 calls, not 30 minutes
of them."""

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
    """The cursors one fetch stream has sent, to refuse a provider that never ends.

    One log per stream (an attempt's single stream, or one shard), kept for its life:

    * a cursor that repeats any earlier cursor of the stream (A -> B -> A) would send
      the same rows again until the row cap. Only a 16-byte BLAKE2b digest per cursor
      is kept (about 100 bytes with its dict entry, whatever the cursor's length);
    * :data:`EMPTY_PAGES_IN_A_ROW` pages in a row without rows, each saying
      ``hasMore`` with a new cursor, would page until the attempt's deadline. A page
      with rows starts the count again.

    Both are permanent: the next attempt meets the same provider.
    """

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}
        self._empty = 0  # pages without rows in a row, up to the last one added

    def add(self, cursor: str | None, batch_no: int, rows: int) -> None:
        """Record the ``nextCursor`` of batch ``batch_no`` (which said ``hasMore``).

        Args:
            cursor: the batch's ``nextCursor``.
            batch_no: the batch's number in the stream (1-based).
            rows: the rows the batch carried.

        Raises:
            ProviderContractError: the cursor is missing or empty; it repeats the cursor
                of an earlier batch (the message names both, cursor shortened); or this
                is the :data:`EMPTY_PAGES_IN_A_ROW`-th page in a row without rows
                (the message names the last cursor).
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
        self._empty = 0 if rows else self._empty + 1
        if self._empty >= EMPTY_PAGES_IN_A_ROW:
            raise ProviderContractError(
                f"{self._empty} empty pages in a row said hasMore "
                f"(last nextCursor {_short(cursor)})"
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


class PageSizer:
    """The page size (``limit``) of one fetch stream, halved when a page is too large.

    The rule (docs/provider-guide.md, "Page size"):

    * a page that is too large (:class:`PageTooLarge`: the provider answered 413, the
      answer was over the 4 MB cap, or decoding it ran out of memory) is asked for again,
      same cursor, with half the rows, down to :data:`PAGE_FLOOR_ROWS` (200; the
      configured size when that is smaller);
    * a page too large at the floor ends the export: permanent for a 413
      (:class:`ProviderRejected`, "provider refused pages of 200 rows (413 Payload Too
      Large) after halving from 5,000") and for an answer over the cap
      (:class:`ProviderContractError`); transient for a MemoryError (the memory may be
      free at the next attempt: the :class:`PageTooLarge` itself);
    * after every :data:`PAGE_GROW_AFTER` (4) pages in a row that fit at a reduced size,
      the size doubles, never above the configured size. A provider that refuses pages
      above 1,000 rows of 4,000 configured thus sees 4,000 (413), 2,000 (413), 1,000 x 4,
      2,000 (413), 1,000 x 4, ...: one refused request in five.

    One sizer per fetch stream (an attempt now; a shard of it later), created with the
    stream and dropped with it: a new attempt starts at the configured size again. The
    stream's fetches are sequential (one in flight), so the sizer takes no lock. Each
    call gets the batch's whole time limit; the attempt's own wait
    (:meth:`BatchFetcher.wait`) still ends the batch at its limit, smaller pages
    included.

    Args:
        configured: the type's batch size (the request's ``limit``).
        floor: the smallest size halved to.
        grow_after: pages that fit in a row before a reduced size doubles.

    Attributes:
        limit: the size the next page is asked with.
    """

    def __init__(
        self,
        configured: int,
        *,
        floor: int = PAGE_FLOOR_ROWS,
        grow_after: int = PAGE_GROW_AFTER,
    ) -> None:
        self.configured = configured
        self.floor = min(floor, configured)
        self.grow_after = max(1, grow_after)
        self.limit = configured
        self._fitted = 0

    def fetch(self, call: Callable[[int], Batch]) -> Batch:
        """``call(limit)`` at the current size, smaller while the page is too large.

        Args:
            call: fetches the stream's next page with ``limit`` rows (the same cursor
                each time).

        Returns:
            The page.

        Raises:
            ProviderRejected: 413 at the floor (permanent).
            ProviderContractError: over the 4 MB cap at the floor (permanent).
            PageTooLarge: out of memory at the floor (transient).
            ExportFailure: what ``call`` raised otherwise.
        """
        while True:
            try:
                batch = call(self.limit)
            except PageTooLarge as exc:
                self.shrink(exc)
            else:
                self.fitted()
                return batch

    def shrink(self, error: PageTooLarge) -> None:
        """Halve the size after ``error`` (down to the floor).

        Raises:
            ExportFailure: the size is at the floor already (see :meth:`fetch`).
        """
        if self.limit <= self.floor:
            raise self._at_floor(error) from error
        before = self.limit
        self.limit = max(self.floor, self.limit // 2)
        self._fitted = 0
        log.warning("%s: asking for %d rows instead of %d", error.message, self.limit, before)

    def fitted(self) -> None:
        """Count a page that fit; double a reduced size after ``grow_after`` in a row."""
        if self.limit >= self.configured:
            return
        self._fitted += 1
        if self._fitted >= self.grow_after:
            self._fitted = 0
            self.limit = min(self.configured, self.limit * 2)
            log.info("%d pages fit in a row: asking for %d rows", self.grow_after, self.limit)

    def _at_floor(self, error: PageTooLarge) -> ExportFailure:
        """The error that ends the export when a page at the floor is too large."""
        if self.configured > self.limit:
            how = f"after halving from {self.configured:,}"
        else:
            how = "(the type's batch size, not made smaller)"
        if error.cause == "413":
            return ProviderRejected(
                f"provider refused pages of {self.limit:,} rows (413 Payload Too Large) "
                f"{how}{error.detail}"
            )
        if error.cause == "body":
            return ProviderContractError(
                f"pages of {self.limit:,} rows are over the 4 MB cap ({error.reason}) {how}"
            )
        return error
