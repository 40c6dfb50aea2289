"""Sample providers on TPC-H data, built on the provider SDK.

``ORDERS``: TPC-H ``orders`` joined with ``customer``. Keyset pagination on
``o_orderkey``; the snapshot is the signed max order key read at the first batch, so
orders inserted during the export are never included (no rows added after the export
started). Parameters: ``from``/``to`` order dates (both inclusive),
optional ``status`` and ``priority``.

How a batch is read (``bench/README.md`` has the measurements). The provider runs in
the export center's own process in the embedded default, so every microsecond of
Python per row is taken from the export's writer (one GIL). The batch query therefore
lets the database build the rows' JSON, in one statement on the raw DB-API cursor:

* each row becomes a JSON array in column order in SQL (``json_array`` / ``CONCAT``
  with ``JSON_QUOTE``; the SDK's ``rowFormat: "array"``), DECIMAL as
  exact text and DATE as ISO text, as the contract wants: SQLite stores
  ``o_totalprice`` as REAL (INTEGER for whole prices) and ``printf('%.2f', ...)`` is
  exact for TPC-H's two-decimal prices (far below 1e13, at most 15 significant
  digits); MySQL/MariaDB ``CAST(o_totalprice AS CHAR)`` is the DECIMAL(15,2) text and
  ``CAST(o_orderdate AS CHAR)`` the ISO date; SQLite keeps dates as ISO text already;
* the batch is aggregated into one result row (``group_concat`` of the keys and of the
  arrays, the arrays separated by U+001E, which JSON text never contains raw), so the
  whole query runs inside one database call that releases the GIL, and Python only
  splits the text and hands each row to the SDK as an ``orjson.Fragment`` (a row
  already serialized; the SDK's orjson encoder copies it as is);
* the keys come back too and are checked to be strictly increasing and as many as
  the arrays (MariaDB orders ``GROUP_CONCAT`` explicitly; SQLite concatenates in the
  ordered subquery's order). Should a check fail (or orjson lack ``Fragment``), the
  batch is read again row by row: plain ``str``/``int`` tuples in column order.

Other SQLAlchemy dialects read typed rows and format DECIMAL and DATE in Python.

Read-ahead: after answering a batch, the provider reads the next one in a background
thread (``read_ahead=True``, the default), keyed by task, dispatch version and the
exact query, so the next request usually finds it ready and the database works while
the export center writes the previous batch. A request that does not match (another
cursor, a retry, an expired or failed read) is read at once, as without read-ahead.
At most one batch per task and 16 tasks are kept, for at most 60 seconds.

The keyset scan walks the primary key (``o_orderkey``) in both databases, also with
date filters: the filter is checked on the rows the scan reads, so a whole export reads
each order once (EXPLAIN: SQLite ``SEARCH o USING INDEX sqlite_autoindex_orders_1
(o_orderkey>? AND o_orderkey<?)``, MariaDB ``range`` on ``PRIMARY``; the customer is
one primary-key lookup per row in both).

The TPC-H sample is shared demo data: it has no tenant column, so every tenant sees
the same orders (a real provider filters by ``tenantId``/``appCode``, never by tenant
fields inside ``parameters``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date
from decimal import Decimal
from typing import Any

import orjson
from fastapi import APIRouter
from sqlalchemy import Engine

from providers.sdk import BatchRequest, Column, ExportProvider, Page, ProviderFault

__all__ = ["ORDERS_COLUMNS", "orders_provider", "sample_router"]

ORDERS_COLUMNS = [
    Column("o_orderkey", "Order key", "INTEGER", 12, "订单号"),
    Column("o_custkey", "Customer key", "INTEGER", 12, "客户编号"),
    Column("c_name", "Customer name", "STRING", 20, "客户名称"),
    Column("c_phone", "Phone", "STRING", 16, "电话"),
    Column("c_mktsegment", "Market segment", "STRING", 12, "市场细分"),
    Column("o_orderstatus", "Order status", "STRING", 6, "订单状态"),
    Column("o_totalprice", "Total price", "DECIMAL", 14, "订单总额", precision=15, scale=2),
    Column("o_orderdate", "Order date", "DATE", 12, "下单日期"),
    Column("o_orderpriority", "Priority", "STRING", 16, "优先级"),
    Column("o_clerk", "Clerk", "STRING", 16, "业务员"),
    Column("o_shippriority", "Ship priority", "INTEGER", 8, "发货优先级"),
    Column("o_comment", "Comment", "STRING", 60, "备注"),
]
_KEYS = [c.key for c in ORDERS_COLUMNS]
_TABLE = {"c_name": "c", "c_phone": "c", "c_mktsegment": "c"}  # the rest is orders "o"

_SEPARATOR = "\x1e"
"""Between two JSON arrays (rows) of a batch: a control character, always escaped in JSON."""

_SQLITE_CACHE_KB = 8192
"""SQLite page cache of the provider's connection, in KiB (customer lookups hit it)."""

