"""Sharded exports end to end over real HTTP, on SQLite and MariaDB: day shards in
parallel, checkpoints, resume after a failed attempt, a snapshot that expired, a manual
retry that resumes or starts fresh, cancel, and the reconciler's part cleanup.

ORDERS with both dates is sharded by day (at most 16 shards, 4 at once). The probe
(:class:`tests.support.shard_probe.ServedRows`) counts the rows the provider served per task,
so a test can tell what an attempt fetched again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from sqlalchemy import select, update

from export_center.errors import ProviderUnavailable
from export_center.models import ExportAudit, ExportShard, ExportTask
from export_center.reconciler import Reconciler
from export_center.settings import ReconcilerSettings
from export_center.storage.keys import PART_PREFIX
from export_center.testing import FaultInjectingRun
from providers import tpch
from tests.conftest import SAMPLE_SCALE
from tests.support.cases_provider import CASES_TOKEN, cases_registry
from tests.support.helpers import (
    Stack,
    assert_same_workbook_but_its_mark,
    create,
    download,
    in_shard_order,
    read_csv,
    read_xlsx,
    wait_state,
)
from tests.support.shard_probe import ServedRows
from tests.unit.writer_helpers import frozen_package_time

ORDERS = int(SAMPLE_SCALE * tpch.ORDERS_PER_SCALE)
ALL_DATES = {"from": "1992-01-01", "to": "1998-12-31"}
T, S, A = ExportTask.__table__, ExportShard.__table__, ExportAudit.__table__


def _probed(make_stack: Callable[..., Stack], **overrides: Any) -> tuple[Stack, ServedRows]:
    probes: list[ServedRows] = []

    def wrap(app: Any) -> ServedRows:
        probes.append(ServedRows(app))
        return probes[-1]

    stack = make_stack(wrap=wrap, **overrides)
    return stack, probes[0]


def _source_by_day(sample_dir: Path, stack: Stack) -> list[int]:
    """Order keys in the sharded file's order: by shard (40 consecutive days for the
    whole range in 16 shards: about 160 days each), then by order key."""
    rows = tpch.read_source_orders(tpch.generate(SAMPLE_SCALE, sample_dir))
    return in_shard_order(stack, ALL_DATES, ((r["o_orderdate"], r["o_orderkey"]) for r in rows))


def _parts(stack: Stack) -> list[str]:
    return [o.key for o in stack.runtime.storage.list(PART_PREFIX)]


def _small_pages(stack: Stack, rows: int = 50) -> None:
    """ORDERS pages of ``rows`` (5,000 in the registry): at scale 0.01 a shard holds
    about 230 orders, so each shard then pages several times and can resume mid-way."""
    registry = stack.runtime.registry
    registry.types["ORDERS"] = dataclasses.replace(registry.types["ORDERS"], batch_size=rows)


def _set_parallel(stack: Stack, shards: int) -> None:
    stack.runtime.settings.task.shard_parallel_cap = shards


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_four_shards_at_once_give_the_bytes_of_one_at_a_time(make_stack, sample_dir, fmt):
    stack, probe = _probed(make_stack)
    client = stack.client()
    files, tasks = [], []
    with frozen_package_time():  # an XLSX package records when it was written
        for parallel in (4, 1):
            _set_parallel(stack, parallel)
            task_id = create(client, fmt, parameters=ALL_DATES).json()["taskId"]
            detail = wait_state(client, task_id)
            assert detail["state"] == "succeeded", detail
            assert detail["processed"] == ORDERS
            assert detail["shardsDone"] == detail["shardsTotal"] == 16
            assert probe.served(task_id) == ORDERS  # nothing fetched twice
            assert len(probe.by_shard(task_id)) == 16
            files.append(download(client, detail))
            tasks.append(task_id)
    if fmt == "csv":
        assert files[0] == files[1]
    else:  # each workbook names its own task in its document properties
        assert_same_workbook_but_its_mark(files[0], files[1], *tasks)
    rows = read_csv(files[0])[1:] if fmt == "csv" else read_xlsx(files[0])[1:]
    keys = [int(r[0]) for r in rows]
    assert keys == _source_by_day(sample_dir, stack)
    assert _parts(stack) == []  # parts are deleted after the commit
    with stack.runtime.engine.connect() as conn:
        assert conn.execute(select(S.c.task_id)).first() is None


class _FailOnce:
    """Fault for FaultInjectingRun: the first attempt fails transiently at the N-th
    page render, once several shards are done; later attempts run clean."""

    def __init__(self, nth: int) -> None:
        self.nth, self.seen, self.lock = nth, 0, threading.Lock()

    def __call__(self, point: str) -> None:
        if point != "render":
            return
        with self.lock:
            self.seen += 1
            if self.seen == self.nth:
                raise ProviderUnavailable("the provider went away (injected)")


def test_a_retry_resumes_from_the_checkpoints(make_stack, sample_dir):
    stack, probe = _probed(make_stack, task={"checkpoint_every_seconds": 0.001})
    _small_pages(stack)
    stack.runtime.consumer.run_factory = FaultInjectingRun.with_fault(_FailOnce(120))
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded", detail
    assert detail["attempts"] == 2
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert keys == _source_by_day(sample_dir, stack)
    served = probe.served(task_id)
    # The second attempt fetched again only what was not checkpointed: at most the
    # pages in flight of the 4 running shards.
    assert ORDERS <= served <= ORDERS * 1.15, served
    with stack.runtime.engine.connect() as conn:
        audit = conn.execute(select(A.c.action, A.c.outcome, A.c.reason, A.c.details_json)).all()
    resumed = [a for a in audit if a.action == "resume"]
    assert len(resumed) == 1 and resumed[0].outcome == "resumed", audit
    assert "of 16 shards done" in resumed[0].reason
    # The facts of the sentence, for a reader in another language (the Operations view).
    facts = json.loads(resumed[0].details_json)
    assert facts["shardsTotal"] == 16 and 0 <= facts["shardsDone"] < 16
    assert resumed[0].reason == (
        f"{facts['shardsDone']} of 16 shards done, {facts['rowsKept']:,} rows kept"
    )


def test_a_failed_task_retried_by_hand_resumes_or_starts_fresh(make_stack):
    stack, probe = _probed(
        make_stack, task={"checkpoint_every_seconds": 0.001, "retry_backoff_seconds": [0.2]}
    )
    _small_pages(stack)
    fault = _FailOnce(120)
    stack.runtime.consumer.run_factory = FaultInjectingRun.with_fault(fault)
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    with stack.runtime.engine.begin() as conn:  # one attempt only: the failure is final
        conn.execute(update(T).where(T.c.task_no == task_id).values(max_attempts=1))
    failed = wait_state(client, task_id)
    assert failed["state"] == "failed", failed
    assert failed["error"]["message"].startswith("fetch: shard "), failed
    assert "page" in failed["error"]["message"]
    kept = [key for key in _parts(stack) if task_id in key]
    assert kept, "a failed task keeps its parts for a retry that resumes"
    served_before = probe.served(task_id)
    assert client.post(f"/api/v1/exports/{task_id}/retry").status_code == 202
    resumed = wait_state(client, task_id)
    assert resumed["state"] == "succeeded", resumed
    refetched = probe.served(task_id) - served_before
    assert refetched < ORDERS - served_before + ORDERS * 0.15, refetched
    # A fresh run: fail again, then retry with fresh=true: every row is fetched again.
    fault.seen = 0
    second = create(client, "csv", parameters=ALL_DATES, taskName="again").json()["taskId"]
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(T).where(T.c.task_no == second).values(max_attempts=1))
    assert wait_state(client, second)["state"] == "failed"
    before = probe.served(second)
    answer = client.post(f"/api/v1/exports/{second}/retry", params={"fresh": "true"})
    assert answer.status_code == 202, answer.text
    assert wait_state(client, second)["state"] == "succeeded"
    assert probe.served(second) - before == ORDERS


def test_an_expired_snapshot_restarts_from_zero_and_says_so(make_stack, sample_dir):
    # Snapshot tokens live 8 s; the first attempt fails about 1 s in and the retry comes
    # 8.5 s later, so the checkpoints' tokens have expired (410) when it resumes. The
    # restarted run's shards must each finish within 8 s of their first page (3 s was
    # too short for a busy machine: a fresh shard's own token expired).
    stack, probe = _probed(
        make_stack,
        task={"checkpoint_every_seconds": 0.001, "retry_backoff_seconds": [8.5]},
        provider={"snapshot_ttl_seconds": 8},
    )
    client = stack.client()
    _small_pages(stack)
    stack.runtime.consumer.run_factory = FaultInjectingRun.with_fault(_FailOnce(120))
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    detail = wait_state(client, task_id, timeout=90)
    assert detail["state"] == "succeeded", detail
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert keys == _source_by_day(sample_dir, stack)
    with stack.runtime.engine.connect() as conn:
        audit = conn.execute(select(A.c.action, A.c.outcome, A.c.reason, A.c.details_json)).all()
    outcomes = [(a.action, a.outcome) for a in audit]
    assert ("resume", "resumed") in outcomes and ("resume", "restarted") in outcomes, audit
    (restarted,) = [a for a in audit if a.outcome == "restarted"]
    assert json.loads(restarted.details_json) == {"cause": "snapshot_expired"}
    assert probe.served(task_id) > ORDERS  # the first attempt's rows were fetched again


def test_cancel_of_a_four_shard_export_stops_within_10_s_and_leaves_no_parts(make_stack):
    slow = {"checkpoint_every_seconds": 0.001}
    stack, _probe = _probed(make_stack, task=slow)
    _small_pages(stack)

    def crawl(point: str) -> None:
        if point == "fetch":
            time.sleep(0.2)  # a slow provider: 300 pages, about 15 s with 4 at once

    stack.runtime.consumer.run_factory = FaultInjectingRun.with_fault(crawl)
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _parts(stack):
        time.sleep(0.05)
    assert _parts(stack), "the shards stored segments before the cancel"
    started = time.monotonic()
    assert client.post(f"/api/v1/exports/{task_id}/cancel").status_code in (200, 202)
    detail = wait_state(client, task_id, timeout=30)
    took = time.monotonic() - started
    assert detail["state"] == "cancelled", detail
    assert took <= 10, took
    assert _parts(stack) == []
    with stack.runtime.engine.connect() as conn:
        assert conn.execute(select(S.c.task_id)).first() is None


def test_the_reconciler_deletes_the_parts_of_ended_tasks_only(make_stack):
    stack = make_stack(publisher={"enabled": False}, consumer={"enabled": False})
    storage = stack.runtime.storage
    client = stack.client()
    ids = {}
    for day, name in enumerate(("queued", "failed", "stale", "cancelled", "done"), 20):
        params = {"from": "1992-01-01", "to": f"1998-12-{day}"}  # five tasks, not duplicates
        ids[name] = create(client, "csv", parameters=params, taskName=name).json()["taskId"]
        storage.put_part(f"parts/{ids[name]}/00000/000000.v1", b"rows")
    storage.put_part("parts/exp_01J8Z4K2000000000000000000/00000/000000.v1", b"gone")
    statuses = {
        "failed": "FAILED",
        "stale": "FAILED",
        "cancelled": "CANCELLED",
        "done": "SUCCEEDED",
    }
    with stack.runtime.engine.begin() as conn:
        for name, status in statuses.items():
            conn.execute(update(T).where(T.c.task_no == ids[name]).values(status=status))
    old = time.time() - 8 * 86400
    stale_dir = Path(stack.settings.files_dir) / "parts" / ids["stale"] / "00000"
    for path in stale_dir.iterdir():
        os.utime(path, (old, old))
    reconciler = Reconciler(
        stack.runtime.engine,
        storage,
        ReconcilerSettings(failed_parts_retention_days=7),
        topic=stack.settings.command_topic,
    )
    reconciler.run_once()
    left = sorted(_parts(stack))
    assert left == sorted(f"parts/{ids[n]}/00000/000000.v1" for n in ("queued", "failed"))
    assert reconciler.last["part_clean"] == 4


def test_the_task_detail_counts_shards_while_running(make_stack):
    stack, _probe = _probed(make_stack, task={"checkpoint_every_seconds": 0.001})

    def crawl(point: str) -> None:
        if point == "fetch":
            time.sleep(0.05)

    stack.runtime.consumer.run_factory = FaultInjectingRun.with_fault(crawl)
    client = stack.client()
    params = {"from": "1995-03-01", "to": "1995-03-10"}
    task_id = create(client, "csv", parameters=params).json()["taskId"]
    seen = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        if detail["shardsTotal"] is not None:
            seen.add((detail["shardsDone"], detail["shardsTotal"]))
        if detail["state"] == "succeeded":
            break
        time.sleep(0.02)
    assert (10, 10) in seen and any(done < 10 for done, _ in seen), seen


def _events_client(
    make_stack: Callable[..., Stack], cases: Any, tmp_path: Path, stamps: list[dt.datetime]
) -> httpx.Client:
    """A stack with the cases registry, the events at ``stamps`` (ids 0..n-1) in the
    cases provider, and a client that may export them."""
    cases.db.executemany(
        "INSERT INTO events VALUES (?, ?)",
        [(i, s.strftime("%Y-%m-%dT%H:%M:%S.%f")) for i, s in enumerate(stamps)],
    )
    stack = make_stack(
        export_types_file=str(cases_registry(tmp_path, cases.url)),
        provider={"internal_token": CASES_TOKEN},
    )
    return stack.client(perms=["export:cases:create"])


@pytest.mark.parametrize(
    ("first", "last", "hours"),
    [("2024-03-09", "2024-03-11", [24, 23, 24]), ("2024-11-02", "2024-11-04", [24, 25, 24])],
)
def test_dst_days_in_new_york_are_shards_of_their_own_length(
    make_stack, cases, tmp_path, first, last, hours
):
    """A day-sharded type over the spring-forward and fall-back weekends: the windows
    are 24/23/24 and 24/25/24 hours, and every event of the three days is in the file
    exactly once (one event every 7 minutes, from two days before to two days after)."""
    start = dt.datetime.fromisoformat(first).replace(tzinfo=dt.UTC) - dt.timedelta(days=2)
    stamps = [start + dt.timedelta(minutes=7 * i) for i in range(7 * 24 * 60 // 7)]
    client = _events_client(make_stack, cases, tmp_path, stamps)
    answer = create(
        client,
        "csv",
        exportType="DAY_EVENTS",
        timeZone="America/New_York",
        parameters={"from": first, "to": last},
    )
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"], timeout=60)
    assert detail["state"] == "succeeded", detail
    windows = sorted(
        {(r["shard"]["from"], r["shard"]["to"]) for r in cases.requests if r.get("shard")}
    )
    lengths = [
        (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds() / 3600
        for a, b in windows
    ]
    assert lengths == hours
    zone = ZoneInfo("America/New_York")
    day0 = dt.datetime.fromisoformat(first).replace(tzinfo=zone)
    day3 = dt.datetime.fromisoformat(last).replace(tzinfo=zone) + dt.timedelta(days=1)
    expected = [i for i, s in enumerate(stamps) if day0 <= s < day3]
    ids = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert ids == expected  # each once, none missing, in time order across the shards
    assert abs(len(expected) - sum(hours) * 60 / 7) <= 1


@pytest.mark.parametrize(("largest", "state"), [(300, "succeeded"), (100, "failed")])
def test_each_shard_halves_its_pages_after_a_413(make_stack, cases, tmp_path, largest, state):
    """DAY_EVENTS asks for pages of 1,000 rows; the provider refuses pages above
    ``largest`` with 413. Each shard halves its own page size (1,000 -> 500 -> 250)
    and succeeds with pages of at most 250 rows; below the 200-row floor the export
    fails with a sentence that names the shard and the limit."""
    start = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    stamps = [start + dt.timedelta(minutes=i) for i in range(3 * 24 * 60)]  # 1,440 a day
    client = _events_client(make_stack, cases, tmp_path, stamps)
    params = {"from": "2024-05-01", "to": "2024-05-03", "maxPage": largest}
    answer = create(client, "csv", exportType="DAY_EVENTS", parameters=params)
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"], timeout=60)
    assert detail["state"] == state, detail
    served = [r["limit"] for r in cases.requests if r.get("shard")]
    if state == "succeeded":
        ids = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
        assert ids == list(range(len(stamps)))
        assert set(served) == {1000, 500, 250}
        answered = [r for r in cases.requests if r.get("shard") and r["limit"] <= largest]
        assert len(answered) >= 3 * (1440 // 250)
    else:
        message = detail["error"]["message"]
        assert message.startswith("fetch: shard 2024-05-0"), message
        assert "200 rows" in message and "413" in message, message
        assert min(served) == 200


@pytest.mark.parametrize(("empty", "state"), [(99, "succeeded"), (100, "failed")])
def test_each_shard_bounds_its_empty_pages_with_has_more(make_stack, cases, tmp_path, empty, state):
    """Every shard of DAY_EVENTS first answers ``empty`` pages without rows that say
    hasMore, each with a new cursor. Each shard counts its own: 99 in a row are
    followed and every event is written once; the 100th fails the export for good,
    naming the shard, the page and the cursor, after at most 100 calls per shard."""
    start = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    stamps = [start + dt.timedelta(minutes=10 * i) for i in range(3 * 24 * 6)]  # 3 days
    client = _events_client(make_stack, cases, tmp_path, stamps)
    params = {"from": "2024-05-01", "to": "2024-05-03", "emptyPages": empty}
    answer = create(client, "csv", exportType="DAY_EVENTS", parameters=params)
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"], timeout=120)
    assert detail["state"] == state, detail
    calls: dict[str, int] = {}
    for request in cases.requests:
        if request.get("shard"):
            calls[request["shard"]["id"]] = calls.get(request["shard"]["id"], 0) + 1
    if state == "succeeded":
        assert calls == {day: empty + 1 for day in ("2024-05-01", "2024-05-02", "2024-05-03")}
        ids = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
        assert ids == list(range(len(stamps)))
        return
    assert detail["attempts"] == 1 and detail["error"]["code"] == "PROVIDER_CONTRACT"
    message = detail["error"]["message"]
    assert message.startswith("fetch: shard 2024-05-0") and ", page 100 (cursor " in message
    assert (
        message.endswith("...')")
        and (
            "provider broke the contract: 100 empty pages in a row said hasMore (last nextCursor '"
        )
        in message
    )
    assert max(calls.values()) == 100 and sum(calls.values()) <= 3 * 100, calls


def test_a_retry_after_the_shard_plan_changed_starts_over_and_says_so(make_stack, sample_dir):
    stack, probe = _probed(make_stack)
    _small_pages(stack)
    stack.runtime.consumer.run_factory = FaultInjectingRun.with_fault(_FailOnce(120))
    client = stack.client()
    task_id = create(client, "csv", parameters=ALL_DATES).json()["taskId"]
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(T).where(T.c.task_no == task_id).values(max_attempts=1))
    assert wait_state(client, task_id)["state"] == "failed"
    registry = stack.runtime.registry
    orders = registry.types["ORDERS"]
    assert orders.shards is not None
    registry.types["ORDERS"] = dataclasses.replace(
        orders, shards=dataclasses.replace(orders.shards, max_shards=10)
    )
    before = probe.served(task_id)
    assert client.post(f"/api/v1/exports/{task_id}/retry").status_code == 202
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded", detail
    assert detail["shardsTotal"] == 10
    assert probe.served(task_id) - before == ORDERS  # nothing of the old plan was reused
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert keys == _source_by_day(sample_dir, stack)
    with stack.runtime.engine.connect() as conn:
        audit = conn.execute(select(A.c.action, A.c.outcome, A.c.reason, A.c.details_json)).all()
    assert any(
        a.action == "resume"
        and a.outcome == "restarted"
        and "plan changed" in a.reason
        and json.loads(a.details_json) == {"cause": "plan_changed"}
        for a in audit
    ), audit
