"""Distributed shards on the cluster recipe: one big export on 1 and on 3 workers, and
kill -9 of a worker holding shards at random moments.

The cluster is ``deploy/cluster/run.sh`` (2 APIs of ``serve --workers 2`` with the
sample providers, MariaDB, the RocketMQ broker with the ``bench-`` topics, S3), with
sharded exports distributed (``task.distributed_shards``) and ``CLUSTER_WORKERS`` set to
each count in turn, each worker running 2 exports or shards at once:

* **Speed-up.** All orders of every order date (16 day shards, ORDERS ``parallel`` 4)
  in one export (``--distributed-format``, XLSX by default) with 1 and with 3 workers:
  seconds from create to commit (database times), the ratio, the core ceiling of this
  machine (``os.cpu_count()``: one shard is one interpreter's work; the model is in
  ``docs/cluster.md``) and whether the two files are the same bytes (XLSX: every ZIP
  member but ``docProps/``, which names the task).
* **kill -9.** With 3 workers and short leases (10 s, task and shard),
  ``--distributed-kills`` exports of every order (CSV, the ``e2e`` sample); each is
  killed once: after a random delay (0.5 s to 80 % of the unkilled export's time) one
  of the workers holding a live shard lease gets SIGKILL and is started again by
  ``run.sh up``. Every file must hold every order key of the database exactly once;
  the rows fetched again are the rows the providers answered
  (``export_sample_provider_rows_served_total`` of the API processes)
  less the rows of the file.

Needs MariaDB, the broker and S3 (as ``bench.cluster``); otherwise skipped with a note.
Its own database ``export_center_bench_distributed`` is recreated per cluster start.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import random
import signal
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench.cluster import TOPIC_PREFIX, _Cluster
from bench.e2e import ROOT, prepare_sample
from bench.procs import free_block
from bench.storage import BUCKET, S3Server

__all__ = ["distributed_goals", "run_distributed"]

DATABASE = "export_center_bench_distributed"
ALL_DATES = {"from": "1992-01-01", "to": "1998-12-31"}


class _Run:
    """One start of the cluster with ``workers`` workers (its own database)."""

    def __init__(
        self,
        *,
        data_dir: Path,
        sample_url: str,
        broker: str,
        server: S3Server,
        workers: int,
        extra: dict[str, str],
    ) -> None:
        from export_center.embedded import free_port

        self.server = server
        self.workers = workers
        self.sample_url = sample_url
        base = make_url(sample_url)
        admin = create_engine(base)
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{DATABASE}`"))
            conn.execute(text(f"CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4"))
        admin.dispose()
        db_url = base.set(database=DATABASE).render_as_string(hide_password=False)
        api_ports = [free_port(), free_port()]
        self.api_metrics = [free_block(3), free_block(3)]
        self.metrics = [free_port() for _ in range(workers)]
        state = data_dir / "distributed"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
                ),
                "PYTHON": os.environ.get("PYTHON", "python"),
                "CLUSTER_DIR": str(state),
                "CLUSTER_START_SERVERS": "0",
                "CLUSTER_WORKERS": str(workers),
                "CLUSTER_CONCURRENCY": "2",
                "CLUSTER_API_PORTS": " ".join(map(str, api_ports)),
                "CLUSTER_METRICS_PORTS": " ".join(map(str, self.metrics)),
                "CLUSTER_API_METRICS_PORTS": " ".join(map(str, self.api_metrics)),
                "CLUSTER_DISTRIBUTED_SHARDS": "true",
                "EXPORT_CENTER_DATABASE_URL": db_url,
                "EXPORT_CENTER_SAMPLE_DATABASE_URL": sample_url,
                "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
                "EXPORT_CENTER_ROCKETMQ__ENDPOINT": broker,
                "EXPORT_CENTER_TOPIC_PREFIX": TOPIC_PREFIX,
                "EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL": server.endpoint,
                "EXPORT_CENTER_STORAGE__S3__BUCKET": BUCKET,
                "EXPORT_CENTER_TASK__MAX_FILE_SIZE_MB": "4096",
                "EXPORT_CENTER_TASK__MAX_DURATION_MINUTES": "240",
                "EXPORT_CENTER_PROVIDER__BATCH_TIMEOUT_SECONDS": "600",
                "EXPORT_CENTER_PROVIDER__READ_TIMEOUT_SECONDS": "600",
                **server.env,
                **extra,
            }
        )
        self.cluster = _Cluster(state, env, [f"http://127.0.0.1:{p}" for p in api_ports], db_url)

    def __enter__(self) -> _Run:
        self.cluster.run("up")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.cluster.run("down")
        finally:
            self.cluster.engine.dispose()
            admin = create_engine(make_url(self.sample_url))
            with admin.begin() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{DATABASE}`"))
            admin.dispose()

    def export(self, fmt: str, user: str) -> dict[str, Any]:
        """One export of every order date; its task row once it ended."""
        task_id = self.create(fmt, user)
        (row,) = self.cluster.wait([task_id], timeout=4 * 3600)
        return row

    def create(self, fmt: str, user: str) -> str:
        cluster = self.cluster
        from export_center.auth import issue_token

        if not cluster.jwt_secret:
            secrets = (cluster.state / "secrets.env").read_text().splitlines()
            values = dict(line.split("=", 1) for line in secrets if "=" in line)
            cluster.jwt_secret = values["EXPORT_CENTER_API__JWT_SECRET"]
        token = issue_token(
            cluster.jwt_secret, user=user, tenant="bench", permissions=["export:orders:create"]
        )
        answer = httpx.post(
            f"{cluster.apis[0]}/api/v1/exports",
            headers={"authorization": f"Bearer {token}"},
            json={"exportType": "ORDERS", "format": fmt, "taskName": user, "parameters": ALL_DATES},
            timeout=60,
        )
        answer.raise_for_status()
        task_id: str = answer.json()["taskId"]
        return task_id

    def file(self, task_no: str) -> bytes:
        """The stored file of a succeeded task, read from the bucket."""
        import boto3

        with self.cluster.engine.connect() as conn:
            key = conn.execute(
                text("SELECT object_key FROM export_task WHERE task_no = :t"), {"t": task_no}
            ).scalar_one()
        s3 = boto3.client(
            "s3",
            endpoint_url=self.server.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.server.access_key,
            aws_secret_access_key=self.server.secret_key,
        )
        body: bytes = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        s3.delete_object(Bucket=BUCKET, Key=key)
        return body

    def rows_served(self) -> float:
        """Rows the API processes' providers answered so far (every API process)."""
        served = 0.0
        for first in self.api_metrics:
            for port in (first + 1, first + 2):
                answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
                for family in text_string_to_metric_families(answer.text):
                    if family.name == "export_sample_provider_rows_served":
                        served += sum(s.value for s in family.samples if s.name.endswith("_total"))
        return served

    def shard_holders(self) -> list[str]:
        """Instance ids of the workers holding a live shard lease now."""
        with self.cluster.engine.connect() as conn:
            owners = conn.execute(
                text(
                    "SELECT lease_owner FROM export_shard WHERE status = 'PENDING' "
                    "AND lease_until > CURRENT_TIMESTAMP(3) AND lease_owner IS NOT NULL"
                )
            ).scalars()
            return sorted({o.split("/")[0] for o in owners})


