"""The cluster on one machine (``deploy/cluster/run.sh``): 2 APIs of 2 API processes each
(``serve --workers 2``), 3 workers running sharded exports distributed, MariaDB, the
RocketMQ broker and S3Proxy, all real, all on loopback.

* 30 exports from 10 users, created alternately on both APIs (CSV and XLSX, ORDERS of
  one to twelve months), all succeed; each is downloaded through the other API (a
  presigned GET of the bucket) and checked row for row against the database; the
  bucket holds exactly the 30 files and no unfinished upload; the metrics of the nine
  processes (per API its supervisor and two API processes, and the workers) add up to
  the 30 exports, and shards of them ran on workers other than their coordinator's.
* kill -9 of the worker that renders into a multipart upload: the task succeeds on
  another worker, the dead upload is aborted by the reconciler, one file is stored.
* S3 stopped during an upload: the attempt fails as transient, backs off, and succeeds
  once S3 is back; meanwhile nothing is served, and the failed attempt's upload is
  aborted by the reconciler afterwards.

The cluster stores into a private S3Proxy of this module (the test stops it), never
the shared one.
"""

from __future__ import annotations

import bisect
import datetime as dt
import io
import multiprocessing
import os
import re
import signal
import subprocess
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from export_center import repository
from export_center.attempt.shards import plan_shards
from export_center.auth import issue_token
from export_center.db import make_engine
from export_center.embedded import free_port
from export_center.registry import load_registry
from export_center.registry_source import default_registry_path
from export_center.writers.formats import FORMATS
from tests.conftest import _fresh_mariadb, sample_url
from tests.integration.test_rocketmq_broker import rocketmq_endpoint
from tests.support.helpers import free_port_block, read_csv, read_xlsx
from tests.support.s3 import PrivateS3Proxy, contents, s3_client, s3_keys

pytestmark = [
    pytest.mark.mariadb,
    pytest.mark.rocketmq,
    pytest.mark.s3,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "deploy" / "cluster" / "run.sh"
BUCKET = "cluster"
ALL_ORDERS = 405_000
PERMISSIONS = ["export:orders:create"]


@dataclass
class Cluster:
    """The running cluster: its environment, API and metrics addresses, database."""

    env: dict[str, str]
    state: Path
    apis: list[str]
    metrics: list[str]
    #: Per API: its supervisor's metrics (the publisher), then its two API processes'.
    api_metrics: list[str]
    database_url: str
    sample_url: str
    s3proxy: PrivateS3Proxy
    jwt_secret: str

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", str(RUN), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:] + self.logs()
        return done

    def logs(self, lines: int = 40) -> str:
        out = []
        for log in sorted((self.state / "logs").glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"\n--- {log.name}\n" + "\n".join(tail))
        return "".join(out)

    def client(self, api: int, user: str, tenant: str = "acme") -> httpx.Client:
        token = issue_token(
            self.jwt_secret, user=user, tenant=tenant, app_code="PLATFORM", permissions=PERMISSIONS
        )
        return httpx.Client(
            base_url=self.apis[api], headers={"authorization": f"Bearer {token}"}, timeout=60
        )

    def pid(self, name: str) -> int:
        return int((self.state / "pids" / f"{name}.pid").read_text())

    def task(self, task_id: str) -> Any:
        engine = make_engine(self.database_url)
        try:
            with engine.connect() as conn:
                return repository.read_task_by_no(conn, task_id)
        finally:
            engine.dispose()

    @property
    def s3(self) -> Any:
        return s3_client(self.s3proxy.url)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("cluster")
    endpoint = rocketmq_endpoint()
    database_url, drop = _fresh_mariadb("cluster")
    sample = sample_url(
        "mariadb", Path(os.environ.get("EXPORT_CENTER_TEST_SAMPLE_DIR", base)), 0.27
    )
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
            "EXPORT_CENTER_DATABASE_URL": database_url,
            "EXPORT_CENTER_SAMPLE_DATABASE_URL": sample,
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
            "EXPORT_CENTER_ROCKETMQ__ENDPOINT": endpoint,
            "EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL": s3proxy.url,
            "EXPORT_CENTER_STORAGE__S3__BUCKET": BUCKET,
            "EXPORT_CENTER_STORAGE__S3__PART_SIZE_MB": "5",
            "EXPORT_CENTER_STORAGE__S3__MAX_ATTEMPTS": "2",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            # Short leases and a fast reconciler, so a killed worker is noticed in seconds.
            "EXPORT_CENTER_TASK__LEASE_SECONDS": "12",
            "EXPORT_CENTER_TASK__HEARTBEAT_SECONDS": "2",
            "EXPORT_CENTER_TASK__RETRY_BACKOFF_SECONDS": "[8, 15]",
            "EXPORT_CENTER_TASK__RETRY_JITTER": "0",
            "EXPORT_CENTER_RECONCILER__LOOP_SECONDS": "2",
            "EXPORT_CENTER_RECONCILER__UPLOAD_ORPHAN_AGE_SECONDS": "0",
            # Commands another process took from the shared test topic come back soon.
            "EXPORT_CENTER_RECONCILER__SENT_STALE_SECONDS": "20",
            "EXPORT_CENTER_PUBLISHER__LOOP_SECONDS": "0.2",
        }
    )
    made = Cluster(
        env=env,
        state=base / "state",
        apis=[f"http://127.0.0.1:{p}" for p in apis],
        metrics=[f"http://127.0.0.1:{p}/metrics" for p in metrics],
        api_metrics=[f"http://127.0.0.1:{p + k}/metrics" for p in api_metrics for k in range(3)],
        database_url=database_url,
        sample_url=sample,
        s3proxy=s3proxy,
        jwt_secret="",
    )
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
        drop()


