"""Engine creation and the database clock.

One schema, two dialects (SQLite for the embedded default, MySQL/MariaDB through
PyMySQL in production). Every time that decides a lease, a backoff or a deadline is
computed in SQL by :func:`db_now` / :func:`db_now_plus` (DESIGN.md: "All time
comparisons ... happen in SQL with the database clock"): instances' clocks drift,
the database has one clock.

On SQLite every transaction starts with ``BEGIN IMMEDIATE`` so the write lock is
taken up front (no lock upgrade deadlocks) and the file runs in WAL mode so readers
never wait for the writer. On MySQL the session runs at READ COMMITTED in UTC.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, DateTime, Dialect, Engine, String, create_engine, event
from sqlalchemy.dialects import mysql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = [
    "READ_ONLY",
    "ExactString",
    "binary_collation",
    "db_now",
    "db_now_plus",
    "is_sqlite",
    "make_engine",
    "reading",
]

# SQLite text timestamps use SQLAlchemy's own storage format (6 fractional digits) so
# values written by SQL and by Python compare correctly as strings.
_SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'"


class db_now(FunctionElement[Any]):  # noqa: N801 - reads like SQL
    """The database clock with millisecond precision (``CURRENT_TIMESTAMP(3)``)."""

    type = DateTime()
    inherit_cache = True


class db_now_plus(FunctionElement[Any]):  # noqa: N801
    """The database clock plus a number of seconds (float, may be negative)."""

    type = DateTime()
    inherit_cache = True


@compiles(db_now)
def _now_default(element: db_now, compiler: Any, **kw: Any) -> str:
    return "CURRENT_TIMESTAMP(3)"


@compiles(db_now, "sqlite")
def _now_sqlite(element: db_now, compiler: Any, **kw: Any) -> str:
    return _SQLITE_NOW


@compiles(db_now_plus)
def _now_plus_default(element: db_now_plus, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    amount = compiler.process(seconds, **kw)
    micros = f"CAST(ROUND({amount} * 1000000) AS SIGNED)"
    return f"TIMESTAMPADD(MICROSECOND, {micros}, CURRENT_TIMESTAMP(3))"


@compiles(db_now_plus, "sqlite")
def _now_plus_sqlite(element: db_now_plus, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    amount = compiler.process(seconds, **kw)
    return f"strftime('%Y-%m-%d %H:%M:%f', 'now', printf('%+.3f seconds', {amount})) || '000'"


def binary_collation(dialect: Dialect) -> str:
    """The utf8mb4 collation that compares byte for byte, trailing spaces included.

    MariaDB calls it ``utf8mb4_nopad_bin``; MySQL 8 ``utf8mb4_0900_bin``. Both are
    binary and NO PAD: ``'acme'``, ``'ACME'`` and ``'acme '`` are three values, as in
    Python. (``utf8mb4_bin`` is PAD SPACE: it still ignores trailing spaces.)
    """
    return "utf8mb4_nopad_bin" if getattr(dialect, "is_mariadb", False) else "utf8mb4_0900_bin"


class ExactString(TypeDecorator[str]):
    """A ``VARCHAR(length)`` whose equality is byte for byte on every database.

    Identity and key columns (tenant, app, owner, idempotency key, task id, event id,
    object key, lease owner) use it, so that SQL decides exactly what Python decides,
    whatever the server's default collation (a case-insensitive ``utf8mb4_unicode_ci``
    would make ``acme`` and ``ACME`` one tenant). On MySQL and MariaDB the column gets
    :func:`binary_collation`; SQLite compares text bytewise already.

    Args:
        length: the column length in characters.
    """

    impl = String
    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[str]:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(
                mysql.VARCHAR(self.length, charset="utf8mb4", collation=binary_collation(dialect))
            )
        return dialect.type_descriptor(String(self.length))

    def __repr__(self) -> str:
        return f"ExactString({self.length})"


def is_sqlite(engine: Engine) -> bool:
    """True when ``engine`` talks to SQLite."""
    return engine.dialect.name == "sqlite"


READ_ONLY = "export_center_read_only"
"""Execution option of a connection that only reads (:func:`reading`)."""


def reading(engine: Engine) -> Connection:
    """A connection for reads only, to use as ``with reading(engine) as conn:``.

    The rule: on SQLite its transactions start with a plain (deferred) ``BEGIN`` instead
    of ``BEGIN IMMEDIATE``, so a read neither waits for the writer nor holds writers up
    (in WAL mode it sees the last commit before its first statement). Elsewhere it is an
    ordinary connection. Writing through it on SQLite may fail with "database is
    locked" when another writer is busy; do not.
    """
    return engine.connect().execution_options(**{READ_ONLY: True})


def make_engine(url: str, *, immediate: bool = True, **kwargs: Any) -> Engine:
    """Create an engine with the project's per-dialect session settings.

    Args:
        url: SQLAlchemy URL (``sqlite:///path`` or ``mysql+pymysql://...``).
        immediate: on SQLite, begin every transaction with ``BEGIN IMMEDIATE``
            (the export center's own state), except on connections from
            :func:`reading`; pass False for read-only engines such as the sample
            providers'.
        **kwargs: passed to :func:`sqlalchemy.create_engine`.

    Returns:
        The engine. Nothing connects until first use.
    """
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"timeout": 60, "check_same_thread": False}, **kwargs
        )

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cur = dbapi_connection.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            deferred = not immediate or conn.get_execution_options().get(READ_ONLY)
            conn.exec_driver_sql("BEGIN" if deferred else "BEGIN IMMEDIATE")

        return engine

    kwargs.setdefault("pool_pre_ping", True)
    kwargs.setdefault("pool_recycle", 1800)
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    if url.startswith("mysql"):
        kwargs.setdefault("isolation_level", "READ COMMITTED")
    engine = create_engine(url, **kwargs)
    if engine.dialect.name in ("mysql", "mariadb"):

        @event.listens_for(engine, "connect")
        def _mysql_connect(dbapi_connection: Any, _record: Any) -> None:
            cur = dbapi_connection.cursor()
            cur.execute("SET time_zone = '+00:00'")
            cur.close()

    return engine
