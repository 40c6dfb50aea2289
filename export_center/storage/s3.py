"""S3-compatible object storage: the production adapter of the storage port.

Client: boto3 (the AWS SDK for Python, maintained by AWS, thread-safe clients, SigV4,
presigning, paginators, retries with backoff). It talks to AWS S3 and to S3-compatible
servers (S3Proxy, MinIO, Ceph) through ``endpoint_url`` and path-style addressing.

Writing (:meth:`S3Storage.open_write`): the writer renders into a
:class:`MultipartWriter`, which cuts the bytes into parts of ``part_size_mb`` and
uploads them while the writer goes on (at most ``upload_concurrency`` parts in flight,
so memory stays at ``(upload_concurrency + 1) x part size`` per export). Neither CSV nor
XLSX needs local disk: the XLSX writer streams its ZIP strictly forward. The multipart
upload is started with the first full part; a file smaller than one part is stored with
one PUT at commit. The object carries ``Content-Type`` and ``Content-Disposition`` (RFC
6266 with the RFC 5987/8187 ``filename*``). It is visible only once
``CompleteMultipartUpload`` succeeded, so a half-written file is never listed or served.

Failure paths: :meth:`S3Storage.delete` aborts the upload this process holds for the
key, then every other upload listed under the key (one of a worker that died: the
reconciler calls ``delete`` with the key recorded at claim), then deletes the object.
Every key is new per attempt, so the key alone names the attempt's upload; no upload id
needs to be kept in the database.

Downloads: ``download = redirect`` answers a presigned GET (SigV4 query signature,
``response-content-disposition`` and ``response-content-type``), signed per click;
``download = proxy`` lets the API stream the object with ``Range``.

Errors: every S3 failure (connection refused, timeout, 5xx after botocore's retries,
access denied) becomes :class:`~export_center.errors.StorageError`, a transient export
error; the message names the operation, the key and the S3 error code, never a
credential.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)

from export_center.errors import StorageError
from export_center.filenames import content_disposition
from export_center.settings import S3Settings
from export_center.storage.local import (
    EXPORT_PREFIX,
    PART_PREFIX,
    DownloadAnswer,
    Proxied,
    Redirect,
    StoredObject,
    is_export_key,
    task_no_of_part,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

__all__ = ["BucketCheck", "MultipartWriter", "S3Storage", "make_client"]

log = logging.getLogger(__name__)
_MB = 1024 * 1024
#: Bytes a proxied download reads from S3 per chunk.
_READ_CHUNK = 1 * _MB


def make_client(settings: S3Settings) -> S3Client:
    """A boto3 S3 client for ``settings``.

    Credentials: ``access_key_id`` and ``secret_access_key`` when both are set, else
    boto3's default chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, the shared
    credentials file, a container or instance role). They are never logged.

    Args:
        settings: the ``storage.s3`` settings.

    Returns:
        A thread-safe client (SigV4, path-style when ``path_style``, ``standard`` retries
        with ``max_attempts`` tries per call, the connect and read timeouts in seconds).

    Raises:
        ValueError: the environment holds an access key without its secret (or the
            reverse), said as a sentence instead of botocore's traceback.
    """
    config = Config(
        region_name=settings.region,
        signature_version="s3v4",
        s3={"addressing_style": "path" if settings.path_style else "auto"},
        connect_timeout=settings.connect_timeout_seconds,
        read_timeout=settings.read_timeout_seconds,
        retries={"max_attempts": settings.max_attempts, "mode": "standard"},
        max_pool_connections=settings.max_connections,
        # Checksums only where S3 requires them: several S3-compatible servers refuse
        # the flexible checksums that boto3 adds by default since 1.36.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    keys: dict[str, str] = {}
    if settings.access_key_id is not None and settings.secret_access_key is not None:
        keys = {
            "aws_access_key_id": settings.access_key_id.get_secret_value(),
            "aws_secret_access_key": settings.secret_access_key.get_secret_value(),
        }
    try:
        client: S3Client = boto3.session.Session().client(
            "s3", endpoint_url=settings.endpoint_url, config=config, **keys
        )
    except PartialCredentialsError as exc:
        raise ValueError(
            f"incomplete S3 credentials ({type(exc).__name__}): set both AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY, or neither to use the AWS chain's other sources"
        ) from exc
    return client


def _describe(exc: Exception) -> str:
    """A short reason that a task's owner may read: the S3 error code and message, or
    the client error's class with a plain cause. Never the endpoint, the bucket or a
    credential (botocore's own text names the endpoint URL); the full error stays
    chained to the :class:`StorageError` for the logs."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or str(
            exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        )
        message = error.get("Message") or ""
        return f"{code} {message}".strip()
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return f"{type(exc).__name__}: the object storage does not answer"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return f"{type(exc).__name__}: the object storage credentials are missing or incomplete"
    return type(exc).__name__


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _abort(client: S3Client, bucket: str, key: str, upload_id: str) -> None:
    """Abort one multipart upload; one that is gone already (aborted by someone else,
    or completed) counts as aborted."""
    try:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NoSuchUpload":
            raise


