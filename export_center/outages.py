"""Database outages: which errors are a blip, how a caller rides one out, how it is logged.

The rule: a database that stops answering for a few seconds (a restart, a failover, a
network blip, a deadlock victim) is an infrastructure fault, never an export's. A caller
that must write tries again with back-off for as long as what it protects lasts (an
attempt: its lease; a loop: forever, one pass at a time), and the process says so once
when the outage starts and once when it ends, not once per failed call.

* :func:`is_database_blip` tells a blip from a real error (a wrong statement, a
  constraint): connection refused, lost or killed, the server shutting down, too many
  connections, a lock wait timeout or deadlock, the pool's own timeout, SQLite's "database
  is locked".
* :class:`OutageLog` keeps the process's one view of the outage per engine (a WARNING
  when it starts, an INFO with its length when the database answers again).
* :func:`retry_transaction` runs one transaction, trying again after a blip while the
  caller's budget lasts, and raises :class:`DatabaseUnavailable` when it is used up.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from export_center.errors import DatabaseUnavailable

__all__ = [
    "BLIP_MYSQL_CODES",
    "Backoff",
    "OutageLog",
    "is_database_blip",
    "is_deadlock",
    "outage_log",
    "retry_transaction",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

BLIP_MYSQL_CODES = frozenset(
    {
        1040,  # too many connections
        1053,  # server shutdown in progress
        1205,  # lock wait timeout exceeded
        1213,  # deadlock found; the transaction was rolled back whole
        1290,  # --read-only (a replica being promoted)
        1927,  # connection was killed
        2002,  # cannot connect through the socket
        2003,  # cannot connect to the server
        2006,  # server has gone away
        2013,  # lost connection during query
        2014,  # commands out of sync (a connection cut mid-answer)
        2055,  # lost connection at a given state
        4031,  # disconnected by the server (inactivity)
    }
)
"""MySQL/MariaDB error codes that say the server could not take the statement now, not
that the statement is wrong; trying the whole transaction again is safe."""

_SQLITE_BLIPS = ("database is locked", "database table is locked", "disk i/o error")


def is_database_blip(exc: BaseException) -> bool:
    """True when ``exc`` says the database could not answer now (module docstring).

    Args:
        exc: an exception raised by SQLAlchemy or its driver.

    Returns:
        True for connection failures and losses, a server shutting down, too many
        connections, lock wait timeouts and deadlocks (MySQL/MariaDB codes in
        :data:`BLIP_MYSQL_CODES`), a connection SQLAlchemy found invalidated, the pool's
        timeout, and SQLite's "database is locked"; False for everything else (a wrong
        statement, a constraint, a bug).
    """
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in BLIP_MYSQL_CODES:
        return True
    text = str(orig).lower()
    if type(orig).__module__.startswith("sqlite3") or "sqlite" in type(orig).__module__:
        return any(blip in text for blip in _SQLITE_BLIPS)
    # PyMySQL raises its OperationalError/InterfaceError without a code when the socket
    # breaks before a MySQL error packet arrives.
    name = type(orig).__name__
    return name == "InterfaceError" or ("connection" in text and "lost" in text)


def is_deadlock(exc: BaseException) -> bool:
    """True when ``exc`` is MySQL/MariaDB error 1213: the server chose this transaction
    as a deadlock victim and rolled it back whole, so running it again at once is safe
    and usually works (the other transaction has the locks now and will finish)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else None
    args: tuple[object, ...] = getattr(orig, "args", ())
    return len(args) > 0 and args[0] == 1213


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc) or type(exc).__name__
    return text.splitlines()[0][:300]


