"""Engine creation and the database clock.

One schema, two dialects (SQLite for the embedded default, MySQL/MariaDB through
PyMySQL in production). Every time that decides a lease, a backoff or a deadline is
computed in SQL by :func:`db_now` / :func:`db_now_plus` (DESIGN.md: "All time
comparisons ... happen in SQL with the database clock"; seed 002 §8.6).

On SQLite every transaction starts with ``BEGIN IMMEDIATE`` so the write lock is
taken up front (no lock upgrade deadlocks) and the file runs in WAL mode so readers
never wait for the writer. On MySQL the session runs at READ COMMITTED in UTC.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import DateTime, Engine, create_engine, event
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["db_now", "db_now_plus", "make_engine", "is_sqlite"]

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
    return (
        "TIMESTAMPADD(MICROSECOND, CAST(ROUND(%s * 1000000) AS SIGNED), CURRENT_TIMESTAMP(3))"
        % compiler.process(seconds, **kw)
    )


@compiles(db_now_plus, "sqlite")
def _now_plus_sqlite(element: db_now_plus, compiler: Any, **kw: Any) -> str:
    (seconds,) = list(element.clauses)
    return (
        "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', printf('%%+.3f seconds', %s)) || '000'"
        % compiler.process(seconds, **kw)
    ).replace("%%", "%")


def is_sqlite(engine: Engine) -> bool:
    """True when ``engine`` talks to SQLite."""
    return engine.dialect.name == "sqlite"


def make_engine(url: str, *, immediate: bool = True, **kwargs: Any) -> Engine:
    """Create an engine with the project's per-dialect session settings.

    Args:
        url: SQLAlchemy URL (``sqlite:///path`` or ``mysql+pymysql://...``).
        immediate: on SQLite, begin every transaction with ``BEGIN IMMEDIATE``
            (the export center's own state); pass False for read-only engines such as
            the sample providers'.
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
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

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
