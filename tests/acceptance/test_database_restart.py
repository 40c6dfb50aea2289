"""The cluster recipe (``deploy/cluster/run.sh``: 2 APIs, 3 workers, RocketMQ, S3Proxy)
on a private MariaDB server that is restarted twice while 10 exports run: stopped for
3 s, then for 20 s (the server's own stop and start add their seconds).

The right answer: every export ends SUCCEEDED with exactly the rows of the database, at
its first attempt (``attempt_count`` 1), on its first dispatch version (nobody handed it
back, nobody recovered a lease: none waited for its lease), and nothing is left in the
bucket but the ten files. Meanwhile the APIs answer 503 with a JSON code and
``Retry-After``, never a plain 500.

The server holds both the export center's tables and the TPC-H sample (as the recipe's
default does), so the sample providers lose their database too: they answer 503
``DB_TIMEOUT`` and the workers ask again (1, 4, 16, 30 s).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from export_center import repository
from export_center.db import make_engine
from export_center.embedded import free_port
from providers import tpch
from tests.acceptance.test_cluster import BUCKET, RUN, Cluster, check_file, download
from tests.integration.test_rocketmq_broker import rocketmq_endpoint
from tests.support.helpers import free_port_block
from tests.support.s3 import PrivateS3Proxy, s3_client, s3_keys

pytestmark = [
    pytest.mark.mariadb,
    pytest.mark.rocketmq,
    pytest.mark.s3,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
]

ROOT = Path(__file__).resolve().parents[2]
MARIADB = ROOT / "scripts" / "mariadb.sh"
SCALE = 0.27
EXPORTS = 10


class PrivateMariaDB:
    """A MariaDB server of this module only (``scripts/mariadb.sh`` with its own state
    directory and port), so that stopping it stops nobody else's tests."""

    def __init__(self) -> None:
        # Short: the socket path must fit in 107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="ec-mdb-", dir="/tmp"))
        self.port = free_port()
        self.env = {
            **os.environ,
            "EXPORT_CENTER_MARIADB_DIR": str(self.dir),
            "EXPORT_CENTER_MARIADB_PORT": str(self.port),
        }

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["bash", str(MARIADB), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()

    def url(self, database: str = "export_center") -> str:
        return self.run("url", database)


@pytest.fixture(scope="module")
def restart_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("restart")
    server = PrivateMariaDB()
    server.run("start")
    database_url = server.url()
    engine = make_engine(database_url, immediate=False)
    tpch.ensure_loaded(
        engine, SCALE, Path(os.environ.get("EXPORT_CENTER_TEST_SAMPLE_DIR", base / "tpch"))
    )
    engine.dispose()
    s3proxy = PrivateS3Proxy(base / "s3proxy")
    s3proxy.start()
    s3_client(s3proxy.url).create_bucket(Bucket=BUCKET)
    key, secret = s3_keys()
    apis = [free_port(), free_port()]
    metrics = [free_port(), free_port(), free_port()]
    api_metrics = [free_port_block(3), free_port_block(3)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "PYTHON": os.environ.get("PYTHON", "python"),
            "CLUSTER_DIR": str(base / "state"),
            "CLUSTER_START_SERVERS": "0",
            "CLUSTER_API_PORTS": " ".join(map(str, apis)),
            "CLUSTER_METRICS_PORTS": " ".join(map(str, metrics)),
            "CLUSTER_API_METRICS_PORTS": " ".join(map(str, api_metrics)),
            "CLUSTER_CONCURRENCY": "4",  # the ten exports run at once on three workers
            "EXPORT_CENTER_DATABASE_URL": database_url,
            "EXPORT_CENTER_SAMPLE_DATABASE_URL": database_url,
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
            "EXPORT_CENTER_ROCKETMQ__ENDPOINT": rocketmq_endpoint(),
            "EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL": s3proxy.url,
            "EXPORT_CENTER_STORAGE__S3__BUCKET": BUCKET,
            "EXPORT_CENTER_STORAGE__S3__PART_SIZE_MB": "5",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            # The production lease (300 s, renewed every 60 s): an attempt that rides
            # out the outage keeps it; a fast reconciler would show any lost one.
            "EXPORT_CENTER_RECONCILER__LOOP_SECONDS": "2",
            # Commands another process took from the shared test topic come back soon.
            "EXPORT_CENTER_RECONCILER__SENT_STALE_SECONDS": "20",
            "EXPORT_CENTER_PUBLISHER__LOOP_SECONDS": "0.2",
            "EXPORT_CENTER_LIMITS__MAX_ACTIVE_PER_USER": "20",
            "EXPORT_CENTER_LIMITS__MAX_ACTIVE_PER_TYPE": "20",
        }
    )
    made = Cluster(
        env=env,
        state=base / "state",
        apis=[f"http://127.0.0.1:{p}" for p in apis],
        metrics=[f"http://127.0.0.1:{p}/metrics" for p in metrics],
        api_metrics=[f"http://127.0.0.1:{p + k}/metrics" for p in api_metrics for k in range(3)],
        database_url=database_url,
        sample_url=database_url,
        s3proxy=s3proxy,
        jwt_secret="",
    )
    made.server = server  # type: ignore[attr-defined]
    try:
        made.run("up")
        secrets = dict(
            line.split("=", 1)
            for line in (base / "state" / "secrets.env").read_text().splitlines()
            if "=" in line
        )
        made.jwt_secret = secrets["EXPORT_CENTER_API__JWT_SECRET"]
        yield made
    finally:
        subprocess.run(["bash", str(RUN), "down"], env=env, capture_output=True, timeout=300)
        s3proxy.close()
        subprocess.run(["bash", str(MARIADB), "stop"], env=server.env, timeout=300, check=False)