def wait_for(
    client: httpx.Client, task_id: str, states: set[str], timeout: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    detail: dict[str, Any] = {}
    while time.monotonic() < deadline:
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        if detail["state"] in states:
            return detail
        time.sleep(0.3)
    raise AssertionError(f"{task_id} not in {states} after {timeout} s: {detail}")


def download(client: httpx.Client, task_id: str, s3_url: str) -> httpx.Response:
    """Bearer download -> the API's signed link -> a presigned GET of the bucket."""
    first = client.get(f"/api/v1/exports/{task_id}/download")
    assert first.status_code == 307, first.text
    second = client.get(first.headers["location"])
    assert second.status_code == 307, second.text
    assert second.headers["location"].startswith(f"{s3_url}/{BUCKET}/exports/")
    answer = httpx.get(second.headers["location"], timeout=60)
    assert answer.status_code == 200
    return answer


_CSV_GUARDED = re.compile(r"\s*[=+\-@]|[\t\r\n]")


def expected_rows(sample: str, first: dt.date, last: dt.date, fmt: str) -> list[tuple[Any, ...]]:
    """The 12 ORDERS columns of the orders of ``first..last`` (inclusive), in the order
    of the sharded file (by day shard of the registry's ORDERS, then by key), read from
    the sample database; CSV text cells as the formula guard writes them (a ``'``
    before a text that starts, after blanks, with ``= + - @``)."""
    engine = create_engine(sample)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT o.o_orderkey, o.o_custkey, c.c_name, c.c_phone, c.c_mktsegment,"
                " o.o_orderstatus, o.o_totalprice, o.o_orderdate, o.o_orderpriority,"
                " o.o_clerk, o.o_shippriority, o.o_comment"
                " FROM orders o JOIN customer c ON c.c_custkey = o.o_custkey"
                " WHERE o.o_orderdate BETWEEN :a AND :b ORDER BY o.o_orderkey"
            ),
            {"a": first, "b": last},
        ).all()
    engine.dispose()
    etype = load_registry(default_registry_path(), allowed_hosts=set(), allow_self=True).get(
        "ORDERS"
    )
    assert etype is not None
    dates = {"from": first.isoformat(), "to": last.isoformat()}
    starts = [shard.first for shard in plan_shards(etype, dates, "UTC")]
    rows = sorted(rows, key=lambda r: (bisect.bisect_right(starts, r[7]) - 1, int(r[0])))

    def cell(value: Any) -> Any:
        if fmt == "csv" and isinstance(value, str) and _CSV_GUARDED.match(value):
            return "'" + value
        return value

    return [
        (int(r[0]), int(r[1]), *map(cell, r[2:6]), Decimal(str(r[6])), r[7], *map(cell, r[8:10]))
        + (int(r[10]), cell(r[11]))
        for r in rows
    ]


