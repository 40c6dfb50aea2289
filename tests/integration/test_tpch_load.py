"""TPC-H sample data: generation with tpchgen-cli and loading into SQLite and MariaDB.

Scale 0.01 (15,000 orders, 1,500 customers). The MariaDB test needs
``EXPORT_CENTER_TEST_MARIADB_URL`` (``scripts/test.sh`` sets it); without it the test
skips locally and fails in CI.
"""

from __future__ import annotations

import csv
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, func, make_url, select, text

from export_center.db import make_engine
from providers import tpch
from providers.tpch_generate import MARKER_NAME

SCALE = 0.01
ORDERS = 15_000
CUSTOMERS = 1_500
CENT = Decimal("0.01")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tpch-data")


@pytest.fixture(scope="module")
def csv_dir(data_dir: Path) -> Path:
    return tpch.generate(SCALE, data_dir)


@pytest.fixture(scope="module")
def source(csv_dir: Path) -> dict[int, dict[str, Any]]:
    return {row["o_orderkey"]: row for row in tpch.read_source_orders(csv_dir)}


def _csv_rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))[1:]


def _source_keys(source: dict[int, dict[str, Any]]) -> list[int]:
    """A few orders worth comparing: first, last, priciest and the tricky comments."""
    keys = sorted(source)
    chosen = [keys[0], keys[1], keys[len(keys) // 2], keys[-1]]
    chosen.append(max(source.values(), key=lambda r: r["o_totalprice"])["o_orderkey"])
    chosen.append(
        next(
            k
            for k in keys
            if source[k]["o_comment"].startswith(" ") and "," in source[k]["o_comment"]
        )
    )
    chosen.append(next(k for k in keys if source[k]["o_comment"].startswith(",")))
    chosen.append(next(k for k in keys if source[k]["o_comment"].endswith(" ")))
    return sorted(set(chosen))


def _joined(engine: Engine, keys: list[int]) -> dict[int, dict[str, Any]]:
    o, c = tpch.orders.c, tpch.customer.c
    query = (
        select(
            o.o_orderkey,
            o.o_custkey,
            c.c_name,
            c.c_phone,
            c.c_mktsegment,
            o.o_orderstatus,
            o.o_totalprice,
            o.o_orderdate,
            o.o_orderpriority,
            o.o_clerk,
            o.o_shippriority,
            o.o_comment,
        )
        .select_from(tpch.orders.join(tpch.customer, o.o_custkey == c.c_custkey))
        .where(o.o_orderkey.in_(keys))
    )
    with engine.connect() as conn:
        return {row.o_orderkey: dict(row._mapping) for row in conn.execute(query)}


def assert_sample_loaded(engine: Engine, csv_dir: Path, source: dict[int, dict[str, Any]]) -> None:
    """Exact counts, exact values and whitespace-preserving text versus the CSV."""
    order_rows = _csv_rows(csv_dir / "orders.csv")
    customer_rows = _csv_rows(csv_dir / "customer.csv")
    assert len(order_rows) == ORDERS
    assert len(customer_rows) == CUSTOMERS

    o, c = tpch.orders.c, tpch.customer.c
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tpch.orders)).scalar_one() == ORDERS
        assert (
            conn.execute(select(func.count()).select_from(tpch.customer)).scalar_one() == CUSTOMERS
        )
        sample = conn.execute(select(tpch.tpch_sample)).all()
        assert [(r.scale, r.orders, r.customers) for r in sample] == [("0.01", ORDERS, CUSTOMERS)]

        # Whole-table checks: the money adds up to the cent, the key range is the same,
        # and leading/trailing spaces of every comment survived.
        total = conn.execute(select(func.sum(o.o_totalprice))).scalar_one()
        assert Decimal(str(total)).quantize(CENT) == sum(Decimal(r[3]) for r in order_rows)
        assert conn.execute(select(func.min(o.o_orderkey), func.max(o.o_orderkey))).one() == (
            int(order_rows[0][0]),
            int(order_rows[-1][0]),
        )
        leading = conn.execute(
            select(func.count()).where(func.substr(o.o_comment, 1, 1) == " ")
        ).scalar_one()
        assert leading == sum(r[8].startswith(" ") for r in order_rows) > 0
        lengths = conn.execute(select(func.sum(func.length(o.o_comment)))).scalar_one()
        assert lengths == sum(len(r[8]) for r in order_rows)

        # Customer text with commas and a trailing space comes back byte for byte.
        row = next(r for r in customer_rows if r[2].endswith(" ") and r[7].startswith(","))
        loaded = conn.execute(
            select(c.c_address, c.c_comment, c.c_acctbal).where(c.c_custkey == int(row[0]))
        ).one()
        assert loaded.c_address.encode() == row[2].encode()
        assert loaded.c_comment.encode() == row[7].encode()
        assert loaded.c_acctbal == Decimal(row[5])

    keys = _source_keys(source)
    joined = _joined(engine, keys)
    for key in keys:
        assert joined[key] == source[key], key
        assert joined[key]["o_comment"].encode() == source[key]["o_comment"].encode()


