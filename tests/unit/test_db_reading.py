"""``db.reading``: on SQLite a read neither waits for the writer nor holds it up."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from export_center.db import make_engine, reading


def test_a_read_sees_the_last_commit_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (v INTEGER)"))
        conn.execute(text("INSERT INTO t VALUES (1)"))
    with engine.begin() as writer:  # BEGIN IMMEDIATE: the write lock is held
        writer.execute(text("INSERT INTO t VALUES (2)"))
        started = time.monotonic()
        with reading(engine) as conn:
            seen = conn.execute(text("SELECT v FROM t ORDER BY v")).scalars().all()
        assert seen == [1]  # the last commit, not the writer's open transaction
        assert time.monotonic() - started < 5  # not the 60 s busy timeout
    with reading(engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM t")).scalar() == 2
    engine.dispose()


def test_an_ordinary_connection_still_takes_the_write_lock(tmp_path: Path) -> None:
    """The rule holds only for ``reading``: other transactions start with BEGIN
    IMMEDIATE, so two writers never interleave (here: the second one times out)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (v INTEGER)"))
    with engine.begin() as writer:
        writer.execute(text("INSERT INTO t VALUES (1)"))
        other = engine.connect()
        raw = other.connection.driver_connection
        assert raw is not None
        raw.execute("PRAGMA busy_timeout=200")  # not through SQLAlchemy: no BEGIN yet
        with pytest.raises(OperationalError, match="locked"):
            other.execute(text("SELECT count(*) FROM t"))
        other.close()
    engine.dispose()