def file_rows(fmt: str, data: bytes) -> list[tuple[Any, ...]]:
    """The 12 columns read back from a CSV file (text) or an XLSX file (openpyxl's
    typed cells), header row dropped, as the same Python types as :func:`expected_rows`."""
    if fmt == "csv":
        return [
            (int(r[0]), int(r[1]), *r[2:6], Decimal(r[6]), dt.date.fromisoformat(r[7]))
            + (*r[8:10], int(r[10]), r[11])
            for r in read_csv(data)[1:]
        ]
    return [
        (*r[:6], Decimal(str(r[6])), r[7].date() if isinstance(r[7], dt.datetime) else r[7])
        + tuple(r[8:])
        for r in read_xlsx(data)[1:]
    ]


def check_file(sample: str, fmt: str, data: bytes, first: dt.date, last: dt.date) -> int:
    """Compare a downloaded file with the database row for row (runs in a pool process:
    reading XLSX with openpyxl costs about 130 us per row).

    Returns:
        The number of data rows (all equal).

    Raises:
        AssertionError: the first row that differs, or the counts.
    """
    got, want = file_rows(fmt, data), expected_rows(sample, first, last, fmt)
    for number, (mine, theirs) in enumerate(zip(got, want, strict=False), start=1):
        assert mine == theirs, f"data row {number}: file {mine} != database {theirs}"
    assert len(got) == len(want), f"{len(got)} data rows in the file, {len(want)} in the database"
    return len(want)


def month_range(index: int) -> tuple[dt.date, dt.date]:
    """Export ``index`` covers 1..12 months, starting in a month of 1993-1997."""
    months = 1 + index % 12
    start = dt.date(1993 + index % 5, 1 + (index * 5) % 12, 1)
    end_month = start.month - 1 + months
    end = dt.date(start.year + end_month // 12, end_month % 12 + 1, 1) - dt.timedelta(days=1)
    return start, end


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    answer = httpx.get(url, timeout=10)
    assert answer.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return float(sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls)))


