"""S3-compatible object storage: the production adapter of the storage port.

Writing (:meth:`S3Storage.open_write`) streams into a multipart upload
(:class:`~export_center.storage.s3_multipart.MultipartWriter`) that is completed at
:meth:`S3Storage.commit`. The object carries ``Content-Type`` and
``Content-Disposition`` (RFC 6266 with the RFC 5987/8187 ``filename*``).

Failure paths: :meth:`S3Storage.delete` aborts the upload this process holds for the
key, then every other upload listed under the key (one of a worker that died: the
reconciler calls ``delete`` with the key recorded at claim), then deletes the object.
Every key is new per attempt, so the key alone names the attempt's upload; no upload id
needs to be kept in the database.

Downloads: ``download = redirect`` answers a presigned GET (SigV4 query signature,
``response-content-disposition`` and ``response-content-type``), signed per click;
``download = proxy`` lets the API stream the object with ``Range``.

Errors: every S3 failure becomes :class:`~export_center.errors.StorageError`, a
transient export error (:mod:`export_center.storage.s3_client`), never naming a
credential. The client is boto3 (:func:`~export_center.storage.s3_client.make_client`).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)

from export_center.errors import StorageError
from export_center.filenames import content_disposition
from export_center.settings import S3Settings
from export_center.storage.base import DownloadAnswer, Proxied, Redirect, StoredObject
from export_center.storage.keys import (
    EXPORT_PREFIX,
    PART_PREFIX,
    check_export_key,
    check_part_key,
    check_task_no,
)
from export_center.storage.s3_client import describe_error, http_status, make_client
from export_center.storage.s3_multipart import MultipartWriter, abort_upload

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["BucketCheck", "S3Storage"]

_MB = 1024 * 1024
#: Bytes a proxied download reads from S3 per chunk.
_READ_CHUNK = 1 * _MB


@dataclass(frozen=True, slots=True)
class BucketCheck:
    """What :meth:`S3Storage.check_bucket` found: ok, and one sentence (the fix if not)."""

    ok: bool
    message: str


class S3Storage:
    """:class:`~export_center.storage.base.Storage` on an S3-compatible bucket.

    Args:
        settings: the ``storage.s3`` settings (bucket required).
        client: an S3 client (default: :func:`make_client`).

    Raises:
        ValueError: no bucket is set, or the credentials are incomplete.
    """

    kind = "s3"

    def __init__(self, settings: S3Settings, *, client: S3Client | None = None) -> None:
        if not settings.bucket:
            raise ValueError("EXPORT_CENTER_STORAGE__S3__BUCKET must be set for S3 storage")
        self.settings = settings
        self.bucket = settings.bucket
        self.client = client or make_client(settings)
        self._open: dict[str, MultipartWriter] = {}
        self._lock = threading.Lock()
        #: Keys per listing request (S3 answers at most 1,000).
        self.page_size = 1000

    def _fail(self, what: str, key: str, exc: Exception) -> StorageError:
        return StorageError(f"cannot {what} {key}: {describe_error(exc)}")

    # ------------------------------------------------------------------ writing

    def open_write(self, key: str, *, content_type: str, content_disposition: str) -> BinaryIO:
        """Start the temporary object of ``key``: a :class:`MultipartWriter`.

        Raises:
            StorageError: the key is not a server-made key, or is open already here.
        """
        check_export_key(key)
        writer = MultipartWriter(
            self.client,
            self.bucket,
            key,
            content_type=content_type,
            disposition=content_disposition,
            part_size=self.settings.part_size_mb * _MB,
            concurrency=self.settings.upload_concurrency,
        )
        with self._lock:
            if key in self._open:
                raise StorageError(f"an upload of {key} is already open in this process")
            self._open[key] = writer
        return writer  # type: ignore[return-value]  # a RawIOBase is a binary stream

    def commit(self, key: str) -> int:
        """Complete the upload of ``key``; the object is visible from now on.

        Returns:
            The object's size in bytes.

        Raises:
            StorageError: no upload of ``key`` is open here, or S3 refused it (the
                upload stays open for :meth:`delete` to abort).
        """
        with self._lock:
            writer = self._open.get(check_export_key(key))
        if writer is None:
            raise StorageError(f"no upload of {key} is open in this process")
        size = writer.finish()
        with self._lock:
            self._open.pop(key, None)
        return size

    def delete(self, key: str) -> None:
        """Abort every upload of ``key`` (this process's first), then delete the object.

        Raises:
            StorageError: S3 refused or did not answer (after trying every step).
        """
        check_export_key(key)
        with self._lock:
            writer = self._open.pop(key, None)
        errors: list[StorageError] = []
        if writer is not None:
            try:
                writer.abort()
            except StorageError as exc:
                errors.append(exc)
        try:
            for upload_id in self._upload_ids(key):
                abort_upload(self.client, self.bucket, key, upload_id)
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            errors.append(self._fail("delete", key, exc))
        if errors:
            raise errors[-1]

    def _upload_ids(self, key: str) -> list[str]:
        """Ids of the unfinished uploads of exactly ``key`` (any process's)."""
        ids = []
        pages = self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=key
        )
        for page in pages:
            for upload in page.get("Uploads", []):
                if upload.get("Key") == key and upload.get("UploadId"):
                    ids.append(upload["UploadId"])
        return ids

    # ------------------------------------------------------------------ reading

    def _head(self, key: str) -> dict[str, Any] | None:
        try:
            return dict(self.client.head_object(Bucket=self.bucket, Key=check_export_key(key)))
        except ClientError as exc:
            if http_status(exc) == 404:
                return None
            raise self._fail("read", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fail("read", key, exc) from exc

    def exists(self, key: str) -> bool:
        """True when the object ``key`` exists (an unfinished upload does not count)."""
        return self._head(key) is not None

    def size(self, key: str) -> int:
        """Size in bytes of the object ``key``.

        Raises:
            StorageError: it does not exist, or S3 does not answer.
        """
        head = self._head(key)
        if head is None:
            raise StorageError(f"{key} is not in bucket {self.bucket}")
        return int(head["ContentLength"])

    def download(
        self, key: str, *, file_name: str, content_type: str, seconds: int
    ) -> DownloadAnswer:
        """A presigned GET valid ``seconds`` (``download = redirect``), or a ranged
        reader for the API to stream (``download = proxy``).

        Raises:
            StorageError: (proxy) the object is missing or S3 does not answer.
        """
        check_export_key(key)
        if self.settings.download == "redirect":
            url = self.client.generate_presigned_url(
                "get_object",
                Params={
                    "Bucket": self.bucket,
                    "Key": key,
                    "ResponseContentDisposition": content_disposition(file_name),
                    "ResponseContentType": content_type,
                    "ResponseCacheControl": "no-store",
                },
                ExpiresIn=max(1, int(seconds)),
            )
            return Redirect(url)
        head = self._head(key)
        if head is None:
            raise StorageError(f"{key} is not in bucket {self.bucket}")
        return Proxied(
            size=int(head["ContentLength"]),
            etag=str(head.get("ETag") or '""'),
            read=lambda first, last: self._read(key, first, last),
        )

    def _read(self, key: str, first: int, last: int | None = None) -> Iterator[bytes]:
        """The object's bytes ``first..last`` (to its end when ``last`` is None), in
        chunks; the GET is sent at once, so a missing object raises here.

        Raises:
            StorageError: S3 refused or did not answer.
        """
        span = f"bytes={first}-{'' if last is None else last}"
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=key, Range=span)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail("read", key, exc) from exc
        body = answer["Body"]

        def chunks() -> Iterator[bytes]:
            try:
                yield from body.iter_chunks(_READ_CHUNK)
            finally:
                body.close()

        return chunks()

    def list(self, prefix: str = EXPORT_PREFIX) -> Iterator[StoredObject]:
        """Objects, then unfinished uploads, under ``prefix``, in pages of ``page_size``.

        Raises:
            StorageError: S3 refused or did not answer.
        """
        try:
            objects = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": self.page_size}
            )
            for page in objects:
                for item in page.get("Contents", []):
                    yield StoredObject(item["Key"], int(item["Size"]), item["LastModified"])
            uploads = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": self.page_size}
            )
            for page in uploads:
                for upload in page.get("Uploads", []):
                    yield StoredObject(upload["Key"], 0, upload["Initiated"], temporary=True)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail("list", prefix, exc) from exc

    # ------------------------------------------------------------------ shard parts

    def put_part(self, key: str, data: bytes) -> None:
        """Store one segment with a single PUT (S3 replaces an object whole).

        Raises:
            StorageError: the key is not a part key, or S3 refused or did not answer.
        """
        try:
            self.client.put_object(Bucket=self.bucket, Key=check_part_key(key), Body=data)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail("store", key, exc) from exc

    def read_part(self, key: str) -> Iterator[bytes]:
        """The segment's bytes in chunks.

        Raises:
            StorageError: the key is not a part key, the segment is missing, or S3
                refused or did not answer.
        """
        return self._read(check_part_key(key), 0)

    def delete_parts(self, task_no: str) -> int:
        """Delete every segment under ``parts/{task_no}/`` (1,000 keys per request).

        Raises:
            StorageError: ``task_no`` is not a task id, or S3 refused or did not answer.
        """
        prefix = f"{PART_PREFIX}{check_task_no(task_no)}/"
        keys = [item.key for item in self.list(prefix) if not item.temporary]
        try:
            for start in range(0, len(keys), 1000):
                chunk = keys[start : start + 1000]
                self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
                )
        except (BotoCoreError, ClientError) as exc:
            raise self._fail("delete", prefix, exc) from exc
        return len(keys)

    def space(self) -> None:
        """None: a bucket has no fixed size, so no free-space figure."""
        return None

    # ------------------------------------------------------------------ doctor

    def check_bucket(self) -> BucketCheck:
        """Check that the bucket exists and takes writes, uploads and deletes.

        Writes one probe object outside ``exports/`` (``doctor/<uuid>``), deletes it,
        and starts and aborts one multipart upload.

        Returns:
            ok with where it is, or not ok with a sentence naming the fix.
        """
        where = f"bucket {self.bucket} at {self.settings.endpoint_url or 'AWS S3'}"
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            status = http_status(exc)
            if status == 404:
                return BucketCheck(
                    False,
                    f"{where} does not exist; create it (for the test server: "
                    f"`bash scripts/s3proxy.sh bucket {self.bucket}`) or fix "
                    "EXPORT_CENTER_STORAGE__S3__BUCKET",
                )
            if status in (401, 403):
                return BucketCheck(
                    False,
                    f"{where} refuses these credentials ({describe_error(exc)}); fix "
                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the storage.s3 keys) "
                    "or the bucket policy",
                )
            return BucketCheck(
                False, f"{where} answers {describe_error(exc)}; check the S3 service"
            )
        except (NoCredentialsError, PartialCredentialsError) as exc:
            return BucketCheck(
                False,
                f"no usable credentials for {where} ({type(exc).__name__}); set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile of the AWS chain)",
            )
        except BotoCoreError as exc:
            return BucketCheck(
                False,
                f"{where} does not answer ({describe_error(exc)}); start it or fix "
                "EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL",
            )
        probe = f"doctor/{uuid.uuid4().hex}"
        try:
            self.client.put_object(Bucket=self.bucket, Key=probe, Body=b"ok")
            self.client.delete_object(Bucket=self.bucket, Key=probe)
            upload = self.client.create_multipart_upload(Bucket=self.bucket, Key=probe)
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=probe, UploadId=upload["UploadId"]
            )
        except (BotoCoreError, ClientError) as exc:
            return BucketCheck(
                False,
                f"{where} is not writable ({describe_error(exc)}); allow s3:PutObject, "
                "s3:DeleteObject, s3:AbortMultipartUpload and s3:ListBucketMultipartUploads "
                "on it for these credentials",
            )
        return BucketCheck(True, f"{where} writable (object and multipart upload)")
