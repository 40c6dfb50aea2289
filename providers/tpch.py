"""TPC-H sample data for the sample providers: generation, loading and the source view.

The sample providers export TPC-H ``orders`` joined with ``customer``. This module

* generates the two tables as CSV with ``tpchgen-cli`` (:func:`generate`),
* loads them into SQLite or MariaDB/MySQL, once per scale and safely when several
  processes start at the same time (:func:`ensure_loaded`),
* reads the joined rows straight from the CSV files so tests can compare exported files
  with the source (:func:`read_source_orders`).

Row counts: ``orders`` has 1,500,000 rows per scale unit and ``customer`` 150,000
(scale 0.27: 405,000 orders, 40,500 customers).

The CSV files written by ``tpchgen-cli csv`` have a header line, ``\\n`` line endings,
``,`` as separator and RFC 4180 quoting: free-text columns (``c_address``,
``c_comment``, ``o_comment``) are enclosed in double quotes, contain commas and may
start or end with a space, which must survive the load byte for byte. TPC-H text never
contains double quotes, backslashes or newlines.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import (
    CHAR,
    BigInteger,
    Column,
    Date,
    DateTime,
    Engine,
    Index,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    delete,
    func,
    insert,
    inspect,
    select,
)
from sqlalchemy.schema import CreateIndex, CreateTable, DropIndex

from providers.tpch_generate import (
    count_csv_rows,
    file_lock,
    generate,
    noop,
    read_marker,
    scale_key,
)

__all__ = [
    "CUSTOMERS_PER_SCALE",
    "LOCK_NAME",
    "ORDERS_PER_SCALE",
    "customer",
    "ensure_loaded",
    "generate",
    "metadata",
    "orders",
    "read_source_orders",
    "tpch_sample",
]

ORDERS_PER_SCALE = 1_500_000
CUSTOMERS_PER_SCALE = 150_000

#: Name of the MariaDB advisory lock (``GET_LOCK``) held while loading.
LOCK_NAME = "export_center_tpch"
LOCK_TIMEOUT_SECONDS = 600


_TABLE_KW: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}

metadata = MetaData()

_KEY = BigInteger().with_variant(Integer(), "sqlite")
"""Primary-key type: BIGINT, but INTEGER on SQLite so that the key is the rowid. A
keyset batch is then one rowid range scan plus one rowid lookup per customer, instead
of an index seek and a table seek each: about a third less SQL time for ORDERS."""

customer = Table(
    "customer",
    metadata,
    Column("c_custkey", _KEY, primary_key=True, autoincrement=False),
    Column("c_name", String(25), nullable=False),
    Column("c_address", String(40), nullable=False),
    Column("c_nationkey", Integer, nullable=False),
    Column("c_phone", String(15), nullable=False),
    Column("c_acctbal", Numeric(15, 2), nullable=False),
    Column("c_mktsegment", String(10), nullable=False),
    Column("c_comment", String(117), nullable=False),
    **_TABLE_KW,
)

orders = Table(
    "orders",
    metadata,
    Column("o_orderkey", _KEY, primary_key=True, autoincrement=False),
    Column("o_custkey", BigInteger, nullable=False),
    Column("o_orderstatus", CHAR(1), nullable=False),
    Column("o_totalprice", Numeric(15, 2), nullable=False),
    Column("o_orderdate", Date, nullable=False),
    Column("o_orderpriority", String(15), nullable=False),
    Column("o_clerk", String(15), nullable=False),
    Column("o_shippriority", Integer, nullable=False),
    Column("o_comment", String(79), nullable=False),
    Index("ix_orders_orderdate_key", "o_orderdate", "o_orderkey"),
    **_TABLE_KW,
)

tpch_sample = Table(
    "tpch_sample",
    metadata,
    Column("scale", String(16), primary_key=True),
    Column("orders", BigInteger, nullable=False),
    Column("customers", BigInteger, nullable=False),
    Column("loaded_at", DateTime, nullable=False),
    **_TABLE_KW,
)

# Column order of the CSV files (and of the tables).
_CUSTOMER_COLUMNS = [c.name for c in customer.columns]
_ORDERS_COLUMNS = [c.name for c in orders.columns]

Progress = Callable[[str], None]


def _loaded_orders(engine: Engine, key: str) -> int | None:
    """Order count when ``tpch_sample`` records ``key`` and matches the tables."""
    if not inspect(engine).has_table(tpch_sample.name):
        return None
    with engine.connect() as conn:
        row = conn.execute(
            select(tpch_sample.c.orders, tpch_sample.c.customers).where(tpch_sample.c.scale == key)
        ).first()
        if row is None:
            return None
        n_orders = conn.execute(select(func.count()).select_from(orders)).scalar_one()
        n_customers = conn.execute(select(func.count()).select_from(customer)).scalar_one()
    if n_orders == row.orders and n_customers == row.customers and n_orders > 0:
        return int(n_orders)
    return None


def _sqlite_lock_path(engine: Engine) -> Path | None:
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).with_name(Path(database).name + ".tpch.lock")


def _mysql_connect(engine: Engine) -> Any:
    """A raw PyMySQL connection to the engine's database with LOCAL INFILE allowed."""
    import pymysql
    from sqlalchemy.dialects.mysql.pymysql import MySQLDialect_pymysql

    _args, kwargs = MySQLDialect_pymysql().create_connect_args(engine.url)
    kwargs["local_infile"] = True
    kwargs["autocommit"] = True
    kwargs.setdefault("charset", "utf8mb4")
    return pymysql.connect(**kwargs)


