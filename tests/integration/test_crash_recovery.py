"""Crashes and clocks: a worker process killed with SIGKILL at five points, a worker
whose process clock runs 5 minutes ahead, and cancelling an export of all 405,000 orders.

The API and the sample provider run in the test process; workers are separate
processes (``python -m tests.support.fault_worker``) sharing the database and the file store.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select, update

from export_center import repository
from export_center.db import db_now_plus
from export_center.models import ExportOutbox, ExportTask
from export_center.reconciler import Reconciler
from export_center.settings import ReconcilerSettings
from tests.conftest import SAMPLE_SCALE
from tests.support.helpers import create, download, read_csv, wait_state

ROOT = Path(__file__).resolve().parents[2]
ORDERS = int(SAMPLE_SCALE * 1_500_000)
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
T, O = ExportTask.__table__, ExportOutbox.__table__  # noqa: E741


def worker_env(stack, instance: str) -> dict[str, str]:
    s = stack.settings
    return {
        **os.environ,
        "EXPORT_CENTER_ENVIRONMENT": "test",
        "EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS": "true",
        "EXPORT_CENTER_DATA_DIR": str(s.data_dir),
        "EXPORT_CENTER_DATABASE_URL": s.resolved_database_url,
        "EXPORT_CENTER_API__PUBLIC_BASE_URL": stack.url,
        "EXPORT_CENTER_INSTANCE_ID": instance,
        "EXPORT_CENTER_PUBLISHER__LOOP_SECONDS": "0.1",
        "EXPORT_CENTER_CONSUMER__CONCURRENCY": "1",
        "EXPORT_CENTER_TASK__LEASE_SECONDS": "3",
        "EXPORT_CENTER_TASK__HEARTBEAT_SECONDS": "0.5",
        "EXPORT_CENTER_TASK__PROGRESS_EVERY_SECONDS": "0",
        "EXPORT_CENTER_RECONCILER__LOOP_SECONDS": "0.5",
        "EXPORT_CENTER_RECONCILER__REDISPATCH_GRACE_SECONDS": "0",
        "EXPORT_CENTER_RECONCILER__SENT_STALE_SECONDS": "5",
        "EXPORT_CENTER_RECONCILER__ORPHAN_AGE_SECONDS": "86400",
        "PYTHONPATH": str(ROOT),
    }


def start_worker(
    stack,
    instance: str,
    *fault: str,
    prefix: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    return subprocess.Popen(
        [*(prefix or []), sys.executable, "-m", "tests.support.fault_worker", *fault],
        env={**worker_env(stack, instance), **(env or {})},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def api_only(make_stack):
    """API and sample provider only: no loops run in the test process."""
    return make_stack(
        publisher={"enabled": False}, consumer={"enabled": False}, reconciler={"enabled": False}
    )


@pytest.mark.parametrize(
    ("point", "nth"),
    [("fetch", 3), ("render", 3), ("store", 1), ("before_commit", 1), ("after_commit", 1)],
)
def test_sigkill_mid_export_ends_with_one_exact_file(api_only, point, nth):
    stack = api_only
    client = stack.client()
    task_id = create(client, "csv").json()["taskId"]
    crashing = start_worker(stack, "worker-1", point, str(nth))
    try:
        assert crashing.wait(timeout=120) == -signal.SIGKILL, crashing.stdout.read()
    finally:
        if crashing.poll() is None:
            crashing.kill()
    with stack.runtime.engine.connect() as conn:
        after_crash = repository.read_task_by_no(conn, task_id)
    if point == "after_commit":
        assert after_crash.status == "SUCCEEDED"
    else:
        assert after_crash.status == "RUNNING" and after_crash.dispatch_version == 1
    healthy = start_worker(stack, "worker-2")
    try:
        detail = wait_state(client, task_id, timeout=120)
    finally:
        healthy.send_signal(signal.SIGTERM)
        healthy.wait(timeout=60)
    assert detail["state"] == "succeeded", detail
    ids = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert len(ids) == ORDERS and len(set(ids)) == ORDERS and ids == sorted(ids)
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
    expected_version = 1 if point == "after_commit" else 2
    assert task.dispatch_version == expected_version and task.row_count == ORDERS
    storage = stack.runtime.storage
    # The dead attempt's partial file went when its lease was recovered, not after the
    # 24-hour orphan age: only the committed file is stored.
    assert [o.key for o in storage.list()] == [task.object_key]
    settings = ReconcilerSettings(orphan_age_seconds=0)
    Reconciler(
        stack.runtime.engine, storage, settings, topic=stack.settings.command_topic
    ).run_once()
    assert [o.key for o in storage.list()] == [task.object_key]


def test_a_worker_with_a_clock_5_minutes_ahead_claims_nothing_early(api_only):
    stack = api_only
    # MariaDB: the worker runs under faketime, so everything in that process (Python and C)
    # sees a clock 5 minutes ahead. SQLite evaluates CURRENT_TIMESTAMP inside the calling
    # process, so faketime would skew the embedded database's clock too (one host, one
    # clock): there the worker's Python clock alone is moved ahead.
    prefix: list[str] = []
    extra_env = {}
    if stack.settings.resolved_database_url.startswith("sqlite"):
        extra_env["EXPORT_CENTER_TEST_CLOCK_SKEW"] = "300"
    else:
        if not FAKETIME_LIB.exists():
            if os.environ.get("CI"):
                pytest.fail("libfaketime is required in CI (scripts/test.sh installs faketime)")
            pytest.skip("libfaketime is not installed")
        # LD_PRELOAD straight on the worker (the faketime binary forks, so killing it
        # would leave the worker running).
        extra_env.update(
            {
                "LD_PRELOAD": str(FAKETIME_LIB),
                "FAKETIME": "+5m",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            }
        )
    engine = stack.runtime.engine
    client = stack.client()
    held = create(client, "csv", parameters={"from": "1995-01-01"}).json()["taskId"]
    backoff = create(client, "csv", parameters={"from": "1995-02-01"}).json()["taskId"]
    with engine.begin() as conn:
        a = repository.read_task_by_no(conn, held)
        b = repository.read_task_by_no(conn, backoff)
        # A runs elsewhere with a lease that is live by the database clock for 120 s more.
        conn.execute(
            update(T)
            .where(T.c.id == a.id)
            .values(
                status="RUNNING",
                lease_owner="holder/1",
                lease_until=db_now_plus(120),
                execution_deadline_at=db_now_plus(1800),
                attempt_count=1,
                phase="fetch",
            )
        )
        # B waits in backoff for 120 s more; its command arrives early anyway.
        conn.execute(update(T).where(T.c.id == b.id).values(next_retry_at=db_now_plus(120)))
    with engine.connect() as conn:
        before = {
            t: dataclasses.asdict(repository.read_task_by_no(conn, t)) for t in (held, backoff)
        }
    skewed = start_worker(stack, "skewed", prefix=prefix, env=extra_env)
    ready = skewed.stdout.readline()
    assert "worker ready" in ready, ready + skewed.stdout.read()
    skew = float(ready.split("clock ")[1]) - time.time()
    assert 290 <= skew <= 310, ready
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                sent = (
                    conn.execute(select(O.c.status).where(O.c.task_id.in_([a.id, b.id])))
                    .scalars()
                    .all()
                )
            if sent == ["SENT", "SENT"]:
                break
            time.sleep(0.2)
        time.sleep(3)  # consumer and several reconciler passes run with the skewed clock
    finally:
        skewed.kill()
        output = skewed.communicate(timeout=60)[0]
    for task_id in (held, backoff):
        with engine.connect() as conn:
            now = dataclasses.asdict(repository.read_task_by_no(conn, task_id))
        for column in (
            "status",
            "dispatch_version",
            "attempt_count",
            "lease_owner",
            "lease_until",
            "next_retry_at",
        ):
            assert now[column] == before[task_id][column], (task_id, column)
    logs = []
    for path in (Path(stack.settings.data_dir) / "logs").glob("worker-*.log"):
        logs += [json.loads(line) for line in path.read_text().splitlines()]
    branches = {entry.get("taskId"): entry.get("branch") for entry in logs if entry.get("branch")}
    assert branches == {held: "running_live_lease", backoff: "pending_backoff"}, output


@pytest.mark.slow
def test_cancel_an_export_of_all_405000_orders(make_stack):
    stack = make_stack(scale=0.27, task={"heartbeat_seconds": 5})
    client = stack.client()
    requests: list[float] = []

    original = stack.runtime.provider_client._post

    def counting_post(*args, **kwargs):  # noqa: ANN002, ANN003
        requests.append(time.monotonic())
        return original(*args, **kwargs)

    stack.runtime.provider_client._post = counting_post  # type: ignore[method-assign]
    task_id = create(client, "xlsx").json()["taskId"]
    detail = wait_state(client, task_id, {"running"})
    while detail["processed"] < 20_000:
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        time.sleep(0.05)
    assert detail["total"] == 405_000
    asked = time.monotonic()
    client.post(f"/api/v1/exports/{task_id}/cancel")
    detail = wait_state(client, task_id, {"cancelled", "succeeded", "failed"}, timeout=15)
    stopped = time.monotonic()
    assert detail["state"] == "cancelled" and stopped - asked < 10, detail
    assert detail["processed"] < 405_000
    time.sleep(1)
    assert [t for t in requests if t > stopped] == []
    assert list(stack.runtime.storage.list()) == []


def test_graceful_shutdown_hands_the_attempt_back_without_using_a_retry(make_stack):
    first = make_stack(scale=0.27)
    client = first.client()
    task_id = create(client, "csv").json()["taskId"]
    detail = wait_state(client, task_id, {"running"})
    while detail["processed"] < 20_000:
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        time.sleep(0.05)
    first.stop()  # SIGTERM path: begin_shutdown, then uvicorn stops
    with first.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
    assert task.status == "PENDING" and task.attempt_count == 0 and task.dispatch_version == 2
    assert task.failure_message is None
    assert list(first.runtime.storage.list()) == []
