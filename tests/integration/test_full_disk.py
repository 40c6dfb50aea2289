"""A full disk under the local file storage (a real tmpfs of a few MB).

* Full while the shard parts are joined into the file: ``STORAGE_ERROR`` naming the
  assembly and the full disk (not ``INTERNAL_ERROR`` with a traceback), no partial file
  left, the parts kept for a resume.
* Full while a shard stores its segment, and full while a single stream writes: the same
  code, and the automatic retry waits ``task.storage_full_backoff_seconds`` (a retry
  seconds later would meet the same full disk).
* The parts kept for a FAILED task yield when free space runs below
  ``storage.low_space_mb``: the reconciler deletes them (oldest first) and a new export
  fits again.

Needs root (``mount -t tmpfs``), as CI has; elsewhere the tests are skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from export_center import repository
from export_center.db import db_now
from export_center.registry_source import default_registry_path
from tests.support.helpers import create, download, read_csv, wait_state

CUSTOMERS_PERMISSION = "export:customers:create"
MB = 1 << 20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """``mount(size_kb)``: a tmpfs of that size at the first stack's ``files/``."""
    mounted: list[Path] = []

    def mount(size_kb: int) -> Path:
        files = tmp_path / "data0" / "files"
        files.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            if os.environ.get("CI"):
                pytest.fail("the full-disk tests need root to mount a tmpfs")
            pytest.skip("needs root to mount a tmpfs")
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(files)], check=True
        )
        mounted.append(files)
        return files

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _registry(tmp_path: Path, **orders: object) -> str:
    """The sample registry with ORDERS changed as given (e.g. ``max_attempts=1``)."""
    data = yaml.safe_load(default_registry_path().read_text())
    data["ORDERS"].update(orders)
    path = tmp_path / "types.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return str(path)


def _task(stack, task_id) -> repository.Task:
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
    assert task is not None
    return task


def _seconds_to_retry(stack, task: repository.Task) -> float:
    with stack.runtime.engine.connect() as conn:
        now: datetime = conn.execute(select(db_now())).scalar_one()
    return (task.next_retry_at - now).total_seconds()