def _digest(data: bytes, fmt: str) -> str:
    """SHA-256 of the file; of an XLSX, of its members but ``docProps/`` (the task's
    document properties), in name order."""
    if fmt != "xlsx":
        return hashlib.sha256(data).hexdigest()
    sha = hashlib.sha256()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for name in sorted(zf.namelist()):
            if not name.startswith("docProps/"):
                sha.update(name.encode() + b"\0" + zf.read(name))
    return sha.hexdigest()


def _seconds(row: dict[str, Any]) -> float:
    return float((row["completed_at"] - row["requested_at"]).total_seconds())


def _speedup(
    common: dict[str, Any], fmt: str, workers: tuple[int, ...], say: Callable[[str], None]
) -> dict[str, Any]:
    out: dict[str, Any] = {"format": fmt}
    digests = {}
    for count in workers:
        with _Run(workers=count, extra={}, **common) as run:
            run.cluster.wait([run.create("csv", f"warm{count}")], timeout=3600)
            row = run.export(fmt, f"big{count}")
            if row["status"] != "SUCCEEDED":
                raise RuntimeError(f"the export did not succeed: {row}")
            data = run.file(row["task_no"])
        digests[count] = _digest(data, fmt)
        seconds = _seconds(row)
        out[f"workers{count}"] = {
            "rows": int(row["processed_rows"]),
            "seconds": round(seconds, 2),
            "rowsPerSecond": round(int(row["processed_rows"]) / seconds, 1),
            "bytes": len(data),
        }
        say(
            f"  distributed {fmt} {count} worker(s): {int(row['processed_rows']):,} rows "
            f"{seconds:.1f} s ({int(row['processed_rows']) / seconds:,.0f} rows/s)"
        )
    first, last = workers[0], workers[-1]
    out["ratio"] = round(out[f"workers{first}"]["seconds"] / out[f"workers{last}"]["seconds"], 3)
    out["coreCeiling"] = min(os.cpu_count() or 1, last, 4)
    out["identical"] = len(set(digests.values())) == 1
    say(
        f"  speed-up {first} -> {last} workers: {out['ratio']:.2f}x (ceiling on this machine "
        f"{out['coreCeiling']}x); files identical: {out['identical']}"
    )
    return out


