"""kill -9 of the worker at 20 random moments of 1.5-million-order exports (TPC-H
scale 1, ORDERS of the whole date range: 16 day shards, 4 at once), on SQLite and
MariaDB.

The API and the sample provider run in the test process behind a probe that counts
the rows served per task; workers are separate processes (``python -m
tests.support.fault_worker``) sharing the database and the file store, one export at a time.
Four exports (two CSV, two XLSX) are created; 20 times a worker is started, left to
run for a random 0.5-4 s once it has claimed an export, and killed with SIGKILL: five
kills per export (an export that had its five runs on to its end). A last
worker finishes everything. Every task must end SUCCEEDED with its exact rows (each
order key once, none missing, in shard order and by key within a shard), and all the
attempts of a task together may fetch at most 15 % of its rows a second time.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import random
import re
import signal
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from export_center.models import ExportTask
from providers import tpch
from tests.integration.test_crash_recovery import start_worker
from tests.support.helpers import Stack, create, download, in_shard_order, read_csv, wait_state
from tests.support.shard_probe import ServedRows

pytestmark = [pytest.mark.slow, pytest.mark.second_process, pytest.mark.timeout(1500)]

SCALE = 1.0
ORDERS = int(SCALE * tpch.ORDERS_PER_SCALE)
KILLS = 20
REFETCH_LIMIT = 0.15
T = ExportTask.__table__
EXPORTS = [
    ("csv", {"from": "1992-01-01", "to": "1998-12-31"}),
    ("xlsx", {"from": "1992-01-01", "to": "1998-12-31"}),
    ("csv", {"from": "1992-01-01", "to": "1998-12-30"}),
    ("xlsx", {"from": "1992-01-01", "to": "1998-12-30"}),
]


def _expected(stack: Stack, sample_dir: Path, parameters: dict[str, str]) -> list[int]:
    """Order keys in the file's order: by shard, then by key within the shard."""
    first, last = (dt.date.fromisoformat(parameters[k]) for k in ("from", "to"))
    rows = tpch.read_source_orders(tpch.generate(SCALE, sample_dir))
    inside = (
        (r["o_orderdate"], r["o_orderkey"]) for r in rows if first <= r["o_orderdate"] <= last
    )
    return in_shard_order(stack, parameters, inside)


_FIRST_CELL = re.compile(rb'<row r="\d+"><c r="A\d+"[^>]*><v>(\d+)</v>')


def _xlsx_keys(data: bytes) -> tuple[list[int], int]:
    """Column A of every data row of every sheet (the header rows skipped), and the
    number of sheets: a fast reader for 1.5 million rows, checked by openpyxl on a
    smaller file in the integration tests."""
    keys: list[int] = []
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        sheets = sorted(n for n in package.namelist() if n.startswith("xl/worksheets/sheet"))
        for name in sheets:
            keys.extend(int(v) for v in _FIRST_CELL.findall(package.read(name)))
    return keys, len(sheets)


def _running(stack: Stack, instance: str) -> str | None:
    """The task an attempt of worker ``instance`` runs now (None: none)."""
    with stack.runtime.engine.connect() as conn:
        row = conn.execute(
            select(T.c.task_no).where(
                T.c.status == "RUNNING", T.c.lease_owner.startswith(instance + "/")
            )
        ).first()
    return None if row is None else str(row[0])


def _all_ended(stack: Stack, task_ids: list[str]) -> bool:
    with stack.runtime.engine.connect() as conn:
        states = conn.execute(select(T.c.status).where(T.c.task_no.in_(task_ids))).scalars()
        return all(state in ("SUCCEEDED", "FAILED", "CANCELLED") for state in states)


@pytest.fixture
def probed_api(make_stack: Callable[..., Stack]) -> tuple[Stack, ServedRows]:
    probes: list[ServedRows] = []

    def wrap(app: Any) -> ServedRows:
        probes.append(ServedRows(app))
        return probes[-1]

    stack = make_stack(
        scale=SCALE,
        wrap=wrap,
        publisher={"enabled": False},
        consumer={"enabled": False},
        reconciler={"enabled": False},
    )
    return stack, probes[0]


def test_kill_9_at_20_random_moments_resumes_every_export_exactly(probed_api, sample_dir):
    stack, probe = probed_api
    client = stack.client()
    tasks = [
        (fmt, params, create(client, fmt, parameters=params).json()["taskId"])
        for fmt, params in EXPORTS
    ]
    rng = random.Random(int(os.environ.get("EXPORT_CENTER_TEST_SEED", "20261201")))
    killed: Counter[str] = Counter()
    env = {
        # A kill is a lease recovery, not an attempt; 20 kills use more than the 3 allowed.
        "EXPORT_CENTER_TASK__MAX_LEASE_RECOVERIES": "100",
        "EXPORT_CENTER_TASK__MAX_DURATION_MINUTES": "20",
        "EXPORT_CENTER_TASK__RETRY_BACKOFF_SECONDS": "[1]",
    }
    per_task = KILLS // len(EXPORTS)
    task_ids = [t for _f, _p, t in tasks]
    for number in range(KILLS):
        instance = f"worker-{number}"
        victim = None
        worker = start_worker(stack, instance, env=env)
        try:
            deadline = time.monotonic() + 300
            running = _running(stack, instance)
            # Five kills per export: a task that had its share runs on to its end, and
            # the kill goes to the next one.
            while running is None or killed[running] >= per_task:
                if _all_ended(stack, task_ids):
                    running = None
                    break
                assert time.monotonic() < deadline, f"no export to kill after {running}"
                time.sleep(0.05)
                running = _running(stack, instance)
            if running is not None:
                time.sleep(rng.uniform(0.5, 4.0))
                victim = _running(stack, instance)
        finally:
            worker.kill()
            worker.communicate(timeout=60)
        if running is None:
            break  # every export ended: the kills left would hit nothing
        if victim is not None:
            killed[victim] += 1
    healthy = start_worker(stack, "worker-last", env=env)
    try:
        details = [wait_state(client, task_id, timeout=600) for _f, _p, task_id in tasks]
    finally:
        healthy.send_signal(signal.SIGTERM)
        healthy.communicate(timeout=60)
    report = []
    for (fmt, params, task_id), detail in zip(tasks, details, strict=True):
        assert detail["state"] == "succeeded", detail
        expected = _expected(stack, sample_dir, params)
        data = download(client, detail)
        if fmt == "csv":
            keys = [int(r[0]) for r in read_csv(data)[1:]]
        else:
            keys, sheets = _xlsx_keys(data)
            assert sheets == 2  # 1,048,575 data rows per sheet
        assert keys == expected, f"{task_id}: {len(keys)} keys, {len(expected)} expected"
        served = probe.served(task_id)
        refetched = (served - len(expected)) / len(expected)
        report.append(
            f"{task_id} {fmt}: {len(keys):,} rows, killed {killed[task_id]} times, "
            f"attempts {detail['attempts']}, served {served:,} ({refetched:.1%} again)"
        )
        assert refetched <= REFETCH_LIMIT, report[-1]
    assert sum(killed.values()) >= KILLS - 2, killed  # nearly every kill hit an attempt
    print("\n".join(report))