class MultipartWriter(io.RawIOBase):
    """A write-only stream that uploads its bytes as an S3 multipart upload.

    Bytes are buffered until a part is full (``part_size`` bytes), then uploaded on a
    background thread while writing goes on; at most ``concurrency`` parts are in
    flight (a write waits for the oldest beyond that). :meth:`finish` uploads the rest
    and completes the upload; :meth:`abort` stops and aborts it. ``close`` only ends
    writing (the storage commits or deletes), so the writers may close their stream.

    Args:
        client: the S3 client.
        bucket: the bucket.
        key: the object key (checked by the storage).
        content_type: ``Content-Type`` stored on the object.
        disposition: ``Content-Disposition`` stored on the object.
        part_size: bytes per part (at least 5 MiB, S3's minimum except for the last).
        concurrency: parts uploaded at once (at least 1).

    Raises:
        StorageError: from ``write`` or ``finish`` when S3 refuses or does not answer.
    """

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        key: str,
        *,
        content_type: str,
        disposition: str,
        part_size: int,
        concurrency: int,
    ) -> None:
        super().__init__()
        self._client = client
        self._bucket = bucket
        self.key = key
        self._content_type = content_type
        self._disposition = disposition
        self._part_size = part_size
        self._concurrency = max(1, concurrency)
        self._buffer = bytearray()
        self._pool: ThreadPoolExecutor | None = None
        self._in_flight: list[Future[dict[str, Any]]] = []
        self._parts: list[dict[str, Any]] = []
        self.upload_id: str | None = None
        self.size = 0
        self._done = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        """Buffer ``data`` (bytes-like); upload a part once the buffer holds one.

        Returns:
            The number of bytes taken (all of them).

        Raises:
            StorageError: a part upload failed, or the writer was finished or aborted.
        """
        if self._done:
            raise StorageError(f"write to a finished or aborted upload of {self.key}")
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        self._buffer += data
        self.size += size
        if len(self._buffer) >= self._part_size:
            self._send_part()
        return size

    def _send_part(self) -> None:
        """Upload the buffer as the next part on the pool (starting the upload first)."""
        if self.upload_id is None:
            self.upload_id = self._call(
                "start the upload of",
                lambda: self._client.create_multipart_upload(
                    Bucket=self._bucket,
                    Key=self.key,
                    ContentType=self._content_type,
                    ContentDisposition=self._disposition,
                )["UploadId"],
            )
            self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="s3-part")
        while len(self._in_flight) >= self._concurrency:
            self._parts.append(self._wait(self._in_flight.pop(0)))
        body = bytes(self._buffer)
        self._buffer.clear()
        number = len(self._parts) + len(self._in_flight) + 1
        assert self._pool is not None
        self._in_flight.append(self._pool.submit(self._upload_part, number, body))

    def _upload_part(self, number: int, body: bytes) -> dict[str, Any]:
        assert self.upload_id is not None
        answer = self._client.upload_part(
            Bucket=self._bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=body
        )
        return {"PartNumber": number, "ETag": answer["ETag"]}

    def _wait(self, future: Future[dict[str, Any]]) -> dict[str, Any]:
        try:
            return future.result()
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"cannot upload a part of {self.key}: {_describe(exc)}") from exc

    def _call(self, what: str, action: Any) -> Any:
        try:
            return action()
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"cannot {what} {self.key}: {_describe(exc)}") from exc

    def finish(self) -> int:
        """Upload what is left and complete the upload (or PUT a small file whole).

        Returns:
            The object's size in bytes.

        Raises:
            StorageError: S3 refused or did not answer; the caller deletes the key.
        """
        if self._done:
            raise StorageError(f"the upload of {self.key} was already finished or aborted")
        if self.upload_id is None:
            body = bytes(self._buffer)
            self._call(
                "store",
                lambda: self._client.put_object(
                    Bucket=self._bucket,
                    Key=self.key,
                    Body=body,
                    ContentType=self._content_type,
                    ContentDisposition=self._disposition,
                ),
            )
        else:
            if self._buffer:
                self._send_part()
            while self._in_flight:
                self._parts.append(self._wait(self._in_flight.pop(0)))
            parts: list[CompletedPartTypeDef] = [
                {"PartNumber": int(part["PartNumber"]), "ETag": str(part["ETag"])}
                for part in sorted(self._parts, key=lambda part: int(part["PartNumber"]))
            ]
            upload_id = self.upload_id
            self._call(
                "complete the upload of",
                lambda: self._client.complete_multipart_upload(
                    Bucket=self._bucket,
                    Key=self.key,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                ),
            )
        self._done = True
        self._shutdown_pool()
        return self.size

    def abort(self) -> None:
        """Stop uploading and abort the multipart upload; idempotent.

        Parts not started are cancelled and parts in flight are waited for (an abort
        that overtakes an upload could leave that part behind).

        Raises:
            StorageError: S3 did not take the abort (the reconciler's scan retries it).
        """
        self._done = True
        self._buffer = bytearray()
        for future in self._in_flight:
            future.cancel()
        for future in self._in_flight:
            if not future.cancelled():
                with contextlib.suppress(Exception):  # the part goes with the upload
                    future.result()
        self._in_flight.clear()
        self._shutdown_pool()
        upload_id, self.upload_id = self.upload_id, None
        if upload_id is not None:
            self._call(
                "abort the upload of",
                lambda: _abort(self._client, self._bucket, self.key, upload_id),
            )

    def _shutdown_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


