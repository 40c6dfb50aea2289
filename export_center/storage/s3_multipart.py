"""Streaming multipart upload: how the S3 adapter writes a file without local disk.

The writer renders into a :class:`MultipartWriter`, which cuts the bytes into parts of
``part_size_mb`` and uploads them while the writer goes on (at most
``upload_concurrency`` parts in flight, so memory stays at ``(upload_concurrency + 1) x
part size`` per export). Neither CSV nor XLSX needs local disk: the XLSX writer streams
its ZIP strictly forward. The multipart upload is started with the first full part; a
file smaller than one part is stored with one PUT at :meth:`MultipartWriter.finish`.
The object is visible only once ``CompleteMultipartUpload`` succeeded, so a
half-written file is never listed or served; :meth:`MultipartWriter.abort` (and
:func:`abort_upload` for an upload of another process) removes the parts.
"""

from __future__ import annotations

import contextlib
import io
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from export_center.errors import StorageError
from export_center.storage.s3_client import describe_error

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

__all__ = ["MultipartWriter", "abort_upload"]


def abort_upload(client: S3Client, bucket: str, key: str, upload_id: str) -> None:
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
            raise StorageError(
                f"cannot upload a part of {self.key}: {describe_error(exc)}"
            ) from exc

    def _call(self, what: str, action: Any) -> Any:
        try:
            return action()
        except (BotoCoreError, ClientError) as exc:
            raise StorageError(f"cannot {what} {self.key}: {describe_error(exc)}") from exc

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
                lambda: abort_upload(self._client, self._bucket, self.key, upload_id),
            )

    def _shutdown_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
