"""Database blips without a server: what counts as one, the outage log, the loop guard,
the retried transaction and the lease-checked stream."""

from __future__ import annotations

import errno
import io
import logging
import sqlite3
import time

import pymysql
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from export_center.attempt.stream_guard import GuardedStream
from export_center.db import make_engine
from export_center.errors import DatabaseUnavailable, LeaseLost, StorageError, StorageFull
from export_center.loops import GuardedPass
from export_center.outages import (
    BLIP_MYSQL_CODES,
    Backoff,
    OutageLog,
    is_database_blip,
    retry_transaction,
)
from export_center.storage.base import storage_error
from export_center.testing import DatabaseOutage


def _mysql(code: int, kind: type[Exception] = OperationalError) -> DBAPIError:
    return kind("SELECT 1", None, pymysql.err.OperationalError(code, "server says no"))


@pytest.mark.parametrize("code", sorted(BLIP_MYSQL_CODES))
def test_mysql_errors_of_an_unavailable_server_are_blips(code):
    assert is_database_blip(_mysql(code))


@pytest.mark.parametrize("code", [1062, 1064, 1146, 1054, 1406, 1452])
def test_mysql_errors_of_a_wrong_statement_are_not(code):
    # duplicate key, syntax, no table, no column, data too long, foreign key
    assert not is_database_blip(_mysql(code, IntegrityError))
    assert not is_database_blip(_mysql(code, ProgrammingError))


def test_other_blips_and_non_blips():
    locked = OperationalError("BEGIN", None, sqlite3.OperationalError("database is locked"))
    assert is_database_blip(locked)
    missing = OperationalError("SELECT", None, sqlite3.OperationalError("no such table: x"))
    assert not is_database_blip(missing)
    assert is_database_blip(PoolTimeout("QueuePool limit reached"))
    invalidated = OperationalError("SELECT", None, ValueError("x"), connection_invalidated=True)
    assert is_database_blip(invalidated)
    assert is_database_blip(OperationalError("SELECT", None, pymysql.err.InterfaceError(0, "")))
    assert not is_database_blip(ValueError("a bug"))
    assert not is_database_blip(ConnectionError("not the database"))


def test_the_outage_log_says_it_once_when_it_starts_and_once_when_it_ends(caplog):
    caplog.set_level(logging.INFO)
    outages = OutageLog("the database", logging.getLogger("t.outage"))
    outages.worked()  # nothing happened: nothing logged
    for _ in range(50):
        outages.failed(_mysql(2003), "renew the lease")
    assert outages.down and outages.seconds >= 0
    outages.worked()
    outages.worked()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "t.outage"]
    assert len(lines) == 2, lines
    assert lines[0][0] == "WARNING" and "does not answer (renew the lease)" in lines[0][1]
    assert lines[1][0] == "INFO" and "answers again" in lines[1][1] and "50 failed" in lines[1][1]
    assert not outages.down


def test_backoff_doubles_up_to_its_most():
    pauses = Backoff(0.2, 1.0)
    assert [pauses.next() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]


def test_a_guarded_pass_rides_out_an_outage_quietly(caplog):
    caplog.set_level(logging.INFO, logger="export_center.loops")
    calls: list[float] = []
    failing = {"on": True}

    def run_once() -> int:
        calls.append(time.monotonic())
        if failing["on"]:
            raise _mysql(2013)
        return 1

    guarded = GuardedPass("publisher", run_once)
    for _ in range(20):  # the scheduler's ticks during a 1 s back-off
        guarded()
    assert len(calls) == 1, "passes must wait out the back-off"
    failing["on"] = False
    guarded._next = 0.0  # the back-off is over
    guarded()
    guarded()
    assert len(calls) == 3
    lines = [r for r in caplog.records if r.name == "export_center.loops"]
    assert [r.levelname for r in lines] == ["WARNING", "INFO"]
    assert not [r for r in lines if r.exc_info]


def test_a_guarded_pass_logs_other_errors_with_their_traceback(caplog):
    def run_once() -> int:
        raise ValueError("a bug")

    guarded = GuardedPass("reconciler", run_once)
    guarded()
    guarded()  # no back-off for a bug: the next pass runs on schedule
    failed = [r for r in caplog.records if "pass failed" in r.getMessage()]
    assert len(failed) == 2 and all(r.exc_info for r in failed)


def test_retry_transaction_tries_again_then_gives_up(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    outage = DatabaseOutage(engine)
    try:
        outage.start(0.5)
        assert (
            retry_transaction(
                engine,
                lambda c: c.execute(text("SELECT 7")).scalar(),
                what="probe",
                seconds_left=lambda: 5,
            )
            == 7
        )
        assert outage.refused >= 1
        outage.start(60)
        deadline = time.monotonic() + 0.6
        with pytest.raises(DatabaseUnavailable, match=r"did not answer for \d+ s \(probe\)"):
            retry_transaction(
                engine,
                lambda c: c.execute(text("SELECT 7")).scalar(),
                what="probe",
                seconds_left=lambda: deadline - time.monotonic(),
            )
        outage.end()
        with pytest.raises(OperationalError):  # not a blip: raised at once
            retry_transaction(
                engine,
                lambda c: c.execute(text("SELECT * FROM nowhere")).scalar(),
                what="probe",
                seconds_left=lambda: 5,
            )
    finally:
        outage.close()
        engine.dispose()


class _Gate:
    def __init__(self) -> None:
        self.open = True

    def __call__(self) -> None:
        if not self.open:
            raise LeaseLost("the lease may be gone")


def test_a_guarded_stream_passes_nothing_on_once_its_check_fails():
    target = io.BytesIO()
    gate = _Gate()
    stream = GuardedStream(target, gate, "cannot write the file")
    stream.write(b"abc")
    gate.open = False
    with pytest.raises(LeaseLost):
        stream.write(b"def")
    with pytest.raises(LeaseLost):
        stream.close()  # the last bytes would go to storage at close
    assert target.getvalue() == b"abc" and not target.closed
    stream.abandon()  # the failure path closes it without the check
    assert target.closed


class _Full(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[no-untyped-def,override]
        raise OSError(errno.ENOSPC, "No space left on device")


def test_storage_os_errors_become_storage_errors():
    stream = GuardedStream(_Full(), lambda: None, "cannot write the file")  # type: ignore[arg-type]
    with pytest.raises(StorageFull, match="cannot write the file: no space left on the file"):
        stream.write(b"x")
    assert isinstance(storage_error(OSError(errno.EDQUOT, "Disk quota exceeded"), "x"), StorageFull)
    other = storage_error(OSError(errno.EIO, "Input/output error"), "cannot store k")
    assert type(other) is StorageError and other.code == "STORAGE_ERROR"
    assert str(other) == "cannot store k: Input/output error"
