"""S3 for tests: the shared S3Proxy that ``scripts/test.sh`` starts, a fresh bucket per
test, and private S3Proxy servers that a test may stop and start again.

The shared server's address and keys come from ``EXPORT_CENTER_TEST_S3_ENDPOINT``,
``EXPORT_CENTER_TEST_S3_ACCESS_KEY`` and ``EXPORT_CENTER_TEST_S3_SECRET_KEY``. Without
them an S3 test is skipped locally and FAILS when ``CI`` is set. A test that stops S3
never stops the shared server (other people's tests use it): it starts its own with
:class:`PrivateS3Proxy`, on another port and data directory.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from export_center.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "s3proxy.sh"
ACCESS_KEY = "export-center"
SECRET_KEY = "export-center-secret"
REGION = "us-east-1"


def s3_endpoint() -> str:
    """The shared S3Proxy's URL from the environment, or skip (locally) / fail (CI)."""
    endpoint = os.environ.get("EXPORT_CENTER_TEST_S3_ENDPOINT")
    if not endpoint:
        if os.environ.get("CI"):
            pytest.fail("EXPORT_CENTER_TEST_S3_ENDPOINT is not set: S3 tests must run in CI")
        pytest.skip("EXPORT_CENTER_TEST_S3_ENDPOINT is not set (scripts/s3proxy.sh start)")
    return endpoint


def s3_keys() -> tuple[str, str]:
    """Access key id and secret of the test servers."""
    return (
        os.environ.get("EXPORT_CENTER_TEST_S3_ACCESS_KEY", ACCESS_KEY),
        os.environ.get("EXPORT_CENTER_TEST_S3_SECRET_KEY", SECRET_KEY),
    )


def s3_client(endpoint: str) -> Any:
    """A boto3 client of ``endpoint`` (path-style, SigV4, no retries: tests want the
    first answer)."""
    import boto3
    from botocore.config import Config

    key, secret = s3_keys()
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=2,
        ),
    )


def storage_settings(endpoint: str, bucket: str, **s3: Any) -> dict[str, Any]:
    """The ``storage`` settings group of a process storing into ``bucket``."""
    key, secret = s3_keys()
    return {
        "backend": "s3",
        "s3": {
            "endpoint_url": endpoint,
            "bucket": bucket,
            "region": REGION,
            "path_style": True,
            "access_key_id": key,
            "secret_access_key": secret,
            **s3,
        },
    }


def storage_env(endpoint: str, bucket: str, **s3: str) -> dict[str, str]:
    """The same settings as environment variables; the keys go through the default AWS
    chain (``AWS_ACCESS_KEY_ID`` ...), as in production."""
    key, secret = s3_keys()
    env = {
        "EXPORT_CENTER_STORAGE__BACKEND": "s3",
        "EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL": endpoint,
        "EXPORT_CENTER_STORAGE__S3__BUCKET": bucket,
        "EXPORT_CENTER_STORAGE__S3__REGION": REGION,
        "EXPORT_CENTER_STORAGE__S3__PATH_STYLE": "true",
        "AWS_ACCESS_KEY_ID": key,
        "AWS_SECRET_ACCESS_KEY": secret,
    }
    env.update({f"EXPORT_CENTER_STORAGE__S3__{k.upper()}": v for k, v in s3.items()})
    return env


def new_bucket_name() -> str:
    return f"ec-test-{uuid.uuid4().hex[:16]}"


@dataclass
class BucketContents:
    """What a bucket holds: object keys with sizes, and unfinished uploads' keys."""

    objects: dict[str, int] = field(default_factory=dict)
    uploads: list[str] = field(default_factory=list)


def contents(client: Any, bucket: str) -> BucketContents:
    """Every object and every unfinished multipart upload of ``bucket``."""
    found = BucketContents()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            found.objects[item["Key"]] = item["Size"]
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
        found.uploads += [u["Key"] for u in page.get("Uploads", [])]
    return found


@contextmanager
def fresh_bucket(client: Any) -> Iterator[str]:
    """A new empty bucket, emptied (objects and uploads) and deleted afterwards."""
    name = new_bucket_name()
    client.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        try:
            for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=name):
                for upload in page.get("Uploads", []):
                    client.abort_multipart_upload(
                        Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                for item in page.get("Contents", []):
                    client.delete_object(Bucket=name, Key=item["Key"])
            client.delete_bucket(Bucket=name)
        except Exception:  # noqa: S110 - a server a test stopped cannot be emptied
            pass


class PrivateS3Proxy:
    """An S3Proxy of one test (``scripts/s3proxy.sh`` with its own port and directory):
    the test may stop it and start it again; :meth:`close` stops it for good.

    Args:
        base_dir: its state directory (configuration, buckets, log).
        read_only: refuse every write (S3Proxy's read-only middleware).
    """

    def __init__(self, base_dir: Path, *, read_only: bool = False) -> None:
        self.base_dir = base_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "EXPORT_CENTER_S3PROXY_DIR": str(base_dir),
            "EXPORT_CENTER_S3PROXY_PORT": str(self.port),
            "EXPORT_CENTER_S3PROXY_READ_ONLY": "1" if read_only else "0",
        }

    def _script(self, *args: str) -> None:
        done = subprocess.run(
            ["bash", str(SCRIPT), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]

    def start(self) -> None:
        """Start it (idempotent) and wait until it answers."""
        s3_endpoint()  # skip locally / fail in CI like every S3 test
        self._script("start")

    def stop(self) -> None:
        """Stop it (its buckets stay on disk for the next start)."""
        self._script("stop")

    def make_bucket(self, name: str) -> None:
        """Create bucket ``name`` on the server's disk (works while it is read-only)."""
        (self.base_dir / "data" / name).mkdir(parents=True, exist_ok=True)

    close = stop