def csv_keys(data: bytes) -> list[int]:
    """The order keys (first column) of an ORDERS CSV, header skipped."""
    rows = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""))
    next(rows, None)
    return [int(r[0]) for r in rows if r]


def _order_keys(sample_url: str) -> int:
    engine = create_engine(make_url(sample_url))
    with engine.connect() as conn:
        count = int(conn.execute(text("SELECT COUNT(*) FROM orders")).scalar_one())
    engine.dispose()
    return count


def _kills(common: dict[str, Any], kills: int, say: Callable[[str], None]) -> dict[str, Any]:
    short = {
        "EXPORT_CENTER_TASK__LEASE_SECONDS": "10",
        "EXPORT_CENTER_TASK__SHARD_LEASE_SECONDS": "10",
        "EXPORT_CENTER_TASK__HEARTBEAT_SECONDS": "2",
        "EXPORT_CENTER_RECONCILER__LOOP_SECONDS": "2",
        "EXPORT_CENTER_RECONCILER__SENT_STALE_SECONDS": "20",
    }
    expected = _order_keys(common["sample_url"])
    rng = random.Random(26)
    runs: list[dict[str, Any]] = []
    with _Run(workers=3, extra=short, **common) as run:
        base = run.export("csv", "unkilled")
        run.file(base["task_no"])
        unkilled = _seconds(base)
        for n in range(kills):
            before = run.rows_served()
            task_id = run.create("csv", f"kill{n}")
            delay = rng.uniform(0.5, max(1.0, 0.8 * unkilled))
            time.sleep(delay)
            holders = run.shard_holders()
            victim = rng.choice(holders) if holders else None
            if victim is not None:
                pid = run.cluster.pid(victim)
                if pid:
                    os.kill(pid, signal.SIGKILL)
            (row,) = run.cluster.wait([task_id], timeout=1800)
            run.cluster.run("up")  # the killed worker comes back
            data = run.file(task_id)
            keys = csv_keys(data)
            served = run.rows_served() - before
            exact = len(keys) == expected and len(set(keys)) == expected
            runs.append(
                {
                    "delaySeconds": round(delay, 2),
                    "victim": victim,
                    "exact": exact,
                    "rows": len(keys),
                    "refetchedRows": int(served - len(keys)),
                    "seconds": round(_seconds(row), 2),
                }
            )
            say(
                f"  kill {n + 1}: {victim or 'nobody held a shard'} at {delay:.1f} s: "
                f"{'exact' if exact else 'NOT EXACT'}, {int(served - len(keys)):,} rows "
                f"fetched again, {_seconds(row):.1f} s"
            )
    killed = [r for r in runs if r["victim"]]
    return {
        "kills": runs,
        "unkilledSeconds": round(unkilled, 2),
        "exact": all(r["exact"] for r in runs),
        "killed": len(killed),
        "refetchedRowsMax": max((r["refetchedRows"] for r in killed), default=0),
        "refetchedRowsMean": round(sum(r["refetchedRows"] for r in killed) / len(killed), 1)
        if killed
        else 0,
    }


