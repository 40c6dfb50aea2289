"""A worker frozen past its lease (SIGSTOP, then SIGCONT) writes nothing more.

The worker (``python -m tests.support.fault_worker``, lease 3 s) runs a sharded export of all
orders; it is stopped mid-shard for 8 s, during which the test process's reconciler
recovers the lease (dispatch version 2). After SIGCONT, the stale attempt (version 1)
stores no segment and no file: every ``.v1`` segment is older than the SIGCONT. Its
log says the worker did not run, not that the provider was slow, and the export ends
exact on version 2.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from export_center import repository
from export_center.db import reading
from tests.conftest import SAMPLE_SCALE
from tests.integration.test_crash_recovery import start_worker
from tests.support.helpers import create, download, read_csv, wait_state

ORDERS = int(SAMPLE_SCALE * 1_500_000)


def _slow_provider(app):
    """The app with every provider answer 0.1 s late: the export lasts long enough to
    be frozen in the middle, and the worker waits on HTTP more than it holds locks."""

    async def slowed(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/internal/"):
            await asyncio.sleep(0.1)
        await app(scope, receive, send)

    return slowed


@pytest.fixture
def reconciling(make_stack):
    """API, sample provider and a fast reconciler; the exports run in worker processes."""
    return make_stack(
        wrap=_slow_provider,
        publisher={"enabled": False},
        consumer={"enabled": False},
        reconciler={"loop_seconds": 0.5, "redispatch_grace_seconds": 0},
        task={"lease_seconds": 3, "heartbeat_seconds": 0.5},
    )


class _NewSegments:
    """Watches a task's part folder for ``.v1`` segments written after ``since``."""

    def __init__(self, root: Path, since: float) -> None:
        self.root = root
        self.since = since
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> _NewSegments:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for dirpath, _dirs, files in os.walk(self.root):
                for name in files:
                    if ".v1" not in name:
                        continue
                    path = os.path.join(dirpath, name)
                    try:
                        mtime = os.stat(path).st_mtime
                    except FileNotFoundError:
                        continue
                    if mtime >= self.since:
                        self.seen[path] = mtime
            self._stop.wait(0.005)


def _freeze_until_recovered(stack, worker, task_id) -> float:
    """SIGSTOP the worker until the reconciler has taken its lease back; returns when it
    was stopped (monotonic). A worker frozen inside a transaction holds its locks, so
    nobody can recover the task until it wakes: then it is woken and frozen again."""
    # A lease recovery, not any new dispatch version: a worker woken below may hand its
    # task back by itself (it saw its own pause), which is not what this test is about.
    recovered = _task(stack, task_id).lease_recoveries
    for _ in range(5):
        worker.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        while time.monotonic() - stopped_at < 15:
            if _task(stack, task_id).lease_recoveries > recovered:
                return stopped_at
            time.sleep(0.05)
        worker.send_signal(signal.SIGCONT)  # frozen holding a lock: try another moment
        time.sleep(0.3)
        # Woken past its lease, the worker may hand its task back (PENDING) and claim it
        # again; only an ended export stops the test.
        status = _task(stack, task_id).status
        assert status in ("PENDING", "RUNNING"), f"the export ended meanwhile: {status}"
    raise AssertionError("the lease was never recovered while the worker was frozen")


def _task(stack, task_id):
    # A read-only connection: on SQLite a worker frozen inside a write transaction holds
    # the write lock, and a BEGIN IMMEDIATE here would wait for it.
    with reading(stack.runtime.engine) as conn:
        return repository.read_task_by_no(conn, task_id)


def test_a_worker_frozen_past_its_lease_stores_nothing_after_it_wakes(reconciling):
    stack = reconciling
    client = stack.client()
    task_id = create(client, "csv", parameters={"from": "1992-01-01", "to": "1998-12-31"}).json()[
        "taskId"
    ]
    worker = start_worker(stack, "worker-1", env={"EXPORT_CENTER_PUBLISHER__LOOP_SECONDS": "0.1"})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            task = _task(stack, task_id)
            started = task.status == "RUNNING" and task.processed_rows > 0
            if started and (task.shards_done or 0) < 12:
                break
            assert task.status in ("PENDING", "RUNNING"), task.status
            time.sleep(0.02)
        else:
            raise AssertionError("the export did not start")
        stopped_at = _freeze_until_recovered(stack, worker, task_id)
        time.sleep(max(0.0, 8.0 - (time.monotonic() - stopped_at)))
        parts = stack.settings.files_dir / "parts" / task_id
        woke = time.time()
        with _NewSegments(parts, woke) as watch:
            worker.send_signal(signal.SIGCONT)
            detail = wait_state(client, task_id, timeout=180)
        assert detail["state"] == "succeeded", detail
        assert watch.seen == {}, f"the stale attempt stored {sorted(watch.seen)}"
        keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
        assert len(keys) == ORDERS and len(set(keys)) == ORDERS
        task = _task(stack, task_id)
        with stack.runtime.engine.connect() as conn:
            audit = [e.action for e in repository.audit_entries(conn, task_id=task.id)]
        # Every new dispatch version came from a lease recovery or a hand-back (under a
        # heavy load the next attempt may lose its 3 s lease too), and none of them is
        # one of the task's attempts.
        assert task.lease_recoveries >= 1 and audit.count("lease_recovery") == task.lease_recoveries
        assert task.dispatch_version == 1 + task.lease_recoveries + audit.count("hand_back"), audit
        assert task.attempt_count == 1
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGCONT)
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
    (log,) = (stack.settings.data_dir / "logs").glob("worker-*.log")
    text = log.read_text()
    assert "this worker did not run for" in text, text[-3000:]
    blamed = [
        line
        for line in text.splitlines()
        if "provider answer took longer" in line and '"ERROR"' in line
    ]
    assert blamed == [], blamed


_MONITORED = """
import logging, sys, time
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
from export_center.attempt.pauses import PauseMonitor
monitor = PauseMonitor(tick_seconds=0.05, threshold=0.5)
print("ready", flush=True)
sys.stdin.readline()  # the test stops and continues this process meanwhile
time.sleep(0.3)
print("paused", round(monitor.paused_within(10), 1), flush=True)
"""


def test_the_pause_monitor_tells_a_stopped_process_from_a_slow_call():
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", _MONITORED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # a quiet process: no pause
        child.send_signal(signal.SIGSTOP)
        time.sleep(2.0)
        child.send_signal(signal.SIGCONT)
        child.stdin.write("go\n")
        child.stdin.flush()
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    lines = out.strip().splitlines()
    assert any(re.match(r"this worker did not run for [234] s ", line) for line in lines), lines
    (measured,) = [float(line.split()[1]) for line in lines if line.startswith("paused")]
    assert 1.5 <= measured <= 4.0, lines
