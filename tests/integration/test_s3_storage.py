"""The S3 storage adapter against a real S3-compatible server (S3Proxy on loopback,
boto3): streaming multipart upload, abort on every failure path, presigned GET with the
download name, listing in pages, and S3 going away mid-upload. What every adapter
promises (refused keys, shard segments, ...) is in test_storage_conformance.py."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from export_center.errors import StorageError
from export_center.filenames import content_disposition
from export_center.settings import S3Settings
from export_center.storage.base import Proxied, Redirect
from export_center.storage.keys import new_object_key
from export_center.storage.s3 import S3Storage
from tests.support.s3 import contents, s3_client, storage_settings

pytestmark = [pytest.mark.s3, pytest.mark.timeout(300)]

MB = 1024 * 1024
TASK = "exp_01JA2B3C4D5E6F7G8H9J0KMNPQ"
CSV = "text/csv; charset=utf-8"


def make_storage(endpoint: str, bucket: str, **s3: object) -> S3Storage:
    return S3Storage(S3Settings.model_validate(storage_settings(endpoint, bucket, **s3)["s3"]))


def key(ext: str = "csv", tenant: str = "t1") -> str:
    return new_object_key(TASK, ext, tenant=tenant)


def chunks(total: int, size: int = 64 * 1024) -> list[bytes]:
    """``total`` bytes of numbered lines, in writes of ``size`` bytes."""
    data = b"".join(b"%09d,row\r\n" % i for i in range(total // 14 + 1))[:total]
    return [data[i : i + size] for i in range(0, total, size)]


def test_a_file_streams_in_parts_while_written_and_appears_only_at_commit(s3_endpoint, s3, bucket):
    storage = make_storage(s3_endpoint, bucket, part_size_mb=5)
    name = key()
    disposition = content_disposition("九月订单.csv")
    stream = storage.open_write(name, content_type=CSV, content_disposition=disposition)
    parts = chunks(12 * MB)
    for piece in parts[: len(parts) // 2 + 8]:
        stream.write(piece)
    # Mid-way: an upload with parts exists, no object is visible (nothing half-written).
    during = contents(s3, bucket)
    assert during.uploads == [name] and during.objects == {}
    assert [o.temporary for o in storage.list()] == [True]
    for piece in parts[len(parts) // 2 + 8 :]:
        stream.write(piece)
    stream.close()
    assert storage.commit(name) == 12 * MB
    after = contents(s3, bucket)
    assert after.objects == {name: 12 * MB} and after.uploads == []
    head = s3.head_object(Bucket=bucket, Key=name)
    assert head["ContentType"] == CSV and head["ContentDisposition"] == disposition
    body = s3.get_object(Bucket=bucket, Key=name)["Body"].read()
    assert body == b"".join(parts)
    assert storage.exists(name) and storage.size(name) == 12 * MB


def test_a_small_file_is_one_put(s3_endpoint, s3, bucket):
    storage = make_storage(s3_endpoint, bucket)
    name = key("xlsx")
    with storage.open_write(name, content_type="application/zip", content_disposition="x") as out:
        out.write(b"PK small")
        assert contents(s3, bucket).uploads == []  # below one part: nothing sent yet
    assert storage.commit(name) == 8
    assert contents(s3, bucket).objects == {name: 8}


def test_delete_aborts_the_upload_of_this_process_and_of_a_dead_one(s3_endpoint, s3, bucket):
    mine, dead = key(), key()
    storage = make_storage(s3_endpoint, bucket, part_size_mb=5)
    for name in (mine, dead):
        stream = storage.open_write(name, content_type=CSV, content_disposition="x")
        for piece in chunks(6 * MB):
            stream.write(piece)
    assert sorted(contents(s3, bucket).uploads) == sorted([mine, dead])
    storage.delete(mine)  # the failure path of a running attempt
    assert contents(s3, bucket).uploads == [dead]
    # The reconciler of another process knows only the key recorded at claim.
    make_storage(s3_endpoint, bucket).delete(dead)
    assert contents(s3, bucket) == contents(s3, bucket).__class__()
    storage.delete(mine)  # idempotent: nothing left to delete


def test_a_failed_commit_leaves_the_upload_for_delete(s3_endpoint, s3, bucket):
    storage = make_storage(s3_endpoint, bucket, part_size_mb=5)
    name = key()
    stream = storage.open_write(name, content_type=CSV, content_disposition="x")
    for piece in chunks(6 * MB):
        stream.write(piece)
    s3.abort_multipart_upload(
        Bucket=bucket,
        Key=name,
        UploadId=s3.list_multipart_uploads(Bucket=bucket)["Uploads"][0]["UploadId"],
    )
    failure = f"cannot (upload a part of|complete the upload of) {name}"
    with pytest.raises(StorageError, match=failure):
        storage.commit(name)
    storage.delete(name)
    assert contents(s3, bucket).objects == {} and contents(s3, bucket).uploads == []


def test_presigned_get_names_the_file_and_expires(s3_endpoint, s3, bucket):
    storage = make_storage(s3_endpoint, bucket)
    name = key()
    with storage.open_write(name, content_type=CSV, content_disposition="x") as out:
        out.write(b"\xef\xbb\xbfa,b\r\n1,2\r\n")
    storage.commit(name)
    answer = storage.download(name, file_name="九月 订单.csv", content_type=CSV, seconds=2)
    assert isinstance(answer, Redirect)
    query = parse_qs(urlsplit(answer.url).query)
    assert query["X-Amz-Expires"] == ["2"]
    got = httpx.get(answer.url)
    assert got.status_code == 200 and got.content == b"\xef\xbb\xbfa,b\r\n1,2\r\n"
    assert got.headers["content-disposition"] == content_disposition("九月 订单.csv")
    assert got.headers["content-type"] == CSV and got.headers["cache-control"] == "no-store"
    tampered = answer.url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
    assert httpx.get(tampered).status_code == 403
    other_key = answer.url.replace(name, key())
    assert httpx.get(other_key).status_code == 403
    time.sleep(3)
    assert httpx.get(answer.url).status_code == 403  # expired


def test_proxy_mode_reads_byte_ranges(s3_endpoint, bucket):
    storage = make_storage(s3_endpoint, bucket, download="proxy")
    name = key()
    data = bytes(range(256)) * 4096  # 1 MiB
    with storage.open_write(name, content_type=CSV, content_disposition="x") as out:
        out.write(data)
    storage.commit(name)
    answer = storage.download(name, file_name="a.csv", content_type=CSV, seconds=60)
    assert isinstance(answer, Proxied) and answer.size == len(data)
    assert b"".join(answer.read(10, 19)) == data[10:20]
    assert b"".join(answer.read(0, len(data) - 1)) == data


def test_listing_goes_through_pages_and_sees_only_the_prefix(s3_endpoint, s3, bucket):
    storage = make_storage(s3_endpoint, bucket)
    names = sorted(key() for _ in range(7))
    for name in names:
        s3.put_object(Bucket=bucket, Key=name, Body=b"x")
    s3.put_object(Bucket=bucket, Key="elsewhere/file.csv", Body=b"x")
    upload = s3.create_multipart_upload(Bucket=bucket, Key=names[0] + "x")
    storage.page_size = 2  # 4 pages of objects
    listed = list(storage.list())
    assert [o.key for o in listed if not o.temporary] == names
    assert [o.key for o in listed if o.temporary] == [names[0] + "x"]
    assert all(o.modified_at.tzinfo is not None for o in listed)
    assert all(abs((datetime.now(UTC) - o.modified_at).total_seconds()) < 300 for o in listed)
    s3.abort_multipart_upload(Bucket=bucket, Key=names[0] + "x", UploadId=upload["UploadId"])


def test_a_tenant_that_is_not_a_plain_name_becomes_a_digest(s3_endpoint, s3, bucket):
    storage = make_storage(s3_endpoint, bucket)
    name = key(tenant="../租户 A")
    assert name.startswith("exports/~") and "/../" not in name and "租户" not in name
    with storage.open_write(name, content_type=CSV, content_disposition="x") as out:
        out.write(b"1")
    storage.commit(name)
    assert list(contents(s3, bucket).objects) == [name]


def test_s3_down_mid_upload_is_a_storage_error_and_the_upload_is_aborted_later(private_s3):
    server = private_s3()
    client = s3_client(server.url)
    client.create_bucket(Bucket="down-mid-upload")
    storage = make_storage(server.url, "down-mid-upload", part_size_mb=5, max_attempts=2)
    name = key()
    stream = storage.open_write(name, content_type=CSV, content_disposition="x")
    for piece in chunks(6 * MB):
        stream.write(piece)
    server.stop()
    started = time.monotonic()
    with pytest.raises(StorageError) as failure:
        for piece in chunks(6 * MB):
            stream.write(piece)
        stream.close()
        storage.commit(name)
    assert time.monotonic() - started < 60
    assert "AWS_SECRET" not in str(failure.value) and "export-center-secret" not in str(
        failure.value
    )
    with pytest.raises(StorageError):  # the abort cannot reach S3 either
        storage.delete(name)
    server.start()
    assert contents(client, "down-mid-upload").uploads == [name]  # it survived the restart
    storage.delete(name)  # what the reconciler's scan does once S3 is back
    assert contents(client, "down-mid-upload").uploads == []
    assert contents(client, "down-mid-upload").objects == {}


def test_credentials_never_appear_in_errors(s3_endpoint, bucket):
    storage = make_storage(
        s3_endpoint, bucket, access_key_id="export-center", secret_access_key="wrong-secret-9"
    )
    with pytest.raises(StorageError) as failure:
        storage.size(key())
    assert "wrong-secret-9" not in str(failure.value)
    assert os.environ.get("EXPORT_CENTER_TEST_S3_SECRET_KEY", "export-center-secret") not in str(
        failure.value
    )