@contextlib.contextmanager
def _load_session(engine: Engine) -> Iterator[Any]:
    """Serialize loaders; yields the raw PyMySQL connection on MySQL, else None.

    MySQL/MariaDB: ``GET_LOCK('export_center_tpch', 600)`` on a dedicated connection,
    which is also the one that runs ``LOAD DATA LOCAL INFILE``. SQLite: an ``flock`` on
    a file next to the database file.
    """
    if engine.dialect.name == "sqlite":
        lock_path = _sqlite_lock_path(engine)
        if lock_path is None:
            yield None
        else:
            with file_lock(lock_path):
                yield None
        return
    if engine.dialect.name not in ("mysql", "mariadb"):
        raise NotImplementedError(f"TPC-H loading is not supported on {engine.dialect.name}")
    raw = _mysql_connect(engine)
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, %s)", (LOCK_NAME, LOCK_TIMEOUT_SECONDS))
            (got,) = cur.fetchone()
        if got != 1:
            raise TimeoutError(
                f"could not take the MySQL lock {LOCK_NAME!r} within {LOCK_TIMEOUT_SECONDS}s"
            )
        try:
            yield raw
        finally:
            with raw.cursor() as cur:
                cur.execute("SELECT RELEASE_LOCK(%s)", (LOCK_NAME,))
    finally:
        raw.close()


def _orders_index_ddl(engine: Engine) -> tuple[str, str]:
    """``DROP INDEX`` and ``CREATE INDEX`` statements of ``ix_orders_orderdate_key``.

    The loaders drop the secondary index before the bulk insert and build it once
    afterwards from sorted data: several times faster than maintaining it row by row
    (SQLite: 6 s instead of 2.5 s for 405,000 orders). A crash in between leaves
    ``tpch_sample`` empty, so the next call reloads and rebuilds the index.
    """
    (index,) = orders.indexes
    drop = str(DropIndex(index).compile(dialect=engine.dialect))
    create = str(CreateIndex(index).compile(dialect=engine.dialect))
    return drop, create


def _check_header(path: Path, columns: list[str]) -> None:
    with path.open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), None)
    if header != columns:
        raise RuntimeError(f"unexpected header in {path}: {header}, expected {columns}")


def _load_sqlite(engine: Engine, csv_dir: Path) -> tuple[int, int]:
    """Replace both tables with the CSV rows in one transaction; returns row counts.

    Values are inserted as the CSV text: the column affinities store integers and
    prices as numbers and dates as ``YYYY-MM-DD`` text, exactly what SQLAlchemy's
    types write and read back.
    """
    drop_index, create_index = _orders_index_ddl(engine)
    raw = engine.raw_connection()
    try:
        conn: Any = raw.driver_connection
        saved_isolation = conn.isolation_level
        conn.isolation_level = None  # explicit BEGIN/COMMIT below
        cur = conn.cursor()
        (saved_sync,) = cur.execute("PRAGMA synchronous").fetchone()
        cur.execute("PRAGMA synchronous=OFF")
        counts = []
        try:
            cur.execute("BEGIN IMMEDIATE")
            try:
                cur.execute("DELETE FROM tpch_sample")
                cur.execute(drop_index.replace("DROP INDEX", "DROP INDEX IF EXISTS", 1))
                for table, columns in (
                    ("customer", _CUSTOMER_COLUMNS),
                    ("orders", _ORDERS_COLUMNS),
                ):
                    path = csv_dir / f"{table}.csv"
                    _check_header(path, columns)
                    # Recreated, not emptied: a file loaded before the keys became
                    # rowid aliases (_KEY) gets the current layout too.
                    cur.execute(f"DROP TABLE IF EXISTS {table}")
                    cur.execute(str(CreateTable(metadata.tables[table]).compile(engine)))
                    statement = (
                        f"INSERT INTO {table} ({', '.join(columns)}) "
                        f"VALUES ({', '.join('?' * len(columns))})"
                    )
                    with path.open(newline="", encoding="utf-8") as fh:
                        reader = csv.reader(fh)
                        next(reader)
                        before = conn.total_changes
                        cur.executemany(statement, reader)
                        counts.append(conn.total_changes - before)
                cur.execute(create_index)
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        finally:
            cur.execute(f"PRAGMA synchronous={int(saved_sync)}")
            cur.close()
            conn.isolation_level = saved_isolation
    finally:
        raw.close()
    return counts[0], counts[1]