_GROUP_CONCAT_MAX_LEN = 64 * 1024 * 1024
"""MariaDB/MySQL session limit for the aggregated batch (default 1 MB: ~3,000 rows)."""


class _Dialect:
    """The SQL of one database family: text expressions, aggregation, placeholders."""

    def __init__(self, name: str, paramstyle: str):
        if paramstyle not in ("qmark", "format", "pyformat"):
            raise ValueError(f"ORDERS sample: unsupported DB-API paramstyle {paramstyle!r}")
        self.p = "?" if paramstyle == "qmark" else "%s"  # sqlite3: qmark; PyMySQL: %s
        self.family = (
            "sqlite" if name == "sqlite" else "mysql" if name in ("mysql", "mariadb") else None
        )
        text = {
            "sqlite": {"o_totalprice": "printf('%.2f', o.o_totalprice)"},
            "mysql": {
                "o_totalprice": "CAST(o.o_totalprice AS CHAR)",
                "o_orderdate": "CAST(o.o_orderdate AS CHAR)",
            },
        }.get(self.family or "", {})
        self.exprs = [text.get(k, f"{_TABLE.get(k, 'o')}.{k}") for k in _KEYS]
        if self.p == "%s":  # the format paramstyle reads % as a placeholder
            self.exprs = [e.replace("%", "%%") for e in self.exprs]

    def orders(self, narrow: bool) -> str:
        """``orders o``, read through the (date, key) index when ``narrow``.

        A day shard (or any range of a few weeks) holds a small share of the orders:
        left alone, both databases walk the primary key in key order and test every
        order's date, reading the whole table to fill a page of a small window. Through
        the date index they read the window only and sort its few thousand rows by key.
        """
        if not narrow or self.family is None:
            return "orders o"
        if self.family == "sqlite":
            return f"orders o INDEXED BY {_DATE_INDEX}"
        return f"orders o FORCE INDEX ({_DATE_INDEX})"

    def rows_sql(self, filters: str, narrow: bool = False) -> str:
        """One row per order: plain values, DECIMAL and DATE as text (family known)."""
        return (
            f"SELECT {', '.join(self.exprs)}"
            f"  FROM {self.orders(narrow)} JOIN customer c ON c.c_custkey = o.o_custkey"
            f" WHERE o.o_orderkey > {self.p} AND o.o_orderkey <= {self.p} {filters}"
            f" ORDER BY o.o_orderkey LIMIT {self.p}"
        )

    def json_array(self) -> str:
        """SQL of one row's JSON array, the values in column order (the SDK's
        ``rowFormat: "array"``).

        SQLite: ``json_array``. MySQL/MariaDB: ``CONCAT`` of ``JSON_QUOTE``-d text
        (DECIMAL and DATE text is digits, ``-`` and ``.``, so it is only put in quotes),
        about twice as fast as MariaDB's ``JSON_ARRAY``/``JSON_OBJECT``. A NULL becomes
        ``null``.
        """
        if self.family == "sqlite":
            return f"json_array({', '.join(self.exprs)})"
        parts = []
        for index, (column, expr) in enumerate(zip(ORDERS_COLUMNS, self.exprs, strict=True)):
            if column.type == "INTEGER":
                value = f"COALESCE({expr}, 'null')"
            elif column.type in ("DECIMAL", "DATE"):
                value = f"COALESCE(CONCAT('\"', {expr}, '\"'), 'null')"
            else:
                value = f"COALESCE(JSON_QUOTE({expr}), 'null')"
            parts.append(f"'{'[' if index == 0 else ','}', {value}")
        return f"CONCAT({', '.join(parts)}, ']')"

    def json_sql(self, filters: str, narrow: bool = False) -> str:
        """One row per batch: (count, keys, JSON arrays joined by ``_SEPARATOR``)."""
        inner = (
            f"SELECT o.o_orderkey AS k, {self.json_array()} AS j"
            f"  FROM {self.orders(narrow)} JOIN customer c ON c.c_custkey = o.o_custkey"
            f" WHERE o.o_orderkey > {self.p} AND o.o_orderkey <= {self.p} {filters}"
            f" ORDER BY o.o_orderkey LIMIT {self.p}"
        )
        if self.family == "sqlite":
            return (
                f"SELECT count(*), group_concat(k, ','), group_concat(j, char(30)) FROM ({inner})"
            )
        return (
            "SELECT COUNT(*), GROUP_CONCAT(k ORDER BY k SEPARATOR ','),"
            f" GROUP_CONCAT(j ORDER BY k SEPARATOR '{_SEPARATOR}') FROM ({inner}) t"
        )