def test_thirty_exports_from_ten_users_on_both_apis(cluster: Cluster) -> None:
    users = [f"user{n}" for n in range(10)]
    clients = {(api, u): cluster.client(api, u) for api in (0, 1) for u in users}
    created: list[tuple[str, str, int, tuple[dt.date, dt.date]]] = []
    for i in range(30):
        api, user, fmt = i % 2, users[i % 10], ("csv", "xlsx")[(i // 2) % 2]
        first, last = month_range(i)
        answer = clients[api, user].post(
            "/api/v1/exports",
            json={
                "exportType": "ORDERS",
                "format": fmt,
                "taskName": f"orders {i}",
                "parameters": {"from": first.isoformat(), "to": last.isoformat()},
            },
        )
        assert answer.status_code == 202, answer.text
        created.append((answer.json()["taskId"], fmt, api, (first, last)))

    # Each export is read and downloaded through the other API as soon as it ends; the
    # files are compared with the database in two processes while the cluster works on.
    pending = dict(enumerate(created))
    keys: dict[str, str] = {}
    checks: dict[int, Future[int]] = {}
    deadline = time.monotonic() + 600
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        while pending:
            assert time.monotonic() < deadline, f"not done in 600 s: {pending}"
            for i, (task_id, fmt, api, (first, last)) in list(pending.items()):
                other = clients[1 - api, users[i % 10]]
                detail = other.get(f"/api/v1/exports/{task_id}").json()
                if detail["state"] in ("queued", "running"):
                    continue
                assert detail["state"] == "succeeded", (detail, cluster.logs())
                data = download(other, task_id, cluster.s3proxy.url).content
                checks[i] = pool.submit(check_file, cluster.sample_url, fmt, data, first, last)
                keys[task_id] = cluster.task(task_id).object_key
                del pending[i]
            time.sleep(0.5)
        rows_total = 0
        for i, check in sorted(checks.items()):
            task_id, fmt, _api, (first, last) = created[i]
            try:
                rows_total += check.result()
            except AssertionError as exc:
                raise AssertionError(f"export {i} ({fmt}, {first}..{last}): {exc}") from None

    held = contents(cluster.s3, BUCKET)
    assert sorted(held.objects) == sorted(keys.values())  # the 30 files and nothing else
    assert held.uploads == []
    for task_id, fmt, _api, _range in created:  # server-made keys, headers on the object
        key = keys[task_id]
        assert key.split("/")[1] == "acme" and key.split("/")[4] == task_id
        assert key.endswith(f".{fmt}")
        head = cluster.s3.head_object(Bucket=BUCKET, Key=key)
        assert head["ContentType"] == FORMATS[fmt].content_type
        assert head["ContentDisposition"].startswith("attachment; ")

    # Metrics of the nine processes add up to the 30 exports (each counted once).
    apis = [scrape(url) for url in cluster.api_metrics]
    workers = [scrape(url) for url in cluster.metrics]
    created_counts = [total(s, "export_task_created_total") for s in apis + workers]
    succeeded = [total(s, "export_task_completed_total", status="succeeded") for s in workers]
    rows = [total(s, "export_rows_processed_total", type="ORDERS") for s in apis + workers]
    assert sum(created_counts) == 30 and created_counts[len(apis) :] == [0, 0, 0], created_counts
    assert created_counts[0] == created_counts[3] == 0  # the supervisors serve no request
    assert all(total(s, "export_task_completed_total") == 0 for s in apis)
    assert sum(succeeded) == 30, succeeded
    assert sum(rows) == rows_total
    assert sum(1 for n in succeeded if n) >= 2  # the work was spread over the workers
    # Sharded exports ran distributed: shards on workers besides their coordinator's.
    assert sum(total(s, "export_shards_run_total", runner="helper") for s in workers) > 0


def _upload_of(cluster: Cluster, task_id: str, timeout: float = 60) -> tuple[str, str]:
    """Wait until the task's attempt has an unfinished upload with a part in the bucket;
    returns (object key, lease owner)."""
    deadline = time.monotonic() + timeout
    s3 = cluster.s3
    while time.monotonic() < deadline:
        task = cluster.task(task_id)
        key = task.object_key
        if key and task.status == "RUNNING":
            for upload in s3.list_multipart_uploads(Bucket=BUCKET, Prefix=key).get("Uploads", []):
                parts = s3.list_parts(Bucket=BUCKET, Key=key, UploadId=upload["UploadId"])
                if parts.get("Parts"):
                    return key, task.lease_owner
        time.sleep(0.1)
    raise AssertionError(f"no upload with parts for {task_id} in {timeout} s")


def _all_orders_are_in(data: bytes) -> None:
    keys = [int(r[0]) for r in read_csv(data)[1:]]
    assert len(keys) == ALL_ORDERS and keys == sorted(set(keys))


def _xlsx_order_keys(data: bytes) -> list[int]:
    """The order keys of column A of every sheet (no openpyxl: 405,000 rows)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        sheets = sorted(n for n in zf.namelist() if n.startswith("xl/worksheets/sheet"))
        found: list[int] = []
        for name in sheets:
            found += [int(k) for k in _KEY_CELL.findall(zf.read(name))]
    return found


_KEY_CELL = re.compile(rb'<c r="A(?!1")\d+"><v>(\d+)</v>')


def _frozen_mid_upload(cluster: Cluster, client: httpx.Client) -> tuple[str, str, str]:
    """Create a whole-table XLSX export and stop (SIGSTOP) its worker while the file's
    multipart upload has parts in the bucket; returns (task id, object key, worker).

    The upload lasts as long as the file's assembly (numbering, deflate: about a
    second for 405,000 rows); should the worker finish it between the check and the
    stop, it is let go and a new export tried (at most 3).
    """
    for _ in range(3):
        task_id = client.post(
            "/api/v1/exports",
            json={"exportType": "ORDERS", "format": "xlsx", "taskName": "all", "parameters": {}},
        ).json()["taskId"]
        key, owner = _upload_of(cluster, task_id)
        victim = owner.split("/")[0]
        os.kill(cluster.pid(victim), signal.SIGSTOP)
        if key in contents(cluster.s3, BUCKET).uploads:
            return task_id, key, victim
        os.kill(cluster.pid(victim), signal.SIGCONT)
        wait_for(client, task_id, {"succeeded", "failed"}, 120)
    raise AssertionError("three exports finished their upload before their worker stopped")


def test_kill_9_of_the_worker_mid_upload(cluster: Cluster) -> None:
    client = cluster.client(0, "killer")
    task_id, dead_key, victim = _frozen_mid_upload(cluster, client)
    survivors = [url for n, url in enumerate(cluster.metrics, start=1) if f"worker-{n}" != victim]
    assert len(survivors) == 2, victim

    def succeeded_on_survivors() -> float:
        return sum(
            total(scrape(url), "export_task_completed_total", status="succeeded")
            for url in survivors
        )

    before = succeeded_on_survivors()
    os.kill(cluster.pid(victim), signal.SIGKILL)  # frozen mid-upload, now killed
    # Until its lease runs out, the dead attempt's upload stays; it is neither an object
    # of the bucket nor served.
    held = contents(cluster.s3, BUCKET)
    assert dead_key in held.uploads and dead_key not in held.objects
    refused = client.get(f"/api/v1/exports/{task_id}/download")
    assert refused.status_code == 409 and refused.json()["code"] == "NOT_READY", refused.text

    detail = wait_for(client, task_id, {"succeeded", "failed"}, 300)
    # The lost worker was not one of the task's attempts: a lease recovery instead.
    assert detail["state"] == "succeeded" and detail["attempts"] == 1, detail
    assert cluster.task(task_id).lease_recoveries == 1
    assert succeeded_on_survivors() == before + 1  # finished by one of the other workers
    task = cluster.task(task_id)
    assert task.object_key != dead_key and not task.lease_owner
    prefix = task.object_key.rsplit("/", 1)[0] + "/"
    held = contents(cluster.s3, BUCKET)
    assert [k for k in held.objects if k.startswith(prefix)] == [task.object_key]
    assert held.uploads == []  # the dead attempt's upload was aborted at lease recovery
    engine = make_engine(cluster.database_url)
    with engine.connect() as conn:
        audit = repository.audit_entries(conn, task_id=task.id)
    engine.dispose()
    assert any(a.action == "lease_recovery" and victim in (a.reason or "") for a in audit), audit
    keys = _xlsx_order_keys(
        download(cluster.client(1, "killer"), task_id, cluster.s3proxy.url).content
    )
    assert len(keys) == ALL_ORDERS and keys == sorted(set(keys))
    cluster.run("up")  # the killed worker comes back for the next test


def test_s3_down_during_an_upload(cluster: Cluster) -> None:
    client = cluster.client(1, "outage")
    task_id = client.post(
        "/api/v1/exports",
        json={"exportType": "ORDERS", "format": "csv", "taskName": "all", "parameters": {}},
    ).json()["taskId"]
    first_key, _ = _upload_of(cluster, task_id)
    cluster.s3proxy.stop()
    try:
        detail = wait_for(client, task_id, {"queued", "failed"}, 120)
        assert detail["state"] == "queued", detail  # transient: another attempt follows
        assert detail["error"]["code"] == "STORAGE_ERROR" and detail["attempts"] == 1, detail
        failed_at = time.monotonic()
        # Nothing half-written is served: the task has no file to download.
        refused = client.get(f"/api/v1/exports/{task_id}/download")
        assert refused.status_code == 409 and refused.json()["code"] == "NOT_READY"
        assert detail.get("downloadUrl") is None
    finally:
        cluster.s3proxy.start()
    held = contents(cluster.s3, BUCKET)
    assert not any(k.startswith(first_key.rsplit("/", 1)[0]) for k in held.objects)

    running = wait_for(client, task_id, {"running", "succeeded", "failed"}, 120)
    waited = time.monotonic() - failed_at
    assert waited >= 5, f"the retry started {waited:.1f} s after the failure (backoff 8 s)"
    detail = wait_for(client, task_id, {"succeeded", "failed"}, 300)
    assert detail["state"] == "succeeded" and detail["attempts"] == 2, (running, detail)
    _all_orders_are_in(download(client, task_id, cluster.s3proxy.url).content)
    key = cluster.task(task_id).object_key
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the reconciler aborts the failed attempt's upload
        held = contents(cluster.s3, BUCKET)
        if not held.uploads:
            break
        time.sleep(1)
    assert held.uploads == []
    assert [k for k in held.objects if k.startswith(key.rsplit("/", 1)[0])] == [key]
