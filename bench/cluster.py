"""Cluster throughput: 8 concurrent full ORDERS exports over 3 workers against one
export alone, on the cluster of ``deploy/cluster/run.sh``.

The cluster is the documented recipe: 2 API processes (the sample providers live
there), 3 ``export-center worker`` processes (3 exports at once each, so all 8 run
together), MariaDB, the RocketMQ broker (topic prefix ``bench-``, apart from the
tests' ``test-``) and S3 storage. Per round, first one full CSV export alone, then 8
full CSV exports created at once (alternately on both APIs, 8 users); the times come
from the database (``requested_at`` of the first create to ``completed_at`` of the
last export), so polling does not blur them. The fastest round of each kind is kept.

Where the time goes: the CPU-seconds each group of processes spent in each phase
(APIs with the providers, workers, MariaDB, the broker, S3Proxy) and the machine's
busy CPU-seconds, read from ``/proc``; ``coresBusy`` is the machine's busy time over
the phase's wall time.

Needs MariaDB (``bench.e2e.mariadb_url``), the broker (``scripts/rocketmq.sh``) and S3
(``bench.storage.s3_server``); otherwise the part is skipped with a note. Its own
database ``export_center_bench_cluster`` is recreated per run; the sample is the
MariaDB bench database's.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import bindparam, create_engine, text
from sqlalchemy.engine import make_url

from bench.e2e import ROOT, fastest, prepare_sample
from bench.procs import CpuMeter, free_block, peak_rss_mb, pids_matching, read_pid
from bench.storage import BUCKET, S3Server

__all__ = ["broker_endpoint", "run_cluster"]

RUN = ROOT / "deploy" / "cluster" / "run.sh"
TOPIC_PREFIX = "bench-"
CLUSTER_DATABASE = "export_center_bench_cluster"
WORKERS = ("worker-1", "worker-2", "worker-3")
APIS = ("api-1", "api-2")
PER_WORKER = 3
PERMISSIONS = ["export:orders:create"]


def broker_endpoint() -> tuple[str | None, str]:
    """The broker's endpoint with the bench topics made (``bench-`` prefix), or None
    and why not."""
    script = ROOT / "scripts" / "rocketmq.sh"
    status = subprocess.run(
        ["bash", str(script), "status"], capture_output=True, text=True, timeout=60, check=False
    )
    if status.returncode != 0:
        return None, "the scripts/rocketmq.sh broker is not running"
    # The broker is up: `start` only ensures the bench's topic and groups.
    made = subprocess.run(
        ["bash", str(script), "start"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "EXPORT_CENTER_TOPIC_PREFIX": TOPIC_PREFIX},
    )
    if made.returncode != 0:
        return None, f"creating the {TOPIC_PREFIX} topics failed: {made.stderr.strip()[-300:]}"
    endpoint = subprocess.run(
        ["bash", str(script), "endpoint"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    return endpoint, "scripts/rocketmq.sh"


def _fresh_database(sample_url: str) -> str:
    """Recreate the cluster's own database next to the sample; returns its URL."""
    base = make_url(sample_url)
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS `{CLUSTER_DATABASE}`"))
        conn.execute(text(f"CREATE DATABASE `{CLUSTER_DATABASE}` CHARACTER SET utf8mb4"))
    admin.dispose()
    return base.set(database=CLUSTER_DATABASE).render_as_string(hide_password=False)