def _filters(params: dict[str, Any], p: str) -> tuple[str, list[Any]]:
    """SQL conditions (``AND ...``) with placeholder ``p`` and their bind values."""
    clauses, binds = [], []
    for name, column, op in (("from", "o_orderdate", ">="), ("to", "o_orderdate", "<=")):
        value = params.get(name)
        if value is not None:
            try:
                day = date.fromisoformat(value)
            except (TypeError, ValueError):
                raise ProviderFault(
                    400, "INVALID_PARAMETER", f"{name} must be YYYY-MM-DD", f"parameters.{name}"
                ) from None
            clauses.append(f"AND o.{column} {op} {p}")
            binds.append(day.isoformat())  # DATE compares with ISO text on both databases
    for name, column in (("status", "o_orderstatus"), ("priority", "o_orderpriority")):
        if params.get(name) is not None:
            clauses.append(f"AND o.{column} = {p}")
            binds.append(str(params[name]))
    return " ".join(clauses), binds


_DATE_INDEX = "ix_orders_orderdate_key"
"""The (o_orderdate, o_orderkey) index of the sample (``providers.tpch``)."""
_NARROW_DAYS = 64
"""A date range of at most this many days is read through the date index."""


def _narrow(params: dict[str, Any]) -> bool:
    """True when both dates are given and span at most :data:`_NARROW_DAYS` days (every
    day shard of ORDERS, and any export of a few weeks)."""
    try:
        first, last = date.fromisoformat(params["from"]), date.fromisoformat(params["to"])
    except (KeyError, TypeError, ValueError):
        return False
    return 0 <= (last - first).days < _NARROW_DAYS