def test_generate_writes_complete_csv_once(data_dir: Path, csv_dir: Path) -> None:
    assert csv_dir == data_dir / "tpch-sf0.01"
    marker = csv_dir / MARKER_NAME
    assert marker.exists()
    orders_csv = csv_dir / "orders.csv"
    with orders_csv.open("rb") as fh:
        header = fh.readline()
        second = fh.readline()
    assert header == (
        b"o_orderkey,o_custkey,o_orderstatus,o_totalprice,o_orderdate,"
        b"o_orderpriority,o_clerk,o_shippriority,o_comment\n"
    )
    assert second.endswith(b'"\n') and b"\r" not in second
    assert len(_csv_rows(orders_csv)) == ORDERS
    assert len(_csv_rows(csv_dir / "customer.csv")) == CUSTOMERS

    before = (orders_csv.stat().st_mtime_ns, marker.stat().st_mtime_ns)
    assert tpch.generate(SCALE, data_dir) == csv_dir
    assert (orders_csv.stat().st_mtime_ns, marker.stat().st_mtime_ns) == before

    # An interrupted run (no marker) is generated again.
    marker.unlink()
    assert tpch.generate(SCALE, data_dir) == csv_dir
    assert marker.exists()
    assert len(_csv_rows(orders_csv)) == ORDERS


def test_read_source_orders(source: dict[int, dict[str, Any]], csv_dir: Path) -> None:
    assert len(source) == ORDERS
    first = source[min(source)]
    raw = _csv_rows(csv_dir / "orders.csv")[0]
    assert first["o_orderkey"] == int(raw[0])
    assert first["o_totalprice"] == Decimal(raw[3])
    assert first["o_orderdate"].isoformat() == raw[4]
    assert first["o_comment"] == raw[8]
    assert set(first) == {
        "o_orderkey",
        "o_custkey",
        "c_name",
        "c_phone",
        "c_mktsegment",
        "o_orderstatus",
        "o_totalprice",
        "o_orderdate",
        "o_orderpriority",
        "o_clerk",
        "o_shippriority",
        "o_comment",
    }
    # tpchgen-cli reproduces dbgen: order 2 has the same text at every scale.
    assert source[2]["o_comment"] == " foxes. pending accounts at the pending, silent asymptot"
    assert source[2]["c_name"].startswith("Customer#")


def _check_idempotent_and_reload(
    engine: Engine, data_dir: Path, csv_dir: Path, source: dict[int, dict[str, Any]]
) -> None:
    messages: list[str] = []
    with engine.connect() as conn:
        loaded_at = conn.execute(select(tpch.tpch_sample.c.loaded_at)).scalar_one()
    assert tpch.ensure_loaded(engine, SCALE, data_dir, progress=messages.append) == ORDERS
    assert messages == []
    with engine.connect() as conn:
        assert conn.execute(select(tpch.tpch_sample.c.loaded_at)).scalar_one() == loaded_at

    # Counts that no longer match what tpch_sample recorded trigger a full reload.
    with engine.begin() as conn:
        conn.execute(tpch.orders.delete().where(tpch.orders.c.o_orderkey == min(source)))
    assert tpch.ensure_loaded(engine, SCALE, data_dir, progress=messages.append) == ORDERS
    assert any("loaded" in m for m in messages)
    assert_sample_loaded(engine, csv_dir, source)


SqliteFactory = Callable[[str], Engine]