def _load_mysql(engine: Engine, raw: Any, csv_dir: Path) -> tuple[int, int]:
    """``TRUNCATE`` both tables and ``LOAD DATA LOCAL INFILE`` the CSV files."""
    drop_index, create_index = _orders_index_ddl(engine)
    has_index = any(
        ix["name"] == "ix_orders_orderdate_key" for ix in inspect(engine).get_indexes("orders")
    )
    counts = []
    with raw.cursor() as cur:
        cur.execute("SET SESSION unique_checks = 0, foreign_key_checks = 0")
        cur.execute("DELETE FROM tpch_sample")
        for table, columns in (("customer", _CUSTOMER_COLUMNS), ("orders", _ORDERS_COLUMNS)):
            path = (csv_dir / f"{table}.csv").resolve()
            _check_header(path, columns)
            cur.execute(f"TRUNCATE TABLE {table}")
            if table == "orders" and has_index:
                cur.execute(drop_index)
            # ESCAPED BY '': CSV has no backslash escapes (a backslash is a character).
            # The line terminator is a real newline inside the SQL literal, so the
            # statement means the same under NO_BACKSLASH_ESCAPES.
            loaded = cur.execute(
                f"LOAD DATA LOCAL INFILE {raw.escape(str(path))} INTO TABLE {table} "
                "CHARACTER SET utf8mb4 "
                "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' "
                "LINES TERMINATED BY '\n' IGNORE 1 LINES "
                f"({', '.join(columns)})"
            )
            cur.execute("SELECT @@warning_count")
            (warnings,) = cur.fetchone()
            if warnings:
                cur.execute("SHOW WARNINGS LIMIT 5")
                details = "; ".join(f"{r[2]}" for r in cur.fetchall())
                raise RuntimeError(f"LOAD DATA into {table}: {warnings} warnings: {details}")
            counts.append(int(loaded))
        cur.execute(create_index)
        cur.execute("SET SESSION unique_checks = 1, foreign_key_checks = 1")
    return counts[0], counts[1]