class Probe:
    """Polls both APIs every 0.2 s (a detail read) and records every answer that is not a
    200, so that the outage's answers can be judged."""

    def __init__(self, clients: list[httpx.Client], task_id: str) -> None:
        self.clients = clients
        self.task_id = task_id
        self.refusals: list[tuple[int, str, str | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            for client in self.clients:
                try:
                    answer = client.get(f"/api/v1/exports/{self.task_id}", timeout=10)
                except httpx.HTTPError:
                    continue
                if answer.status_code != 200:
                    self.refusals.append(
                        (answer.status_code, answer.text[:200], answer.headers.get("retry-after"))
                    )
            self._stop.wait(0.2)


def _poll(client: httpx.Client, task_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    detail: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            answer = client.get(f"/api/v1/exports/{task_id}", timeout=10)
        except httpx.HTTPError:
            answer = None
        if answer is not None and answer.status_code == 200:
            detail = answer.json()
            if detail["state"] in ("succeeded", "failed", "cancelled"):
                return detail
        time.sleep(0.5)
    raise AssertionError(f"{task_id} did not end in {timeout} s: {detail}")


def _create_wave(cluster: Cluster, wave: int) -> list[tuple[str, str, httpx.Client]]:
    """Ten exports of one year each (three XLSX, seven CSV), from ten users on both APIs."""
    created = []
    for i in range(EXPORTS):
        client = cluster.client(i % 2, f"user{wave}-{i}")
        fmt = "xlsx" if i % 3 == 0 and i < 9 else "csv"
        answer = client.post(
            "/api/v1/exports",
            json={
                "exportType": "ORDERS",
                "format": fmt,
                "taskName": f"wave {wave} export {i}",
                "parameters": {"from": FIRST.isoformat(), "to": LAST.isoformat()},
            },
        )
        assert answer.status_code == 202, answer.text
        created.append((answer.json()["taskId"], fmt, client))
    return created


def _wait_running(cluster: Cluster, task_ids: list[str], at_least: int) -> None:
    engine = create_engine(cluster.database_url)
    names = ", ".join(f"'{t}'" for t in task_ids)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                running = conn.execute(
                    text(
                        "SELECT COUNT(*) FROM export_task WHERE status = 'RUNNING'"
                        f" AND processed_rows > 0 AND task_no IN ({names})"
                    )
                ).scalar_one()
            if running >= at_least:
                return
            time.sleep(0.1)
        raise AssertionError(f"fewer than {at_least} exports started")
    finally:
        engine.dispose()


FIRST, LAST = dt.date(1994, 1, 1), dt.date(1994, 12, 31)


def test_two_database_restarts_during_ten_exports_cost_no_attempt(restart_cluster: Cluster):
    cluster = restart_cluster
    server: PrivateMariaDB = cluster.server  # type: ignore[attr-defined]
    created: list[tuple[str, str, httpx.Client]] = []
    refusals: list[tuple[int, str, str | None]] = []
    for wave, seconds in enumerate((3, 20)):
        batch = _create_wave(cluster, wave)
        created.extend(batch)
        # Ten exports at once on three workers of four slots: wait until they all run.
        _wait_running(cluster, [t for t, _f, _c in batch], at_least=EXPORTS)
        owner = f"user{wave}-0"  # the first export's owner reads it on both APIs
        with Probe([cluster.client(0, owner), cluster.client(1, owner)], batch[0][0]) as probe:
            down = time.monotonic()
            server.run("stop")
            time.sleep(seconds)
            server.run("start")
            back = time.monotonic()
            time.sleep(3)
        refusals.extend(probe.refusals)
        for task_id, _fmt, client in batch:
            detail = _poll(client, task_id, timeout=600)
            assert detail["state"] == "succeeded", detail
        print(  # the figures of the run, with -s
            f"restart {wave + 1}: database away {back - down:.1f} s (stopped {seconds} s), "
            f"{len(probe.refusals)} refused reads, the wave ended "
            f"{time.monotonic() - back:.1f} s after the database was back"
        )
    # Every answer of the outages was a 503 with a code and Retry-After, none a plain 500.
    assert refusals, "the probe never met the outage"
    assert {status for status, _body, _retry in refusals} == {503}, refusals[:5]
    assert all(retry for _s, _b, retry in refusals), refusals[:5]
    check = make_engine(cluster.database_url)
    with check.connect() as conn:
        tasks = [repository.read_task_by_no(conn, task_id) for task_id, _f, _c in created]
        audit = [
            (t.task_no, e.action, e.outcome)
            for t in tasks
            if t is not None
            for e in repository.audit_entries(conn, task_id=t.id)
        ]
    check.dispose()
    for task in tasks:
        assert task is not None
        # First attempt, first dispatch version: nobody handed it back or recovered it.
        assert (task.attempt_count, task.dispatch_version, task.lease_recoveries) == (1, 1, 0), (
            task.task_no,
            task.failure_message,
        )
    assert not [a for a in audit if a[1] in ("lease_recovery", "hand_back")], audit
    files = [download(client, t, cluster.s3proxy.url).content for t, _f, client in created]
    with ProcessPoolExecutor(max_workers=2) as pool:
        counts = list(
            pool.map(
                check_file,
                [cluster.sample_url] * len(created),
                [fmt for _t, fmt, _c in created],
                files,
                [FIRST] * len(created),
                [LAST] * len(created),
            )
        )
    assert len(set(counts)) == 1 and counts[0] > 50_000, counts
    keys = [obj["Key"] for obj in cluster.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert len(keys) == len(created) and all(k.startswith("exports/") for k in keys), keys
    assert not cluster.s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
