"""Exports stored in S3 end to end, on SQLite and on MariaDB: the API, the consumer and
the provider on loopback, the files in a real S3Proxy bucket.

A download redirects to a presigned GET signed for the click (5 min by default, never
past the retention) that carries the download name; the proxy mode streams through the
API with Range; a failed export aborts its upload; the reconciler aborts the upload of
a dead attempt, expires files and cleans orphans in the bucket.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from export_center import repository
from export_center.db import db_now_plus
from export_center.filenames import content_disposition
from export_center.reconciler import Reconciler
from export_center.settings import ReconcilerSettings
from export_center.storage.keys import new_object_key, task_no_of_key
from tests.integration.test_claims_and_loops import engine, new_task, set_task, task  # noqa: F401
from tests.support.helpers import create, in_shard_order, read_csv, read_xlsx, wait_state
from tests.support.s3 import contents, storage_settings

pytestmark = [pytest.mark.s3, pytest.mark.timeout(600)]

#: Orders of 1994-01-01 .. 1995-06-30 in the 0.27 sample: a CSV of about 15 MB, three
#: 5 MiB parts.
RANGE = {"from": "1994-01-01", "to": "1995-06-30"}


def s3_stack(make_stack, endpoint: str, bucket: str, **s3: Any):
    return make_stack(scale=0.27, storage=storage_settings(endpoint, bucket, part_size_mb=5, **s3))


def orders_between(stack, first: str, last: str) -> list[int]:
    """Order keys of the sample between two dates, from the database, in the order of
    the sharded file (by day shard, then by key)."""
    from sqlalchemy import create_engine, text

    eng = create_engine(stack.settings.resolved_sample_database_url)
    with eng.connect() as conn:
        rows = conn.execute(
            text("SELECT o_orderdate, o_orderkey FROM orders WHERE o_orderdate BETWEEN :a AND :b"),
            {"a": first, "b": last},
        ).all()
    eng.dispose()
    days = [(d if isinstance(d, dt.date) else dt.date.fromisoformat(d), int(k)) for d, k in rows]
    return in_shard_order(stack, {"from": first, "to": last}, days)


def follow_to_s3(client: httpx.Client, task_id: str, endpoint: str) -> httpx.URL:
    """Bearer download -> signed link -> presigned GET; returns the presigned URL."""
    first = client.get(f"/api/v1/exports/{task_id}/download")
    assert first.status_code == 307, first.text
    assert first.headers["cache-control"] == "no-store"  # the signed link is a credential
    second = client.get(first.headers["location"])
    assert second.status_code == 307, second.text
    assert second.headers["cache-control"] == "no-store"
    url = httpx.URL(second.headers["location"])
    assert str(url).startswith(endpoint + "/")  # the bucket, not the API
    return url


def test_exports_go_to_the_bucket_and_downloads_redirect_to_a_presigned_get(
    make_stack, s3_endpoint, s3, bucket
):
    stack = s3_stack(make_stack, s3_endpoint, bucket)
    client = stack.client()
    csv_id = create(client, "csv", taskName="九月 订单", parameters=RANGE).json()["taskId"]
    september = {"from": "1995-09-01", "to": "1995-09-30"}
    xlsx_id = create(client, "xlsx", parameters=september).json()["taskId"]
    csv_detail = wait_state(client, csv_id, timeout=300)
    xlsx_detail = wait_state(client, xlsx_id, timeout=300)
    assert csv_detail["state"] == xlsx_detail["state"] == "succeeded", (csv_detail, xlsx_detail)

    with stack.runtime.engine.connect() as conn:
        rows = {t: repository.read_task_by_no(conn, t) for t in (csv_id, xlsx_id)}
    held = contents(s3, bucket)
    deadline = time.monotonic() + 10  # the shard parts go right after the commit
    while any(k.startswith("parts/") for k in held.objects) and time.monotonic() < deadline:
        time.sleep(0.1)
        held = contents(s3, bucket)
    assert held.uploads == []  # every multipart upload completed
    assert held.objects == {r.object_key: r.size_bytes for r in rows.values()}
    for task_id, row in rows.items():
        parts = row.object_key.split("/")
        assert parts[:2] == ["exports", "t1"] and parts[4] == task_id
        assert task_no_of_key(row.object_key) == task_id
    assert held.objects[rows[csv_id].object_key] > 10 * 1024 * 1024  # several parts

    url = follow_to_s3(client, csv_id, s3_endpoint)
    assert parse_qs(url.query.decode())["X-Amz-Expires"] == ["300"]  # link_seconds default
    answer = httpx.get(url)  # no token: the signature is the permission
    assert answer.status_code == 200
    assert answer.headers["content-disposition"] == content_disposition("九月 订单.csv")
    assert answer.headers["content-type"] == "text/csv; charset=utf-8"
    keys = [int(r[0]) for r in read_csv(answer.content)[1:]]
    assert keys == orders_between(stack, RANGE["from"], RANGE["to"])

    url = follow_to_s3(client, xlsx_id, s3_endpoint)
    sheet = read_xlsx(httpx.get(url).content)
    assert [r[0] for r in sheet[1:]] == orders_between(stack, "1995-09-01", "1995-09-30")

    # Each click signs a new URL; a URL for one file opens no other.
    again = follow_to_s3(client, csv_id, s3_endpoint)
    assert again != url
    forged = str(again).replace(rows[csv_id].object_key, rows[xlsx_id].object_key)
    assert httpx.get(forged).status_code == 403


def test_a_presigned_get_never_outlives_the_retention(make_stack, s3_endpoint, bucket):
    stack = make_stack(
        storage=storage_settings(s3_endpoint, bucket, link_seconds=3600),
        task={"retention_days": 0.001},  # 86.4 s
    )
    client = stack.client()
    task_id = create(client, "csv").json()["taskId"]
    assert wait_state(client, task_id)["state"] == "succeeded"
    url = follow_to_s3(client, task_id, s3_endpoint)
    expires = int(parse_qs(url.query.decode())["X-Amz-Expires"][0])
    assert 1 <= expires <= 87


def test_proxy_mode_streams_the_file_with_ranges(make_stack, s3_endpoint, bucket):
    stack = make_stack(storage=storage_settings(s3_endpoint, bucket, download="proxy"))
    client = stack.client()
    task_id = create(client, "csv").json()["taskId"]
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded"
    link = detail["downloadUrl"]
    whole = client.get(link)
    assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["content-disposition"] == content_disposition("orders.csv")
    assert whole.headers["cache-control"] == "no-store"
    size = len(whole.content)
    assert int(whole.headers["content-length"]) == size == detail.get("sizeBytes", size)
    assert len(read_csv(whole.content)) == 15_001  # the header and every sample order
    part = client.get(link, headers={"range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == whole.content[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{size}"
    tail = client.get(link, headers={"range": "bytes=-10"})
    assert tail.status_code == 206 and tail.content == whole.content[-10:]
    resumed = client.get(link, headers={"range": f"bytes={size - 5}-"})
    assert resumed.content == whole.content[-5:]
    beyond = client.get(link, headers={"range": f"bytes={size}-"})
    assert beyond.status_code == 416 and beyond.json()["code"] == "RANGE_NOT_SATISFIABLE"
    assert beyond.headers["content-range"] == f"bytes */{size}"
    stale = client.get(link, headers={"range": "bytes=0-9", "if-range": '"other"'})
    assert stale.status_code == 200 and stale.content == whole.content
    several = client.get(link, headers={"range": "bytes=0-1,5-6"})
    assert several.status_code == 200 and several.content == whole.content
    head = client.head(link)
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == size


def test_a_failed_export_aborts_its_upload(make_stack, s3_endpoint, s3, bucket):
    # A 6 MB cap: the shards pass it before the file is written; the failure is final
    # (a retry meets the same cap), so the shard parts are deleted too.
    stack = make_stack(
        scale=0.27,
        storage=storage_settings(s3_endpoint, bucket, part_size_mb=5),
        task={"max_file_size_mb": 6},
    )
    client = stack.client()
    task_id = create(client, "csv", parameters=RANGE).json()["taskId"]
    detail = wait_state(client, task_id, timeout=300)
    assert detail["state"] == "failed" and detail["error"]["code"] == "FILE_TOO_LARGE", detail
    deadline = time.monotonic() + 10  # the parts go right after the failure is written
    while contents(s3, bucket).objects and time.monotonic() < deadline:
        time.sleep(0.1)
    assert contents(s3, bucket) == contents(s3, bucket).__class__()  # nothing, no parts


def test_the_reconciler_aborts_dead_uploads_expires_and_cleans_orphans(
    engine,  # noqa: F811
    s3_endpoint,
    s3,
    bucket,
):
    from export_center.settings import S3Settings
    from export_center.storage.s3 import S3Storage

    settings = S3Settings.model_validate(
        storage_settings(s3_endpoint, bucket, part_size_mb=5)["s3"]
    )
    dead_worker = S3Storage(settings)  # the process that was killed
    storage = S3Storage(settings)  # the reconciler's process
    running, done, failed = new_task(engine, "a"), new_task(engine, "b"), new_task(engine, "c")

    def upload(t: repository.Task) -> str:
        key = new_object_key(t.task_no, "csv", tenant="t1")
        out = dead_worker.open_write(key, content_type="text/csv", content_disposition="x")
        out.write(b"x" * (6 * 1024 * 1024))  # one part sent
        return key

    def stored(t: repository.Task) -> str:
        key = new_object_key(t.task_no, "csv", tenant="t1")
        s3.put_object(Bucket=bucket, Key=key, Body=b"file")
        return key

    dead_key = upload(running)
    set_task(
        engine,
        running.id,
        status="RUNNING",
        object_key=dead_key,
        lease_owner="killed/1",
        lease_until=db_now_plus(-1),
        attempt_count=1,
    )
    done_key, old_key, failed_upload = stored(done), stored(done), upload(failed)
    set_task(engine, done.id, status="SUCCEEDED", object_key=done_key, expires_at=db_now_plus(600))
    set_task(engine, failed.id, status="FAILED")

    def reconcile(**values: Any) -> Reconciler:
        rec = Reconciler(engine, storage, ReconcilerSettings(**values), topic="t")
        rec.run_once()
        return rec

    rec = reconcile()  # young files: only the dead attempt's upload goes
    assert rec.last["lease_recover"] == 1 and rec.last["partial_delete"] == 1
    assert sorted(contents(s3, bucket).uploads) == [failed_upload]
    assert task(engine, running.id).status == "PENDING"

    rec = reconcile(orphan_age_seconds=0, upload_orphan_age_seconds=0)
    assert rec.last["orphan_clean"] == 1 and rec.last["upload_abort"] == 1
    assert contents(s3, bucket).objects == {done_key: 4} and contents(s3, bucket).uploads == []
    assert old_key not in contents(s3, bucket).objects

    set_task(engine, done.id, expires_at=db_now_plus(-1))
    rec = reconcile()
    assert rec.last["expire"] == 1 and task(engine, done.id).status == "EXPIRED"
    assert contents(s3, bucket).objects == {}


def test_a_bucket_reports_no_free_space(make_stack, s3_endpoint, s3, bucket):
    # A bucket has no fixed size: no export_storage_* gauges (ExportStorageLowSpace has
    # nothing to compare) and no storage object in /readyz.
    stack = s3_stack(make_stack, s3_endpoint, bucket)
    client = stack.client()
    scraped = client.get("/metrics")
    assert scraped.status_code == 200 and "export_task_queue_age_seconds" in scraped.text
    for gauge in ("free_bytes", "size_bytes", "low_space_bytes"):
        assert f"\nexport_storage_{gauge} " not in scraped.text
    assert "\nexport_storage_bytes_total " in scraped.text  # the counter is there
    ready = client.get("/readyz")
    assert ready.status_code == 200 and "storage" not in ready.json(), ready.json()
