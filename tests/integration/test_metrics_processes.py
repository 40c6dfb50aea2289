"""Metrics from several processes: one API (``export-center serve``) and two workers
(``export-center worker --metrics-port``), each a subprocess on loopback sharing one
database and one data directory, each its own scrape target.

The counters summed over every target (what Prometheus sums) equal the exports run,
and the database gauges are the database's truth in every target, never a multiple
of it, both when the endpoints are read directly and through a real Prometheus.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from export_center import repository
from export_center.auth import issue_token
from export_center.db import db_now_plus, make_engine
from export_center.embedded import free_port
from export_center.models import ExportOutbox
from export_center.settings import load_or_create_secret
from export_center.states import OutboxStatus
from tests.conftest import sample_url
from tests.support.helpers import ORDERS_PERMISSION, create, wait_state
from tests.support.prometheus import Prometheus

ROOT = Path(__file__).resolve().parents[2]
O = ExportOutbox.__table__  # noqa: E741
WORKERS = ("worker-a", "worker-b")


@dataclass
class Process:
    """A started ``export-center`` command and the address of its metrics."""

    name: str
    popen: subprocess.Popen[bytes]
    metrics_url: str
    log: Path

    def target(self) -> str:
        return self.metrics_url.removeprefix("http://").removesuffix("/metrics")


def _env(data_dir: Path, db_url: str, **values: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EXPORT_CENTER_ENVIRONMENT": "test",
        "EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS": "true",
        "EXPORT_CENTER_DATA_DIR": str(data_dir),
        "EXPORT_CENTER_DATABASE_URL": db_url,
        # The reconciler stays off everywhere: the backed-off outbox rows of the test
        # must stay as the test left them.
        "EXPORT_CENTER_RECONCILER__ENABLED": "false",
    }
    env.update({f"EXPORT_CENTER_{k}": v for k, v in values.items()})
    return env


def _start(name: str, args: list[str], env: dict[str, str], metrics_url: str, logs: Path):
    log = logs / f"{name}.log"
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "export_center.cli", *args],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    process = Process(name, popen, metrics_url, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise AssertionError(f"{name} exited {popen.returncode}: {log.read_text()[-3000:]}")
        try:
            if httpx.get(metrics_url, timeout=5).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{name} did not serve {metrics_url}: {log.read_text()[-3000:]}")


@pytest.fixture
def processes(
    db_url: str, dialect: str, sample_dir: Path, tmp_path: Path
) -> Iterator[Callable[[str], Process]]:
    """Starts ``api`` (serve: API and sample providers, no loops) or a worker by name;
    stops them all with SIGTERM at teardown."""
    data_dir = tmp_path / "data"
    logs = tmp_path / "logs"
    logs.mkdir()
    started: list[Process] = []
    api_port = free_port()
    api_url = f"http://127.0.0.1:{api_port}"

    def start(name: str) -> Process:
        if name == "api":
            env = _env(
                data_dir,
                db_url,
                SAMPLE_DATABASE_URL=sample_url(dialect, sample_dir),
                LOAD_SAMPLE_DATA="false",
                PUBLISHER__ENABLED="false",
                CONSUMER__ENABLED="false",
                # Every create makes a task: no duplicate window, no active limits.
                LIMITS__DUPLICATE_WINDOW_SECONDS="0",
                LIMITS__MAX_ACTIVE_PER_USER="50",
                LIMITS__MAX_ACTIVE_PER_TYPE="50",
            )
            args, metrics_url = ["serve", "--port", str(api_port)], f"{api_url}/metrics"
        else:
            port = free_port()
            env = _env(
                data_dir,
                db_url,
                INSTANCE_ID=name,
                API__PUBLIC_BASE_URL=api_url,
                PUBLISHER__LOOP_SECONDS="0.1",
                # One row per publisher pass: the two workers take turns at new commands.
                PUBLISHER__BATCH_SIZE="1",
                CONSUMER__CONCURRENCY="1",
                TASK__PROGRESS_EVERY_SECONDS="0",
            )
            args = ["worker", "--metrics-port", str(port)]
            metrics_url = f"http://127.0.0.1:{port}/metrics"
        process = _start(name, args, env, metrics_url, logs)
        started.append(process)
        return process

    yield start
    for process in reversed(started):
        if process.popen.poll() is None:
            process.popen.send_signal(signal.SIGTERM)
    codes = {}
    for process in started:
        try:
            codes[process.name] = process.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.popen.kill()
            codes[process.name] = process.popen.wait(timeout=10)
    # SIGTERM is a clean stop for a worker, metrics server included. (serve ends by the
    # re-raised SIGTERM, as uvicorn does.)
    workers = {name: code for name, code in codes.items() if name != "api"}
    assert workers == dict.fromkeys(workers, 0), codes


def scrape(process: Process) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """One scrape of ``process``: value by (sample name, sorted labels)."""
    answer = httpx.get(process.metrics_url, timeout=10)
    assert answer.status_code == 200, answer.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


def total(samples: dict, name: str, **labels: str) -> float:
    """Sum of the samples named ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def new_export(client: httpx.Client) -> str:
    """Create an ORDERS CSV export; returns its task id (a new task every time)."""
    answer = create(client, "csv")
    assert answer.status_code == 202, answer.text
    return str(answer.json()["taskId"])