@dataclass(frozen=True, slots=True)
class BucketCheck:
    """What :meth:`S3Storage.check_bucket` found: ok, and one sentence (the fix if not)."""

    ok: bool
    message: str


class S3Storage:
    """:class:`~export_center.storage.Storage` on an S3-compatible bucket.

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

    @staticmethod
    def _check(key: str) -> str:
        if not is_export_key(key):
            raise StorageError(f"refused object key {key!r}: not made by this server")
        return key

    def _fail(self, what: str, key: str, exc: Exception) -> StorageError:
        return StorageError(f"cannot {what} {key}: {_describe(exc)}")

    # ------------------------------------------------------------------ writing

    def open_write(self, key: str, *, content_type: str, content_disposition: str) -> BinaryIO:
        """Start the temporary object of ``key``: a :class:`MultipartWriter`.

        Raises:
            StorageError: the key is not a server-made key, or is open already here.
        """
        self._check(key)
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
            writer = self._open.get(self._check(key))
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
        self._check(key)
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
                _abort(self.client, self.bucket, key, upload_id)
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
            return dict(self.client.head_object(Bucket=self.bucket, Key=self._check(key)))
        except ClientError as exc:
            if _status(exc) == 404:
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
        self._check(key)
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

    @staticmethod
    def _check_part(key: str) -> str:
        if task_no_of_part(key) is None:
            raise StorageError(f"refused part key {key!r}: not made by this server")
        return key

    def put_part(self, key: str, data: bytes) -> None:
        """Store one segment with a single PUT (S3 replaces an object whole).

        Raises:
            StorageError: the key is not a part key, or S3 refused or did not answer.
        """
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._check_part(key), Body=data)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail("store", key, exc) from exc

    def read_part(self, key: str) -> Iterator[bytes]:
        """The segment's bytes in chunks.

        Raises:
            StorageError: the segment is missing, or S3 refused or did not answer.
        """
        return self._read(self._check_part(key), 0)

    def delete_parts(self, task_no: str) -> int:
        """Delete every segment under ``parts/{task_no}/`` (1,000 keys per request).

        Raises:
            StorageError: S3 refused or did not answer.
        """
        prefix = f"{PART_PREFIX}{task_no}/"
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
            status = _status(exc)
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
                    f"{where} refuses these credentials ({_describe(exc)}); fix "
                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the storage.s3 keys) "
                    "or the bucket policy",
                )
            return BucketCheck(False, f"{where} answers {_describe(exc)}; check the S3 service")
        except (NoCredentialsError, PartialCredentialsError) as exc:
            return BucketCheck(
                False,
                f"no usable credentials for {where} ({type(exc).__name__}); set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile of the AWS chain)",
            )
        except BotoCoreError as exc:
            return BucketCheck(
                False,
                f"{where} does not answer ({_describe(exc)}); start it or fix "
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
                f"{where} is not writable ({_describe(exc)}); allow s3:PutObject, "
                "s3:DeleteObject, s3:AbortMultipartUpload and s3:ListBucketMultipartUploads "
                "on it for these credentials",
            )
        return BucketCheck(True, f"{where} writable (object and multipart upload)")