def _as_text(value: Any) -> Any:
    """Portable path: Decimal and date values as their exact wire text."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, date):
        return value.isoformat()
    return value


def _json_batch(
    cur: Any, sql: str, binds: list[Any], limit: int
) -> tuple[list[Any], int | None, bool] | None:
    """Read a batch as JSON arrays built by SQL; None when a check fails.

    Returns:
        ``(rows, last_key, has_more)``: at most ``limit`` rows as ``orjson.Fragment``.
    """
    cur.execute(sql, [*binds, limit + 1])
    count, keys_text, objects_text = cur.fetchone()
    if not count:
        return [], None, False
    keys = list(map(int, keys_text.split(",")))
    objects = objects_text.split(_SEPARATOR)
    if (
        len(keys) != count
        or len(objects) != count
        or any(a >= b for a, b in zip(keys, keys[1:], strict=False))
    ):
        return None  # out of order, or cut by a length limit: read row by row
    has_more = count > limit
    fragment = orjson.Fragment
    return [fragment(o) for o in objects[:limit]], keys[:limit][-1], has_more


def orders_provider(
    engine: Engine,
    *,
    token: str,
    secret: str,
    snapshot_ttl_seconds: int = 86400,
    read_ahead: bool = True,
) -> ExportProvider:
    """The ORDERS provider reading ``orders`` and ``customer`` through ``engine``.

    Args:
        read_ahead: after answering a batch, read the next one in a background thread
            (one batch per task, kept at most ``_READ_AHEAD_SECONDS``), so the next
            request finds it ready: the database works while the export center
            writes the previous batch (``bench/README.md``).
    """
    provider = ExportProvider(
        "ORDERS",
        ORDERS_COLUMNS,
        token=token,
        secret=secret,
        snapshot_ttl_seconds=snapshot_ttl_seconds,
    )
    sql = _Dialect(engine.dialect.name, engine.dialect.paramstyle)
    p = sql.p
    use_json = sql.family is not None and hasattr(orjson, "Fragment")
    ahead = _ReadAhead() if read_ahead else None

    def read_batch(
        filters: str, where: list[Any], limit: int, narrow: bool = False
    ) -> tuple[list[Any], int | None, bool]:
        """One batch after ``where[0]``: (rows, last key, has more); ``narrow``: read
        through the date index (a window of a few weeks, see ``_Dialect.orders``)."""
        with engine.connect() as conn, conn.begin():
            raw = conn.connection.driver_connection
            assert raw is not None
            cur = raw.cursor()
            try:
                if sql.family == "sqlite":  # 8 MB page cache (default 2 MB): ~15 % less SQL time
                    cur.execute(f"PRAGMA cache_size = -{_SQLITE_CACHE_KB}")
                if use_json:
                    if sql.family == "mysql":
                        cur.execute(f"SET SESSION group_concat_max_len = {_GROUP_CONCAT_MAX_LEN}")
                    batch = _json_batch(cur, sql.json_sql(filters, narrow), where, limit)
                    if batch is not None:
                        return batch
                cur.execute(sql.rows_sql(filters, narrow), [*where, limit + 1])
                found = cur.fetchall()
            finally:
                cur.close()
        if sql.family:
            rows: list[Any] = found[:limit]
        else:
            rows = [tuple(map(_as_text, r)) for r in found[:limit]]
        return rows, (found[:limit][-1][0] if rows else None), len(found) > limit

    def snapshot_and_count(req: BatchRequest) -> tuple[int, int]:
        """``(max order key, orders of the request up to it)``: the snapshot and the
        row count of the first batch, and the estimate of a schema request."""
        filters, binds = _filters(req.parameters, p)
        with engine.connect() as conn, conn.begin():
            raw = conn.connection.driver_connection
            assert raw is not None
            cur = raw.cursor()
            try:
                cur.execute("SELECT MAX(o_orderkey) FROM orders")
                max_key = int(cur.fetchone()[0] or 0)
                cur.execute(
                    f"SELECT COUNT(*) FROM {sql.orders(_narrow(req.parameters))}"
                    f" WHERE o.o_orderkey <= {p} {filters}",
                    [max_key, *binds],
                )
                return max_key, int(cur.fetchone()[0] or 0)
            finally:
                cur.close()

    @provider.estimator
    def estimate(req: BatchRequest) -> int:
        return snapshot_and_count(req)[1]

    @provider.fetcher
    def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
        filters, binds = _filters(req.parameters, p)
        narrow = _narrow(req.parameters)
        total = None
        after = int(cursor) if cursor is not None else 0
        if snapshot is None:
            max_key, total = snapshot_and_count(req)
            snapshot = {"maxKey": max_key}
        where = [after, int(snapshot["maxKey"]), *binds]
        # Shards of one task page at once: each has its own read-ahead slot.
        task = (req.taskId, req.dispatchVersion, req.shard.id if req.shard else None)
        key = (filters, tuple(where), req.limit)
        batch = ahead.take(task, key) if ahead is not None else None
        if batch is None:
            batch = read_batch(filters, where, req.limit, narrow)
        rows, last_key, has_more = batch
        if ahead is not None and has_more and last_key is not None:
            following = [last_key, *where[1:]]
            ahead.start(
                task,
                (filters, tuple(following), req.limit),
                read_batch,
                filters,
                following,
                req.limit,
                narrow,
            )
        next_cursor = last_key if last_key is not None else after
        return Page(
            rows=rows,
            next_cursor=next_cursor,
            has_more=has_more,
            snapshot=snapshot,
            total_rows=total,
        )

    return provider


_READ_AHEAD_SECONDS = 60.0
"""A batch read ahead and not asked for within this time is dropped."""

_READ_AHEAD_TASKS = 16
"""At most this many tasks have a batch read ahead at once (oldest dropped first)."""


class _ReadAhead:
    """The next batch of each task, read in a background thread.

    Keyed by (task id, dispatch version) and by the exact query (filters, bind values,
    limit), so an answer is only ever used for the very request it was read for; any
    other request, a failed read or an old entry falls back to reading at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Any, tuple[Any, float, Future[Any]]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def take(self, task: Any, key: Any) -> Any:
        """The batch read ahead for ``task`` and ``key``, or None."""
        with self._lock:
            entry = self._pending.pop(task, None)
        if entry is None or entry[0] != key:
            return None
        try:
            return entry[2].result(timeout=30)
        except Exception:  # noqa: BLE001 - read it again in the request
            return None

    def start(self, task: Any, key: Any, read: Callable[..., Any], *args: Any) -> None:
        """Read the batch ``key`` of ``task`` in the background."""
        now = time.monotonic()
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=2, thread_name_prefix="orders-read-ahead"
                )
            for old in [
                t for t, (_, at, _f) in self._pending.items() if now - at > _READ_AHEAD_SECONDS
            ]:
                self._pending.pop(old)[2].cancel()
            while len(self._pending) >= _READ_AHEAD_TASKS:
                self._pending.pop(next(iter(self._pending)))[2].cancel()
            self._pending[task] = (key, now, self._pool.submit(read, *args))


def sample_router(
    engine: Engine, *, token: str, secret: str, snapshot_ttl_seconds: int = 86400
) -> APIRouter:
    """A router serving every sample provider."""
    router = APIRouter()
    router.include_router(
        orders_provider(
            engine, token=token, secret=secret, snapshot_ttl_seconds=snapshot_ttl_seconds
        ).router()
    )
    return router