def _first_tricky_order(csv_dir: Path) -> list[str]:
    """First ``orders.csv`` row whose comment starts with a space and has a comma."""
    with (csv_dir / "orders.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        next(reader)
        for row in reader:
            if row[-1].startswith(" ") and "," in row[-1]:
                return row
    raise RuntimeError("no order comment with a leading space and a comma in the sample")


def _verify(engine: Engine, csv_dir: Path, expected_orders: int, expected_customers: int) -> None:
    with engine.connect() as conn:
        n_orders = conn.execute(select(func.count()).select_from(orders)).scalar_one()
        n_customers = conn.execute(select(func.count()).select_from(customer)).scalar_one()
        if (n_orders, n_customers) != (expected_orders, expected_customers):
            raise RuntimeError(
                f"TPC-H load incomplete: {n_orders} orders / {n_customers} customers, "
                f"expected {expected_orders} / {expected_customers}"
            )
        source = _first_tricky_order(csv_dir)
        loaded = conn.execute(select(orders).where(orders.c.o_orderkey == int(source[0]))).one()
    as_text = [
        str(loaded.o_orderkey),
        str(loaded.o_custkey),
        loaded.o_orderstatus,
        f"{loaded.o_totalprice:.2f}",
        loaded.o_orderdate.isoformat(),
        loaded.o_orderpriority,
        loaded.o_clerk,
        str(loaded.o_shippriority),
        loaded.o_comment,
    ]
    if as_text != source or loaded.o_comment.encode() != source[-1].encode():
        raise RuntimeError(f"TPC-H round trip mismatch: CSV {source!r}, database {as_text!r}")


def ensure_loaded(
    engine: Engine,
    scale: float,
    data_dir: Path,
    *,
    progress: Progress | None = None,
) -> int:
    """Make sure the TPC-H ``customer`` and ``orders`` tables hold ``scale``.

    Creates the tables (and ``tpch_sample``) when missing. When ``tpch_sample`` records
    the same scale with counts equal to the table counts, nothing else happens;
    otherwise both tables are emptied, the CSV files generated (:func:`generate`, under
    ``data_dir``) and bulk-loaded: one ``executemany`` transaction with
    ``synchronous=OFF`` on SQLite, ``LOAD DATA LOCAL INFILE`` on MariaDB/MySQL. The
    load is then verified (row counts equal the CSV rows; an order whose comment starts
    with a space and contains commas round-trips exactly) and recorded in
    ``tpch_sample``.

    Safe to call from several processes at once: loaders are serialized with
    ``GET_LOCK('export_center_tpch', 600)`` on MariaDB/MySQL and a file lock next to
    the database file on SQLite; whoever comes second finds the data loaded.

    Args:
        engine: SQLite engine or ``mysql+pymysql`` engine of the sample database.
        scale: TPC-H scale factor (0.27 is 405,000 orders).
        data_dir: where the generated CSV directory lives (``tpch-sf<scale>``).
        progress: called with one human-readable line per step.

    Returns:
        The number of orders in the database.

    Raises:
        RuntimeError: generation failed or the loaded data does not match the CSV.
        TimeoutError: another process held the MariaDB load lock for 10 minutes.
    """
    say = progress or noop
    key = scale_key(scale)
    loaded = _loaded_orders(engine, key)
    if loaded is not None:
        return loaded
    with _load_session(engine) as raw:
        metadata.create_all(engine, checkfirst=True)
        loaded = _loaded_orders(engine, key)  # another process may have loaded it
        if loaded is not None:
            say(f"TPC-H sf{key} already loaded by another process ({loaded:,} orders)")
            return loaded
        started = time.monotonic()
        say(f"generating TPC-H sf{key} CSV under {data_dir}")
        csv_dir = generate(float(scale), Path(data_dir))
        marker = read_marker(csv_dir) or {}
        expected_orders = int(marker.get("orders") or count_csv_rows(csv_dir / "orders.csv"))
        expected_customers = int(
            marker.get("customers") or count_csv_rows(csv_dir / "customer.csv")
        )
        generated = time.monotonic()
        say(
            f"loading {expected_orders:,} orders and {expected_customers:,} customers "
            f"into {engine.dialect.name}"
        )
        if raw is None:
            _load_sqlite(engine, csv_dir)
        else:
            _load_mysql(engine, raw, csv_dir)
        _verify(engine, csv_dir, expected_orders, expected_customers)
        with engine.begin() as conn:
            conn.execute(delete(tpch_sample))
            conn.execute(
                insert(tpch_sample).values(
                    scale=key,
                    orders=expected_orders,
                    customers=expected_customers,
                    loaded_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
                )
            )
        done = time.monotonic()
        say(
            f"TPC-H sf{key} loaded: {expected_orders:,} orders, {expected_customers:,} "
            f"customers (generate {generated - started:.1f}s, load {done - generated:.1f}s)"
        )
        return expected_orders


def read_source_orders(csv_dir: Path) -> Iterator[dict[str, Any]]:
    """Yield the joined ``orders`` x ``customer`` rows straight from the CSV files.

    The rows come in ``orders.csv`` order (ascending order key) with the values typed
    as the database returns them, for tests comparing exported files with the source.
    Orders whose customer is missing are skipped (an inner join; TPC-H has none).

    Args:
        csv_dir: a directory returned by :func:`generate`.

    Yields:
        Dicts with ``o_orderkey`` (int), ``o_custkey`` (int), ``c_name``, ``c_phone``,
        ``c_mktsegment``, ``o_orderstatus``, ``o_totalprice`` (Decimal),
        ``o_orderdate`` (date), ``o_orderpriority``, ``o_clerk``, ``o_shippriority``
        (int) and ``o_comment`` (str).
    """
    csv_dir = Path(csv_dir)
    customers: dict[int, tuple[str, str, str]] = {}
    with (csv_dir / "customer.csv").open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            customers[int(row["c_custkey"])] = (
                row["c_name"],
                row["c_phone"],
                row["c_mktsegment"],
            )
    with (csv_dir / "orders.csv").open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            custkey = int(row["o_custkey"])
            found = customers.get(custkey)
            if found is None:
                continue
            name, phone, segment = found
            yield {
                "o_orderkey": int(row["o_orderkey"]),
                "o_custkey": custkey,
                "c_name": name,
                "c_phone": phone,
                "c_mktsegment": segment,
                "o_orderstatus": row["o_orderstatus"],
                "o_totalprice": Decimal(row["o_totalprice"]),
                "o_orderdate": dt.date.fromisoformat(row["o_orderdate"]),
                "o_orderpriority": row["o_orderpriority"],
                "o_clerk": row["o_clerk"],
                "o_shippriority": int(row["o_shippriority"]),
                "o_comment": row["o_comment"],
            }
