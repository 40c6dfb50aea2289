"""The ORDERS sample provider's fast read (issue #6): JSON built by SQL, one result
row per batch, gives exactly the rows of the row-by-row read and of the source values.

SQLite in memory (no file): the TPC-H tables are created with ``providers.tpch``'s
metadata and filled with tricky values (quotes, commas, control characters, the
separator U+001E, non-BMP text, whole and two-decimal prices).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.pool import StaticPool

from providers import samples, tpch
from providers.sdk import BatchRequest

COMMENTS = [
    "plain",
    "with, comma",
    'a "quote"',
    "-lead",
    "tab\tcr\rlf\n",
    "sep\x1ehere",
    "back\\slash",
    "emoji 😀 中文",
    "",
    " trailing ",
    "=1+1",
]


@pytest.fixture
def engine() -> Any:
    engine = create_engine(
        "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
    )
    tpch.metadata.create_all(engine)
    customers = [
        {
            "c_custkey": k,
            "c_name": f"Customer#{k:09d}",
            "c_address": "addr",
            "c_nationkey": 1,
            "c_phone": f"10-{k:03d}-000-0000",
            "c_acctbal": "1.00",
            "c_mktsegment": "BUILDING",
            "c_comment": "c",
        }
        for k in range(1, 6)
    ]
    orders = [
        {
            "o_orderkey": 4 * i + 1,
            "o_custkey": 1 + i % 5,
            "o_orderstatus": "OFP"[i % 3],
            "o_totalprice": ["100.00", "182210.40", "0.10", "555285.16", "845.57"][i % 5],
            "o_orderdate": dt.date(1992, 1, 1) + dt.timedelta(days=37 * i),
            "o_orderpriority": ["1-URGENT", "5-LOW"][i % 2],
            "o_clerk": f"Clerk#{i:09d}",
            "o_shippriority": 0,
            "o_comment": COMMENTS[i % len(COMMENTS)],
        }
        for i in range(57)
    ]
    with engine.begin() as conn:
        conn.execute(insert(tpch.customer), customers)
        conn.execute(insert(tpch.orders), orders)
    return engine


def run(
    engine: Any,
    *,
    json_path: bool,
    limit: int = 10,
    read_ahead: bool = False,
    task: str = "t1",
    **params: Any,
) -> list[dict[str, Any]]:
    provider = samples.orders_provider(engine, token="t", secret="s", read_ahead=read_ahead)
    return pages(provider, json_path=json_path, limit=limit, task=task, **params)


def pages(
    provider: Any, *, json_path: bool = True, limit: int = 10, task: str = "t1", **params: Any
) -> list[dict[str, Any]]:
    if not json_path:
        provider_fetch = provider.fetch

        def rows_only(req: BatchRequest, cursor: Any, snapshot: Any) -> Any:
            original = samples._json_batch
            samples._json_batch = lambda *a: None  # every batch fails the checks
            try:
                return provider_fetch(req, cursor, snapshot)
            finally:
                samples._json_batch = original

        provider.fetch = rows_only
    rows: list[dict[str, Any]] = []
    keys = [c.key for c in samples.ORDERS_COLUMNS]
    cursor = snapshot = None
    while True:
        body = orjson.dumps(
            {
                "taskId": task,
                "tenantId": "t",
                "appCode": "PLATFORM",
                "requestedBy": "u",
                "dispatchVersion": 1,
                "parameters": params,
                "cursor": cursor,
                "snapshotToken": snapshot,
                "limit": limit,
            }
        )
        answer = provider.handle(body, "t")
        assert answer.status_code == 200, answer.body
        page = orjson.loads(answer.body)
        assert len(page["rows"]) <= limit
        assert page["rowFormat"] == "array"
        assert all(type(r) is list and len(r) == len(keys) for r in page["rows"])
        rows += [dict(zip(keys, r, strict=True)) for r in page["rows"]]
        snapshot = page["snapshotToken"]
        if not page["hasMore"]:
            return rows
        cursor = page["nextCursor"]


@pytest.mark.parametrize("limit", [1, 10, 57, 100])
def test_json_batches_equal_row_batches_and_the_source(
    engine: Any, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = samples._json_batch
    results: list[Any] = []
    monkeypatch.setattr(samples, "_json_batch", lambda *a: results.append(read(*a)) or results[-1])
    fast = run(engine, json_path=True, limit=limit)
    assert results and all(r is not None for r in results)  # no batch fell back
    monkeypatch.setattr(samples, "_json_batch", read)
    slow = run(engine, json_path=False, limit=limit)
    assert fast == slow
    assert [r["o_orderkey"] for r in fast] == [4 * i + 1 for i in range(57)]
    assert [r["o_comment"] for r in fast] == [COMMENTS[i % len(COMMENTS)] for i in range(57)]
    assert [r["o_totalprice"] for r in fast[:5]] == [
        "100.00",
        "182210.40",
        "0.10",
        "555285.16",
        "845.57",
    ]
    assert fast[1]["o_orderdate"] == "1992-02-07" and fast[0]["c_name"] == "Customer#000000001"


def test_filters_are_the_same_on_both_paths(engine: Any) -> None:
    params = {"from": "1992-03-01", "to": "1994-12-31", "status": "F"}
    fast = run(engine, json_path=True, limit=3, **params)
    assert fast == run(engine, json_path=False, limit=3, **params)
    assert fast and all(
        "1992-03-01" <= r["o_orderdate"] <= "1994-12-31" and r["o_orderstatus"] == "F" for r in fast
    )


def test_out_of_order_keys_fall_back_to_rows() -> None:
    class Cursor:
        def execute(self, sql: str, binds: list[Any]) -> None:
            pass

        def fetchone(self) -> tuple[int, str, str]:
            return 2, "5,3", '{"a":1}\x1e{"a":2}'

    assert samples._json_batch(Cursor(), "", [], 10) is None


def test_cut_aggregate_falls_back_to_rows() -> None:
    class Cursor:
        def execute(self, sql: str, binds: list[Any]) -> None:
            pass

        def fetchone(self) -> tuple[int, str, str]:
            return 3, "1,2,3", '{"a":1}\x1e{"a":2}'  # group_concat cut at a length limit

    assert samples._json_batch(Cursor(), "", [], 10) is None


def test_read_ahead_gives_the_same_rows_and_reads_each_batch_once(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = samples._json_batch
    calls: list[int] = []

    def counted(cur: Any, sql: str, binds: list[Any], limit: int) -> Any:
        calls.append(binds[0])
        return read(cur, sql, binds, limit)

    monkeypatch.setattr(samples, "_json_batch", counted)
    expected = run(engine, json_path=True, limit=7)
    calls.clear()
    provider = samples.orders_provider(engine, token="t", secret="s", read_ahead=True)
    assert pages(provider, limit=7) == expected
    assert sorted(calls) == sorted(set(calls))  # no batch read twice
    assert len(calls) == 9  # 57 rows in batches of 7
    # Two tasks interleaved, and one with filters: nothing mixes up.
    params = {"from": "1992-03-01", "to": "1994-12-31"}
    first = pages(provider, limit=5, task="a")
    second = pages(provider, limit=5, task="b", **params)
    assert first == run(engine, json_path=True, limit=5)
    assert second == run(engine, json_path=True, limit=5, **params)


def test_read_ahead_misses_and_failures_read_at_once() -> None:
    ahead = samples._ReadAhead()
    ahead.start("t", ("k", 1), lambda: ("rows", 5, True))
    assert ahead.take("t", ("k", 2)) is None  # another request: not used, and dropped
    assert ahead.take("t", ("k", 1)) is None

    def broken() -> Any:
        raise RuntimeError("database gone")

    ahead.start("t", "key", broken)
    assert ahead.take("t", "key") is None
    ahead.start("t", "key", lambda: "batch")
    assert ahead.take("t", "key") == "batch" and ahead.take("t", "key") is None


def test_read_ahead_keeps_a_bounded_number_of_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    ahead = samples._ReadAhead()
    for task in range(samples._READ_AHEAD_TASKS + 5):
        ahead.start(task, "key", lambda: "batch")
    assert len(ahead._pending) == samples._READ_AHEAD_TASKS
    assert (
        ahead.take(0, "key") is None and ahead.take(samples._READ_AHEAD_TASKS + 4, "key") == "batch"
    )
    monkeypatch.setattr(samples, "_READ_AHEAD_SECONDS", -1.0)
    ahead.start("new", "key", lambda: "batch")
    assert list(ahead._pending) == ["new"]  # old entries expired