def _first_failure(stack, task_id: str, timeout: float = 180) -> repository.Task:
    """The task once its first attempt failed (queued again or failed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = _task(stack, task_id)
        if task.failure_code is not None and task.status in ("PENDING", "FAILED"):
            return task
        time.sleep(0.05)
    raise AssertionError(f"{task_id} did not fail: {task}")


def _leftovers(files: Path) -> list[str]:
    return sorted(str(p.relative_to(files)) for p in files.rglob("*.part"))


def _parts_bytes(files: Path, task_id: str) -> int:
    return sum(p.stat().st_size for p in (files / "parts" / task_id).rglob("*") if p.is_file())


def test_full_while_the_parts_are_joined_is_a_storage_error(small_disk, make_stack, tmp_path):
    files = small_disk(3500)  # the parts of all orders fit (2.4 MB), the file beside them not
    stack = make_stack(export_types_file=_registry(tmp_path, max_attempts=1))
    client = stack.client()
    task_id = create(client, "csv", parameters={"from": "1992-01-01", "to": "1998-12-31"})
    detail = wait_state(client, task_id.json()["taskId"], timeout=180)
    assert detail["state"] == "failed", detail
    assert detail["error"]["code"] == "STORAGE_ERROR", detail["error"]
    message = detail["error"]["message"]
    assert message.startswith("store: assembling the file from "), message
    assert "no space left on the file storage" in message and "batch" not in message
    assert _leftovers(files) == []  # the partial file is gone
    assert _parts_bytes(files, detail["taskId"]) > 2 * MB  # kept for a resume


def test_full_while_a_shard_stores_waits_longer_to_retry(small_disk, make_stack):
    files = small_disk(1024)
    stack = make_stack()
    client = stack.client()
    task_id = create(client, "csv", parameters={"from": "1992-01-01", "to": "1998-12-31"}).json()[
        "taskId"
    ]
    task = _first_failure(stack, task_id)
    assert (task.status, task.failure_code) == ("PENDING", "STORAGE_ERROR"), task.failure_message
    assert task.failure_message.startswith("fetch: shard "), task.failure_message
    assert "no space left on the file storage" in task.failure_message
    # Not the test setting's 0.5 s: at least the first storage-full wait (600 s).
    assert _seconds_to_retry(stack, task) > 590
    assert task.attempt_count == 1
    assert _leftovers(files) == []


def test_full_while_a_single_stream_writes_waits_longer_to_retry(small_disk, make_stack):
    files = small_disk(128)  # the customers' file is about 300 KB
    stack = make_stack()
    client = stack.client(perms=[CUSTOMERS_PERMISSION])
    task_id = create(client, "csv", exportType="CUSTOMERS").json()["taskId"]
    task = _first_failure(stack, task_id)
    assert (task.status, task.failure_code) == ("PENDING", "STORAGE_ERROR"), task.failure_message
    assert "no space left on the file storage" in task.failure_message
    assert _seconds_to_retry(stack, task) > 590
    assert _leftovers(files) == [] and not list((files / "exports").rglob("*.csv"))


def test_parts_of_failed_tasks_yield_when_space_runs_low(small_disk, make_stack, tmp_path):
    files = small_disk(4096)
    stack = make_stack(
        export_types_file=_registry(tmp_path, max_attempts=1),
        storage={"low_space_mb": 2.5},
        reconciler={"enabled": False},  # its pass is run below, once
    )
    client = stack.client()
    first = create(client, "csv", parameters={"from": "1992-01-01", "to": "1992-12-31"})
    done = wait_state(client, first.json()["taskId"], timeout=180)
    assert done["state"] == "succeeded", done
    big = create(client, "csv", parameters={"from": "1993-01-01", "to": "1998-12-31"})
    failed = wait_state(client, big.json()["taskId"], timeout=180)
    assert failed["state"] == "failed" and failed["error"]["code"] == "STORAGE_ERROR", failed
    kept = _parts_bytes(files, failed["taskId"])
    assert kept > MB
    free = shutil.disk_usage(files).free
    assert free < 2.5 * MB, "the failed task's parts should have left the disk nearly full"
    reconciler = stack.runtime.reconciler
    reconciler.run_once()
    assert reconciler.last["part_yield"] > 0
    assert _parts_bytes(files, failed["taskId"]) == 0
    assert shutil.disk_usage(files).free >= free + kept - 64 * 1024
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, failed["taskId"])
        assert task is not None and repository.load_shards(conn, task.id) == []
    # A new export fits again; the finished file was never touched.
    small = create(client, "csv", parameters={"from": "1995-01-01", "to": "1995-02-28"})
    later = wait_state(client, small.json()["taskId"], timeout=180)
    assert later["state"] == "succeeded", later
    assert len(read_csv(download(client, later))) - 1 == later["total"]
    assert len(read_csv(download(client, done))) - 1 == done["total"]
    reconciler.run_once()  # enough room now: nothing else yields
    assert reconciler.last["part_yield"] == 0


def _gauges(client) -> dict[str, float]:
    """The export_storage_* samples of one ``GET /metrics``."""
    answer = client.get("/metrics")
    assert answer.status_code == 200
    return {
        name: float(value)
        for name, value in (
            line.split(" ", 1)
            for line in answer.text.splitlines()
            if line.startswith("export_storage_") and " " in line
        )
    }


def test_low_space_is_reported_by_metrics_readyz_and_doctor(small_disk, make_stack):
    # Below storage.low_space_mb the metric pair crosses (ExportStorageLowSpace), /readyz
    # says lowSpace (and stays 200: the API still serves) and doctor fails its storage
    # check naming the setting; with room again all three say so.
    from export_center.doctor import run_checks

    files = small_disk(4096)
    stack = make_stack(
        storage={"low_space_mb": 2.5}, task={"max_file_size_mb": 1}, reconciler={"enabled": False}
    )
    client = stack.client()

    def report() -> tuple[dict[str, float], dict, dict[str, object]]:
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.text
        storage = {c.name: c for c in run_checks(stack.settings)}["storage"]
        return _gauges(client), ready.json()["storage"], {"ok": storage.ok, "text": storage.message}

    gauges, ready, doctor = report()
    assert gauges["export_storage_low_space_bytes"] == 2.5 * MB
    assert gauges["export_storage_size_bytes"] == 4 * MB
    assert gauges["export_storage_free_bytes"] > 2.5 * MB
    assert ready["lowSpace"] is False and ready["freeBytes"] > 2.5 * MB
    assert doctor["ok"] is True, doctor

    filler = files / "filler.bin"
    filler.write_bytes(b"\0" * (2 * MB))
    gauges, ready, doctor = report()
    assert gauges["export_storage_free_bytes"] < gauges["export_storage_low_space_bytes"]
    assert ready["lowSpace"] is True and ready["freeBytes"] < 2.5 * MB
    assert ready["freeBytes"] == pytest.approx(gauges["export_storage_free_bytes"], abs=64 * 1024)
    assert doctor["ok"] is False
    assert "LOW_SPACE_MB" in str(doctor["text"]) and "2 MB free" in str(doctor["text"])

    filler.unlink()
    gauges, ready, doctor = report()
    assert gauges["export_storage_free_bytes"] > gauges["export_storage_low_space_bytes"]
    assert ready["lowSpace"] is False and doctor["ok"] is True