def run_distributed(
    *,
    data_dir: Path,
    sample_url: str,
    kill_sample_url: str,
    broker: str,
    server: S3Server,
    scale: float,
    kill_scale: float,
    fmt: str = "xlsx",
    workers: tuple[int, ...] = (1, 3),
    kills: int = 10,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The speed-up of one export on more workers, then the kill -9 runs.

    Args:
        sample_url: the MariaDB database of the big sample (scale ``scale``).
        kill_sample_url: the MariaDB database of the kill runs' sample (``kill_scale``).
        fmt: format of the speed-up export.
        workers: the worker counts compared (first against last).
        kills: exports killed once each.

    Returns:
        ``{"speedup": {format, workers<N>: {rows, seconds, rowsPerSecond, bytes}, ratio,
        coreCeiling, identical}, "kill": {kills: [{delaySeconds, victim, exact, rows,
        refetchedRows, seconds}], unkilledSeconds, exact, killed, refetchedRowsMax,
        refetchedRowsMean}}``.
    """
    out: dict[str, Any] = {"scale": scale, "killScale": kill_scale}
    prepare_sample(
        data_dir=data_dir, database="mariadb", database_url=sample_url, scale=scale, say=say
    )
    common = {"data_dir": data_dir, "sample_url": sample_url, "broker": broker, "server": server}
    out["speedup"] = _speedup(common, fmt, workers, say)
    if kills:
        prepare_sample(
            data_dir=data_dir,
            database="mariadb",
            database_url=kill_sample_url,
            scale=kill_scale,
            say=say,
        )
        out["kill"] = _kills({**common, "sample_url": kill_sample_url}, kills, say)
    return out


def distributed_goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The distributed part's goals: the speed-up against the core ceiling of this
    machine (at least 75 % of it), the same file on every worker count, every killed
    export exact."""
    goals: list[dict[str, Any]] = []
    if "skipped" in result:
        return goals
    speed = result.get("speedup") or {}
    ratio, ceiling = speed.get("ratio"), speed.get("coreCeiling")
    if ratio is not None and ceiling:
        goals.append(
            {
                "goal": "distributed: speed-up of one export, 1 -> 3 workers",
                "value": ratio,
                "target": f">= {0.75 * ceiling:.2f} (75 % of the {ceiling}-core ceiling)",
                "met": ratio >= 0.75 * ceiling,
            }
        )
    if "identical" in speed:
        goals.append(
            {
                "goal": "distributed: the same file on 1 and 3 workers",
                "value": None,
                "target": "identical",
                "met": bool(speed["identical"]),
            }
        )
    kill = result.get("kill")
    if kill:
        goals.append(
            {
                "goal": f"distributed: kill -9 of a shard holder, {len(kill['kills'])} exports",
                "value": kill["refetchedRowsMax"],
                "target": "every export exact (rows fetched again: reported)",
                "met": bool(kill["exact"]),
            }
        )
    return goals