@pytest.mark.parametrize(
    "factory",
    [make_engine, lambda url: create_engine(url)],
    ids=["make_engine", "plain_engine"],
)
def test_load_into_sqlite(
    factory: SqliteFactory,
    tmp_path: Path,
    data_dir: Path,
    csv_dir: Path,
    source: dict[int, dict[str, Any]],
) -> None:
    engine = factory(f"sqlite:///{tmp_path / 'sample.db'}")
    try:
        messages: list[str] = []
        assert tpch.ensure_loaded(engine, SCALE, data_dir, progress=messages.append) == ORDERS
        assert any("loaded" in m for m in messages)
        assert_sample_loaded(engine, csv_dir, source)
        index_names = {ix.name for ix in tpch.orders.indexes}
        with engine.connect() as conn:
            names = conn.execute(
                text("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'orders'")
            ).scalars()
            assert index_names <= set(names)
            # The bulk load must not leave the connection's pragmas changed.
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() != 0
        _check_idempotent_and_reload(engine, data_dir, csv_dir, source)
    finally:
        engine.dispose()


@pytest.fixture
def mariadb_engine() -> Iterator[Engine]:
    """Engine on a fresh, uniquely named database of the MariaDB test server."""
    url = os.environ.get("EXPORT_CENTER_TEST_MARIADB_URL")
    if not url:
        message = "EXPORT_CENTER_TEST_MARIADB_URL is not set (run scripts/test.sh)"
        if _truthy(os.environ.get("CI")):
            pytest.fail(f"{message}; MariaDB tests must run in CI")
        pytest.skip(message)
    name = f"export_center_test_tpch_{uuid.uuid4().hex[:8]}"
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    engine = make_engine(make_url(url).set(database=name).render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()


@pytest.mark.mariadb
def test_load_into_mariadb(
    mariadb_engine: Engine,
    data_dir: Path,
    csv_dir: Path,
    source: dict[int, dict[str, Any]],
) -> None:
    engine = mariadb_engine
    # Two loaders at once: GET_LOCK serializes them and exactly one loads.
    results: list[int] = []
    errors: list[BaseException] = []
    logs: list[list[str]] = [[], []]
    barrier = threading.Barrier(2)

    def load(log: list[str]) -> None:
        try:
            barrier.wait()
            results.append(tpch.ensure_loaded(engine, SCALE, data_dir, progress=log.append))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(log,)) for log in logs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    assert results == [ORDERS, ORDERS]
    loaders = [log for log in logs if any(m.startswith("loading") for m in log)]
    assert len(loaders) == 1, logs

    assert_sample_loaded(engine, csv_dir, source)
    with engine.connect() as conn:
        indexes = {row.Key_name for row in conn.exec_driver_sql("SHOW INDEX FROM orders")}
    assert "ix_orders_orderdate_key" in indexes
    _check_idempotent_and_reload(engine, data_dir, csv_dir, source)


def test_sqlite_keys_are_rowids_even_over_an_older_layout(
    tmp_path: Path, data_dir: Path, csv_dir: Path, source: dict[int, dict[str, Any]]
) -> None:
    """A file whose tables were made with BIGINT keys (the layout before rowid keys)
    is reloaded into the current layout: the ORDERS keyset query then walks rowids."""
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "CREATE TABLE orders (o_orderkey BIGINT NOT NULL, o_custkey BIGINT NOT NULL,"
                " o_orderstatus CHAR(1) NOT NULL, o_totalprice NUMERIC(15, 2) NOT NULL,"
                " o_orderdate DATE NOT NULL, o_orderpriority VARCHAR(15) NOT NULL,"
                " o_clerk VARCHAR(15) NOT NULL, o_shippriority INTEGER NOT NULL,"
                " o_comment VARCHAR(79) NOT NULL, PRIMARY KEY (o_orderkey))"
            )
            before = conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN SELECT * FROM orders WHERE o_orderkey > 5"
            ).all()
        assert "INTEGER PRIMARY KEY" not in str(before)
        assert tpch.ensure_loaded(engine, SCALE, data_dir) == ORDERS
        assert_sample_loaded(engine, csv_dir, source)
        with engine.connect() as conn:
            for table, key in (("orders", "o_orderkey"), ("customer", "c_custkey")):
                plan = conn.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN SELECT * FROM {table} WHERE {key} > 5"
                ).all()
                assert "INTEGER PRIMARY KEY" in str(plan), (table, plan)
    finally:
        engine.dispose()