def gauge(samples: dict, name: str) -> float:
    return samples[(name, ())]


def test_counters_add_up_across_processes_and_database_gauges_are_not_multiplied(
    processes, db_url, tmp_path
):
    api = processes("api")
    engine = make_engine(db_url)
    secret = load_or_create_secret(tmp_path / "data" / "jwt-secret.txt")
    bearer = issue_token(secret, user="alice", tenant="t1", permissions=[ORDERS_PERMISSION])
    client = httpx.Client(
        base_url=api.metrics_url.removesuffix("/metrics"),
        headers={"authorization": f"Bearer {bearer}"},
        timeout=60,
    )
    try:
        # Two commands held by a publisher that is gone, after 3 failed sends, with a claim
        # lease of an hour: a backlog no worker takes (a publisher that starts releases
        # backed-off rows, not rows another publisher holds), so the gauges have non-zero
        # values to compare.
        backlog = [new_export(client) for _ in range(2)]
        with engine.begin() as conn:
            conn.execute(
                update(O).values(
                    status=OutboxStatus.CLAIMED.value,
                    lease_owner="publisher-gone",
                    lease_until=db_now_plus(3600),
                    attempt_count=3,
                )
            )
        workers = [processes(name) for name in WORKERS]

        # Rounds of 3 exports at once until both workers have run some (the first round
        # nearly always does it; the bound keeps a broken build from looping).
        ran: list[str] = []
        for _ in range(4):
            ids = [new_export(client) for _ in range(3)]
            for task_id in ids:
                assert wait_state(client, task_id, timeout=120)["state"] == "succeeded"
            ran += ids
            per_worker = [
                total(scrape(w), "export_task_completed_total", status="succeeded") for w in workers
            ]
            if all(per_worker):
                break
        assert all(per_worker), f"one worker ran every export: {per_worker}"

        with engine.connect() as conn:
            before = repository.queue_figures(conn)
        scrapes = {p.name: scrape(p) for p in (api, *workers)}
        with engine.connect() as conn:
            after = repository.queue_figures(conn)
    finally:
        client.close()
        engine.dispose()

    # Counters: the sum over the three targets is the exports run, once each.
    completed = {n: total(s, "export_task_completed_total") for n, s in scrapes.items()}
    succeeded = {
        n: total(s, "export_task_completed_total", status="succeeded") for n, s in scrapes.items()
    }
    assert sum(succeeded.values()) == len(ran), succeeded
    assert completed == succeeded  # no retry, failure or release
    assert succeeded["api"] == 0 and all(succeeded[w] >= 1 for w in WORKERS), succeeded
    created = {n: total(s, "export_task_created_total") for n, s in scrapes.items()}
    assert created == {"api": len(ran) + len(backlog), "worker-a": 0, "worker-b": 0}
    rows = sum(total(s, "export_rows_processed_total", type="ORDERS") for s in scrapes.values())
    assert rows == len(ran) * 15_000  # every export wrote all 15,000 sample orders

    # Database gauges: every target reports the database's figures, not a multiple.
    assert (before.outbox_pending, before.outbox_max_attempt) == (2, 3)
    for name, samples in scrapes.items():
        assert gauge(samples, "export_outbox_pending") == 2, name
        assert gauge(samples, "export_outbox_max_attempt") == 3, name
        age = gauge(samples, "export_task_queue_age_seconds")
        assert before.queue_age_seconds <= age <= after.queue_age_seconds + 1, (name, age)
        oldest = gauge(samples, "export_outbox_oldest_age_seconds")
        assert before.outbox_oldest_age_seconds <= oldest <= after.outbox_oldest_age_seconds + 1

    # What a real Prometheus scraping the three targets computes.
    with Prometheus(tmp_path / "prometheus", [p.target() for p in (api, *workers)]) as prom:
        prom.wait_for_targets()
        assert prom.value('sum(export_task_completed_total{status="succeeded"})') == len(ran)
        assert prom.value("sum(export_task_created_total)") == len(ran) + len(backlog)
        assert prom.value("count(export_outbox_pending)") == 3  # one series per target
        assert prom.value("max(export_outbox_pending)") == 2
        assert prom.value("max(export_outbox_max_attempt)") == 3


def test_a_worker_refuses_a_metrics_port_that_is_taken(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "export_center.cli", "worker", "--metrics-port", str(port)],
            env=_env(tmp_path / "data", f"sqlite:///{tmp_path / 'export-center.db'}"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 2, result.stderr
    assert f"cannot start: 127.0.0.1:{port} is not free" in result.stderr
    assert not (tmp_path / "export-center.db").exists()  # refused before any loop or migration