def _empty_bucket(server: S3Server) -> None:
    """Delete the export files the cluster left in the bench bucket."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
    )
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="exports/")
    for page in pages:
        for item in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=item["Key"])


class _Cluster:
    """The running cluster of one bench run: creates exports and times them."""

    def __init__(self, state: Path, env: dict[str, str], apis: list[str], db_url: str) -> None:
        self.state, self.env, self.apis = state, env, apis
        self.engine = create_engine(db_url)
        self.jwt_secret = ""

    def run(self, *args: str) -> None:
        done = subprocess.run(
            ["bash", str(RUN), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"deploy/cluster/run.sh {' '.join(args)}: {done.stderr[-2000:]}")

    def pid(self, name: str) -> int | None:
        return read_pid(self.state / "pids" / f"{name}.pid")

    def create(self, api: int, user: str, parameters: dict[str, str]) -> str:
        from export_center.auth import issue_token

        if not self.jwt_secret:
            secrets = (self.state / "secrets.env").read_text().splitlines()
            values = dict(line.split("=", 1) for line in secrets if "=" in line)
            self.jwt_secret = values["EXPORT_CENTER_API__JWT_SECRET"]
        token = issue_token(self.jwt_secret, user=user, tenant="bench", permissions=PERMISSIONS)
        answer = httpx.post(
            f"{self.apis[api]}/api/v1/exports",
            headers={"authorization": f"Bearer {token}"},
            json={
                "exportType": "ORDERS",
                "format": "csv",
                "taskName": user,
                "parameters": parameters,
            },
            timeout=60,
        )
        answer.raise_for_status()
        task_id: str = answer.json()["taskId"]
        return task_id

    def wait(self, task_ids: list[str], timeout: float = 1800) -> list[dict[str, Any]]:
        """Poll the database until every task ended; their rows (all SUCCEEDED)."""
        query = text(
            "SELECT task_no, status, processed_rows, failure_message, requested_at,"
            " started_at, completed_at FROM export_task WHERE task_no IN :ids"
        ).bindparams(bindparam("ids", expanding=True))
        deadline = time.monotonic() + timeout
        while True:
            with self.engine.connect() as conn:
                rows = [dict(r._mapping) for r in conn.execute(query, {"ids": task_ids})]
            if all(r["status"] in ("SUCCEEDED", "FAILED", "CANCELLED") for r in rows):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"exports not done in {timeout} s: {rows}")
            time.sleep(0.5)
        failed = [r for r in rows if r["status"] != "SUCCEEDED"]
        if failed:
            raise RuntimeError(f"exports did not succeed: {failed}")
        return rows


def _phase(
    cluster: _Cluster, groups: dict[str, list[int]], exports: int, users: str
) -> dict[str, Any]:
    """Create ``exports`` full CSV exports at once; time them and meter the CPU."""
    meter = CpuMeter(groups)
    load = os.getloadavg()[0]
    meter.start()
    ids = [cluster.create(n % 2, f"{users}{n}", {}) for n in range(exports)]
    rows = cluster.wait(ids)
    cpu = meter.stop()
    first = min(r["requested_at"] for r in rows)
    last = max(r["completed_at"] for r in rows)
    seconds = (last - first).total_seconds()
    total = sum(int(r["processed_rows"]) for r in rows)
    each = [(r["completed_at"] - r["requested_at"]).total_seconds() for r in rows]
    return {
        "exports": exports,
        "rows": total,
        "seconds": round(seconds, 3),
        "rowsPerSecond": round(total / seconds, 1),
        "exportSeconds": sorted(round(s, 2) for s in each),
        "cpuSeconds": cpu,
        "coresBusy": round(cpu["machine"] / seconds, 2) if cpu.get("machine") else None,
        "loadAverage": round(load, 2),
    }


def run_cluster(
    *,
    data_dir: Path,
    sample_url: str,
    broker: str,
    server: S3Server,
    scale: float,
    concurrent: int = 8,
    repeat: int = 1,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Start the cluster, time one export alone and ``concurrent`` at once, stop it.

    Args:
        data_dir: the bench data directory (the cluster's state goes to ``cluster/``).
        sample_url: the MariaDB bench database (its sample is loaded here first).
        broker: the broker's endpoint (:func:`broker_endpoint`).
        server: the S3 server (``bench.storage.s3_server``).
        scale: TPC-H scale factor (0.27: 405,000 orders per export).
        concurrent: exports of the second phase.
        repeat: rounds; each phase keeps its fastest round.

    Returns:
        ``{"single": phase, "concurrent": phase, "ratio": aggregate rows/s over the
        single export's rows/s, "peakRssMb": {process: MiB}, "perWorker": exports at once
        per worker}``; a phase has ``exports``, ``rows``, ``seconds`` (first create to
        last completion), ``rowsPerSecond``, ``exportSeconds`` (each export's create to
        completion), ``cpuSeconds`` (per group and ``machine``), ``coresBusy``,
        ``loadAverage`` and ``runs`` (seconds of every round).
    """
    prepare_sample(
        data_dir=data_dir, database="mariadb", database_url=sample_url, scale=scale, say=say
    )
    from export_center.embedded import free_port

    api_ports = [free_port(), free_port()]
    metrics_ports = [free_port() for _ in WORKERS]
    api_metrics = [free_block(3), free_block(3)]
    state = data_dir / "cluster"
    db_url = _fresh_database(sample_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "PYTHON": os.environ.get("PYTHON", "python"),
            "CLUSTER_DIR": str(state),
            "CLUSTER_START_SERVERS": "0",
            "CLUSTER_API_PORTS": " ".join(map(str, api_ports)),
            "CLUSTER_METRICS_PORTS": " ".join(map(str, metrics_ports)),
            "CLUSTER_API_METRICS_PORTS": " ".join(map(str, api_metrics)),
            "CLUSTER_CONCURRENCY": str(PER_WORKER),
            "EXPORT_CENTER_DATABASE_URL": db_url,
            "EXPORT_CENTER_SAMPLE_DATABASE_URL": sample_url,
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
            "EXPORT_CENTER_ROCKETMQ__ENDPOINT": broker,
            "EXPORT_CENTER_TOPIC_PREFIX": TOPIC_PREFIX,
            "EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL": server.endpoint,
            "EXPORT_CENTER_STORAGE__S3__BUCKET": BUCKET,
            **server.env,
        }
    )
    cluster = _Cluster(state, env, [f"http://127.0.0.1:{p}" for p in api_ports], db_url)
    runs: dict[str, list[dict[str, Any]]] = {"single": [], "concurrent": []}
    try:
        cluster.run("up")
        own = {name: cluster.pid(name) for name in (*APIS, *WORKERS)}
        groups = {
            "apis": [p for n, p in own.items() if p and n.startswith("api")],
            "workers": [p for n, p in own.items() if p and n.startswith("worker")],
            "mariadb": pids_matching("mariadbd"),
            "rocketmq": pids_matching("java", "rocketmq"),
            "s3proxy": list(server.pids),
        }
        # Warm-up: every process answers, connects and fills its pools once.
        cluster.wait(
            [
                cluster.create(n % 2, f"warm{n}", {"from": "1995-01-01", "to": "1995-01-31"})
                for n in range(2 * len(WORKERS))
            ]
        )
        for round_no in range(max(1, repeat)):
            for kind, exports in (("single", 1), ("concurrent", concurrent)):
                result = _phase(cluster, groups, exports, f"r{round_no}{kind[0]}")
                runs[kind].append(result)
                _empty_bucket(server)
                say(
                    f"  cluster {kind:10s} {exports} x CSV {result['rows']:>10,} rows "
                    f"{result['seconds']:7.2f} s {result['rowsPerSecond']:>9,.0f} rows/s  "
                    f"{result['coresBusy']} cores busy  (load {result['loadAverage']:.2f})"
                )
        peaks = {name: peak_rss_mb(pid) for name, pid in own.items() if pid}
    finally:
        try:
            cluster.run("down")
        finally:
            cluster.engine.dispose()
            _empty_bucket(server)
            admin = create_engine(make_url(sample_url))
            with admin.begin() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{CLUSTER_DATABASE}`"))
            admin.dispose()
    out: dict[str, Any] = {"perWorker": PER_WORKER, "workers": len(WORKERS), "peakRssMb": peaks}
    for kind, done in runs.items():
        out[kind] = fastest(done)
    out["ratio"] = round(out["concurrent"]["rowsPerSecond"] / out["single"]["rowsPerSecond"], 3)
    return out