class OutageLog:
    """One process's view of an outage of one database: logged when it starts and ends.

    Thread-safe. Every caller reports its failed and working calls; the log gets one
    WARNING when the first call fails (with the cause), one WARNING a minute while it
    lasts, and one INFO when a call works again (with the outage's length and the number
    of failed calls), whatever the number of callers.

    Args:
        name: what the database is, for the log lines ("the export center's database").
        logger: where to write.
    """

    def __init__(self, name: str, logger: logging.Logger = log) -> None:
        self.name = name
        self.logger = logger
        self._lock = threading.Lock()
        self.failures = 0
        self._since = 0.0
        self._last_report = 0.0

    @property
    def down(self) -> bool:
        """True while the outage lasts (a call failed and none worked since)."""
        return self.failures > 0

    @property
    def seconds(self) -> float:
        """How long the current outage has lasted (0 when there is none)."""
        with self._lock:
            return time.monotonic() - self._since if self.failures else 0.0

    def failed(self, exc: BaseException, what: str) -> None:
        """Record a call that failed with a blip.

        Args:
            exc: the error.
            what: what the caller tried to do ("renew the lease of exp_...").
        """
        now = time.monotonic()
        with self._lock:
            first = self.failures == 0
            self.failures += 1
            if first:
                self._since = self._last_report = now
            elif now - self._last_report < 60:
                return
            self._last_report = now
            since = now - self._since
            count = self.failures
        if first:
            self.logger.warning(
                "%s does not answer (%s): %s; trying again with back-off",
                self.name,
                what,
                _one_line(exc),
            )
        else:
            self.logger.warning(
                "%s still does not answer after %.0f s (%d failed calls): %s",
                self.name,
                since,
                count,
                _one_line(exc),
            )

    def worked(self) -> None:
        """Record a call that worked (after an outage: one INFO line)."""
        if not self.failures:  # the common case, without the lock
            return
        with self._lock:
            if not self.failures:
                return
            since, count = time.monotonic() - self._since, self.failures
            self.failures = 0
        self.logger.info("%s answers again after %.1f s (%d failed calls)", self.name, since, count)


_LOGS: weakref.WeakKeyDictionary[Engine, OutageLog] = weakref.WeakKeyDictionary()
_LOGS_LOCK = threading.Lock()


def outage_log(engine: Engine) -> OutageLog:
    """The process's :class:`OutageLog` of ``engine`` (made on first use)."""
    with _LOGS_LOCK:
        found = _LOGS.get(engine)
        if found is None:
            found = _LOGS[engine] = OutageLog(f"the database {engine.url.render_as_string()}")
        return found


class Backoff:
    """Pauses between tries: ``first`` seconds, doubling up to ``most``.

    Args:
        first: the first pause, seconds.
        most: the longest pause, seconds.
    """

    def __init__(self, first: float = 0.2, most: float = 5.0) -> None:
        self.first = first
        self.most = most
        self.tries = 0

    def next(self) -> float:
        """The pause before the next try, seconds."""
        pause = float(min(self.most, self.first * 2.0**self.tries))
        self.tries += 1
        return pause

    def reset(self) -> None:
        """Start again from ``first`` (a try worked)."""
        self.tries = 0


def retry_transaction(
    engine: Engine,
    work: Callable[[Connection], T],
    *,
    what: str,
    seconds_left: Callable[[], float],
    stop: threading.Event | None = None,
    backoff: Backoff | None = None,
) -> T:
    """Run ``work`` in one transaction; after a blip, roll back and run it again.

    The whole transaction is tried again, so ``work`` must give the same result when
    its first run committed but its answer was lost (the fenced writes of an attempt
    do: they set values, and a caller whose conditional UPDATE then touches no row reads
    the row to learn whether the first run was its own).

    Args:
        engine: the database.
        work: ``conn -> result``, run inside ``engine.begin()``.
        what: what it does, for the log ("write the progress of exp_...").
        seconds_left: how long the caller may still wait (e.g. what remains of its
            lease by its own clock); tries end when it is 0 or less.
        stop: set when the caller must give up at once (the process stops).
        backoff: pauses between tries (default 0.2 s doubling up to 5 s).

    Returns:
        What ``work`` returned.

    Raises:
        DatabaseUnavailable: every try until the budget ran out was a blip.
        Exception: any error that is not a blip, at once.
    """
    pauses = backoff or Backoff()
    outages = outage_log(engine)
    started = time.monotonic()
    while True:
        try:
            with engine.begin() as conn:
                result = work(conn)
        except Exception as exc:
            if not is_database_blip(exc):
                raise
            outages.failed(exc, what)
            left = seconds_left()
            pause = min(pauses.next(), max(0.0, left))
            if left <= 0 or (stop is not None and stop.is_set()):
                raise DatabaseUnavailable(what, time.monotonic() - started, _one_line(exc)) from exc
            if stop is not None:
                stop.wait(pause)
            else:
                time.sleep(pause)
            continue
        outages.worked()
        return result
