"""Test doubles of the export center's ports and loops, injected where tests need them.

The service never imports this module. Each double subclasses the production class and
adds only what a test observes or breaks:

* :class:`MemoryTransport`: the in-process transport that also records what it sent and
  dead-lettered, and can refuse the next ``fail_sends`` sends;
* :class:`Publisher`: the outbox publisher that can stop dead right after a send, before
  marking the row SENT (``crash_after_send``), like a process killed at that instant;
* :class:`FaultInjectingRun`: an export attempt that calls a function at its named
  points (``fetch``, ``render``, ``store``, ``before_commit``, ``after_commit``), for
  crash tests; inject it with ``Consumer(run_factory=FaultInjectingRun.with_fault(f))``.
  It uses the attempt's documented seam: :class:`FaultInjectingAttempt` overrides the
  public steps of :class:`~export_center.attempt.steps.Attempt` and is named as the
  run's :attr:`~export_center.attempt.run.ExportRun.steps`; the run's public
  :meth:`~export_center.attempt.run.ExportRun.commit` is wrapped;
* :class:`DatabaseOutage`: makes an engine refuse every statement for a while, as a
  database that restarts does (each statement raises the driver's "can't connect"),
  through SQLAlchemy's own event hooks on that engine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, BinaryIO, ClassVar, cast

import pymysql
from sqlalchemy import Engine, event
from sqlalchemy.exc import OperationalError

from export_center import publisher, repository
from export_center.attempt.context import AttemptOutcome
from export_center.attempt.fetching import PageSizer
from export_center.attempt.run import ExportRun
from export_center.attempt.steps import Attempt
from export_center.provider_client import Batch, ProviderRequest
from export_center.transport import memory
from export_center.transport.base import OutgoingMessage, TransportError
from export_center.writers import ExportWriter

__all__ = [
    "DatabaseOutage",
    "DeadlockVictim",
    "FaultInjectingAttempt",
    "FaultInjectingRun",
    "MemoryTransport",
    "Publisher",
]


class MemoryTransport(memory.MemoryTransport):
    """:class:`export_center.transport.MemoryTransport` that records and can fail.

    Attributes:
        sent: every message sent, in order.
        dead_letters: every delivery moved to the dead-letter queue.
        fail_sends: the next this-many sends raise :class:`TransportError`.
    """

    def __init__(self, *, max_deliveries: int = 3) -> None:
        super().__init__(max_deliveries=max_deliveries)
        self.sent: list[OutgoingMessage] = []
        self.dead_letters: list[Any] = []
        self.fail_sends = 0
        self._record = threading.Lock()

    def send(self, message: OutgoingMessage) -> str:
        with self._record:
            if self.fail_sends > 0:
                self.fail_sends -= 1
                raise TransportError("send refused (injected failure)")
        message_id = super().send(message)
        with self._record:
            self.sent.append(message)
        return message_id

    def ready(self) -> bool:
        """False while injected send failures are left (the broker is "down")."""
        with self._record:
            return self.fail_sends == 0

    def _redeliver(self, delivery: Any) -> None:
        if delivery.delivery_attempt >= self.max_deliveries:
            self.dead_letters.append(delivery)
        super()._redeliver(delivery)


class Publisher(publisher.Publisher):
    """:class:`export_center.publisher.Publisher` that can die right after a send.

    Attributes:
        crash_after_send: when True, the pass raises ``SystemExit`` after the transport
            took a message and before the row is marked SENT.
    """

    crash_after_send = False

    def _mark_sent(self, row: repository.OutboxRow) -> None:
        if self.crash_after_send:
            raise SystemExit("publisher crashed after send (injected)")
        super()._mark_sent(row)


def _no_fault(point: str) -> None:
    """The default fault: none."""


class FaultInjectingAttempt(Attempt):
    """The attempt's steps, each calling ``fault(point)`` first.

    Points: ``fetch`` (:meth:`Attempt.fetch`, in the fetch thread, before each provider
    request), ``render`` (:meth:`Attempt.write`, before each batch is written; in a
    sharded attempt, in the shard's thread) and ``store`` (:meth:`Attempt.store`, when
    the file is written, before it is closed and stored). ``fault`` may raise, or end
    the process.
    """

    fault: Callable[[str], None] = staticmethod(_no_fault)

    def fetch(
        self,
        request: ProviderRequest,
        cursor: str | None,
        snapshot: str | None,
        abort: threading.Event,
        time_limit: float,
        pages: PageSizer,
    ) -> Batch:
        self.fault("fetch")
        return super().fetch(request, cursor, snapshot, abort, time_limit, pages)

    def write(self, writer: ExportWriter, typed: list[list[Any]]) -> None:
        self.fault("render")
        super().write(writer, typed)

    def store(self, stream: BinaryIO) -> int:
        self.fault("store")
        return super().store(stream)


class FaultInjectingRun(ExportRun):
    """An export attempt that calls ``fault(point)`` at its named points.

    Points: ``fetch``, ``render`` and ``store`` (the steps of
    :class:`FaultInjectingAttempt`), then ``before_commit`` and ``after_commit`` around
    :meth:`ExportRun.commit`. ``fault`` may raise, or end the process. Without
    :meth:`with_fault` no fault is injected (a plain run through the same seam).
    """

    steps: ClassVar[type[Attempt]] = FaultInjectingAttempt
    fault: Callable[[str], None] = staticmethod(_no_fault)

    @classmethod
    def with_fault(cls, fault: Callable[[str], None]) -> type[FaultInjectingRun]:
        """A subclass that calls ``fault`` (pass it as the consumer's ``run_factory``)."""
        steps = type("FaultyAttempt", (FaultInjectingAttempt,), {"fault": staticmethod(fault)})
        made = type("FaultyRun", (cls,), {"fault": staticmethod(fault), "steps": steps})
        return cast(type[FaultInjectingRun], made)

    def commit(self, stored: repository.StoredFile, started: float) -> AttemptOutcome:
        self.fault("before_commit")
        outcome = super().commit(stored, started)
        self.fault("after_commit")
        return outcome


class DatabaseOutage:
    """Makes ``engine`` refuse every statement while the outage lasts.

    Each statement sent through the engine raises SQLAlchemy's ``OperationalError``
    around PyMySQL's error 2003 ("Can't connect to MySQL server"), whatever the dialect,
    which is what a MariaDB restart gives a client; the connections themselves stay
    intact, so the engine works again the moment the outage ends. Use it as a context
    manager (``with DatabaseOutage(engine).lasting(2.0):``) or with :meth:`start` and
    :meth:`end`.

    Args:
        engine: the engine to break (the export center's own; the sample providers'
            engine is another one and keeps working).

    Attributes:
        refused: how many statements were refused so far.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.refused = 0
        self._until = 0.0
        self._lock = threading.Lock()
        event.listen(engine, "before_cursor_execute", self._refuse)

    def start(self, seconds: float = 3600.0) -> DatabaseOutage:
        """Begin an outage of ``seconds`` (until :meth:`end` when longer)."""
        with self._lock:
            self._until = time.monotonic() + seconds
        return self

    def lasting(self, seconds: float) -> DatabaseOutage:
        """:meth:`start` for ``seconds``, as a context manager that waits out the rest
        of the outage and then removes the hook."""
        return self.start(seconds)

    def end(self) -> None:
        """End the outage now."""
        with self._lock:
            self._until = 0.0

    @property
    def active(self) -> bool:
        """True while statements are refused."""
        return time.monotonic() < self._until

    def close(self) -> None:
        """End the outage and remove the hook from the engine."""
        self.end()
        if event.contains(self.engine, "before_cursor_execute", self._refuse):
            event.remove(self.engine, "before_cursor_execute", self._refuse)

    def __enter__(self) -> DatabaseOutage:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        left = self._until - time.monotonic()
        if kind is None and left > 0:
            time.sleep(left)
        self.close()

    def _refuse(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not self.active:
            return
        with self._lock:
            self.refused += 1
        refused = pymysql.err.OperationalError(
            2003, "Can't connect to MySQL server on '127.0.0.1' (injected outage)"
        )
        raise OperationalError(statement, None, refused)


class DeadlockVictim:
    """Makes the next ``times`` statements of ``engine`` whose SQL contains ``sql`` fail
    as MariaDB's deadlock victim (error 1213, the transaction rolled back whole) or, with
    ``code=1205``, as a lock wait timeout; every other statement runs.

    Args:
        engine: the engine to hit.
        sql: a piece of the statement's text (``"SET lease_until"``: lease renewals).
        times: how many matching statements fail.
        code: 1213 (deadlock) or 1205 (lock wait timeout).

    Attributes:
        failed: how many statements failed so far.
    """

    _TEXT: ClassVar[dict[int, str]] = {
        1213: "Deadlock found when trying to get lock; try restarting transaction",
        1205: "Lock wait timeout exceeded; try restarting transaction",
    }

    def __init__(self, engine: Engine, sql: str, *, times: int, code: int = 1213) -> None:
        self.engine = engine
        self.sql = sql
        self.code = code
        self.failed = 0
        self._left = times
        self._lock = threading.Lock()
        event.listen(engine, "before_cursor_execute", self._fail)

    def close(self) -> None:
        """Remove the hook from the engine."""
        if event.contains(self.engine, "before_cursor_execute", self._fail):
            event.remove(self.engine, "before_cursor_execute", self._fail)

    def _fail(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.sql not in statement:
            return
        with self._lock:
            if self._left <= 0:
                return
            self._left -= 1
            self.failed += 1
        error = pymysql.err.OperationalError(self.code, self._TEXT[self.code] + " (injected)")
        raise OperationalError(statement, None, error)
