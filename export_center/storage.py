"""File storage port and the local-directory adapter (DESIGN.md "Files").

Object keys are made only by the server:
``exports/{tenant}/{yyyy}/{mm}/{task_no}/{uuid}.{ext}`` (:func:`new_object_key`); no
request can name a path (CASES E33), and a tenant id that is not a plain name is
replaced by a digest (:func:`tenant_segment`). Keys of the earlier layout without the
tenant (``exports/{yyyy}/{mm}/{task_no}/{uuid}.{ext}``) are still read, served, expired
and scanned, so files made before the change stay usable.

A file is written to a temporary object and becomes visible under its key only when
:meth:`Storage.commit` succeeds; every failure path calls :meth:`Storage.delete`, which
removes the temporary object and the object:

* :class:`LocalStorage` (the embedded default): the temporary object is
  ``<key>.part`` next to the file, renamed at commit.
* :class:`export_center.storage_s3.S3Storage` (production): the temporary object is an
  S3 multipart upload, completed at commit and aborted by ``delete``.

Adapters answer a download with a :data:`DownloadAnswer`: a local file the API serves
itself, a presigned URL the API redirects to, or a ranged reader the API streams from.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from export_center.attempt.stream_guard import storage_error
from export_center.errors import StorageError

if TYPE_CHECKING:
    from export_center.settings import Settings

__all__ = [
    "EXPORT_PREFIX",
    "PART_PREFIX",
    "DownloadAnswer",
    "LocalFile",
    "LocalStorage",
    "Proxied",
    "Redirect",
    "Storage",
    "Space",
    "StoredObject",
    "file_extension",
    "is_export_key",
    "new_object_key",
    "open_storage",
    "part_key",
    "task_no_of_part",
    "task_no_of_key",
    "tenant_segment",
]

#: Every export file lives under this prefix (the orphan scan looks only here).
EXPORT_PREFIX = "exports/"
_TASK_NO = r"exp_[0-9A-Z]{26}"
_KEY = re.compile(
    rf"^exports/(?:[A-Za-z0-9_-]{{1,64}}/|~[0-9a-f]{{32}}/)?\d{{4}}/\d{{2}}/"
    rf"({_TASK_NO})/[0-9a-f]{{32}}\.(csv|xlsx)$"
)
#: Shard parts of sharded exports live under this prefix until the file is finalized.
PART_PREFIX = "parts/"
_PART_KEY = re.compile(rf"^parts/({_TASK_NO})/\d{{5}}/\d{{6}}\.v\d{{1,9}}$")
_PLAIN_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def file_extension(task_format: str) -> str:
    """The file extension of a task's format: ``xlsx`` for XLSX, ``csv`` otherwise."""
    return "xlsx" if str(task_format).upper() == "XLSX" else "csv"


def tenant_segment(tenant_id: str) -> str:
    """The key segment of a tenant: the id itself when it is a plain name (1-64 of
    ``A-Z a-z 0-9 _ -``), else ``~`` and the first 32 hex digits of its SHA-256.

    Tenant ids come from verified tokens, yet a key must never carry a path separator,
    a dot segment or a character an object store treats specially; the ``~`` keeps
    digests apart from plain names.
    """
    if _PLAIN_TENANT.match(tenant_id):
        return tenant_id
    return "~" + hashlib.sha256(tenant_id.encode("utf-8")).hexdigest()[:32]


def new_object_key(
    task_no: str, extension: str, *, tenant: str, now: datetime | None = None
) -> str:
    """Return a fresh server-made key for one attempt's file.

    Args:
        task_no: public task id (``exp_`` + 26 ULID characters).
        extension: ``csv`` or ``xlsx``.
        tenant: the task's tenant id (made safe by :func:`tenant_segment`).
        now: the moment naming the year and month folders (default: now, UTC).

    Returns:
        ``exports/{tenant}/{yyyy}/{mm}/{task_no}/{32 hex digits}.{extension}``; every
        call returns a new key, so two attempts never share one.
    """
    now = now or datetime.now(UTC)
    segment = tenant_segment(tenant)
    return f"{EXPORT_PREFIX}{segment}/{now:%Y}/{now:%m}/{task_no}/{uuid.uuid4().hex}.{extension}"


def part_key(task_no: str, shard_no: int, segment_no: int, version: int) -> str:
    """``parts/{task_no}/{shard:05d}/{segment:06d}.v{version}``: one stored segment of a
    shard's part, written by attempt ``version`` (so that an attempt that lost its lease
    can never overwrite a segment its successor stored)."""
    if not re.fullmatch(_TASK_NO, task_no):
        raise StorageError(f"refused task number {task_no!r} for a part key")
    return f"{PART_PREFIX}{task_no}/{shard_no:05d}/{segment_no:06d}.v{version}"


def task_no_of_part(key: str) -> str | None:
    """The task number of a part key (None when ``key`` is not one)."""
    match = _PART_KEY.match(key)
    return match.group(1) if match else None


def is_export_key(key: str) -> bool:
    """True when ``key`` has the shape this server makes (either layout)."""
    return _KEY.match(key) is not None


def task_no_of_key(key: str) -> str | None:
    """The task id inside a server-made key, or None for any other key."""
    match = _KEY.match(key)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object found by :meth:`Storage.list`.

    Attributes:
        key: the object key (of the file the temporary object will become).
        size: bytes stored so far.
        modified_at: last change (local files) or start of the upload (S3), UTC.
        temporary: True for a temporary object (``.part`` file, S3 multipart upload).
    """

    key: str
    size: int
    modified_at: datetime
    temporary: bool = False


@dataclass(frozen=True, slots=True)
class Space:
    """Room on a storage that has a bounded size (a local or shared directory).

    Attributes:
        free_bytes: bytes an export may still write.
        total_bytes: the size of the volume.
    """

    free_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class LocalFile:
    """Download answer: the API serves this file itself (Range handled by Starlette)."""

    path: Path


@dataclass(frozen=True, slots=True)
class Redirect:
    """Download answer: the client is redirected to ``url`` (a presigned GET)."""

    url: str


@dataclass(frozen=True, slots=True)
class Proxied:
    """Download answer: the API streams the object, whole or one byte range.

    Attributes:
        size: the object's size in bytes.
        etag: the object's entity tag (quoted), for ``ETag`` and ``If-Range``.
        read: ``read(first, last)`` yields the bytes ``first..last`` (inclusive) in
            chunks; raises :class:`StorageError` when the store does not answer.
    """

    size: int
    etag: str
    read: Callable[[int, int], Iterator[bytes]]


DownloadAnswer = LocalFile | Redirect | Proxied
"""What :meth:`Storage.download` answers: serve a file, redirect, or stream."""


class Storage(Protocol):
    """Where export files live.

    Every method raises :class:`StorageError` (transient: the attempt retries) when the
    store cannot do it, and refuses with it a key this server did not make.
    """

    #: ``local`` or ``s3`` (logs, doctor, bench).
    kind: str

    def open_write(self, key: str, *, content_type: str, content_disposition: str) -> BinaryIO:
        """Open the temporary object of ``key`` for writing (binary, write-only, forward).

        ``content_type`` and ``content_disposition`` are stored on the object where the
        store keeps headers (S3); a local file ignores them.
        """

    def commit(self, key: str) -> int:
        """Make the temporary object visible under ``key``; return its size in bytes."""

    def delete(self, key: str) -> None:
        """Delete the object and its temporary object (an S3 multipart upload is
        aborted, whichever process started it); no error if absent."""

    def exists(self, key: str) -> bool:
        """True when a committed object exists under ``key``."""

    def size(self, key: str) -> int:
        """Size in bytes of the committed object."""

    def download(
        self, key: str, *, file_name: str, content_type: str, seconds: int
    ) -> DownloadAnswer:
        """How the API serves the committed object ``key`` to one click.

        Args:
            file_name: the download name (for a presigned ``Content-Disposition``).
            content_type: the file's MIME type.
            seconds: lifetime of a presigned URL (at least 1).
        """

    def list(self, prefix: str = EXPORT_PREFIX) -> Iterator[StoredObject]:
        """Committed and temporary objects under ``prefix``, read in bounded pages."""

    def put_part(self, key: str, data: bytes) -> None:
        """Store one segment of a shard part under ``key`` (made by :func:`part_key`),
        whole or not at all; a segment stored again under the same key replaces it."""

    def read_part(self, key: str) -> Iterator[bytes]:
        """The bytes of a stored segment, in chunks of at most 1 MiB."""

    def delete_parts(self, task_no: str) -> int:
        """Delete every segment of the task's shard parts; return how many."""

    def space(self) -> Space | None:
        """Free and total bytes of the volume, or None when the store has no fixed size
        (object storage)."""


class LocalStorage:
    """:class:`Storage` on a local or shared directory.

    Args:
        root: directory that holds the ``exports/`` tree.
    """

    kind = "local"

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        _private(self.root)

    def _path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise StorageError(f"refused object key {key!r}: not made by this server")
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):  # defence in depth next to the pattern
            raise StorageError(f"refused object key {key!r}: outside the storage root")
        return path

    def open_write(
        self, key: str, *, content_type: str = "", content_disposition: str = ""
    ) -> BinaryIO:
        path = self._path(key)
        try:
            _private(path.parent)
            return open(  # noqa: SIM115 - the caller closes it
                path.with_name(path.name + ".part"), "wb", buffering=1 << 20, opener=_owner_only
            )
        except OSError as exc:
            raise storage_error(exc, f"cannot open {key}") from exc

    def commit(self, key: str) -> int:
        path = self._path(key)
        part = path.with_name(path.name + ".part")
        try:
            with open(part, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(part, path)
            return path.stat().st_size
        except OSError as exc:
            raise storage_error(exc, f"cannot store {key}") from exc

    def delete(self, key: str) -> None:
        path = self._path(key)
        for candidate in (path, path.with_name(path.name + ".part")):
            try:
                candidate.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StorageError(f"cannot delete {key}: {exc.strerror}") from exc
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # the per-task folder, when now empty

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        return self._path(key).stat().st_size

    def download(
        self, key: str, *, file_name: str, content_type: str, seconds: int
    ) -> DownloadAnswer:
        return LocalFile(self._path(key))

    def list(self, prefix: str = EXPORT_PREFIX) -> Iterator[StoredObject]:
        base = self.root / prefix
        if not base.exists():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                temporary = key.endswith(".part")
                if temporary:
                    key = key[: -len(".part")]
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue
                modified = datetime.fromtimestamp(st.st_mtime, UTC)
                yield StoredObject(key, st.st_size, modified, temporary)

    # ------------------------------------------------------------------ shard parts

    def _part_path(self, key: str) -> Path:
        if not _PART_KEY.match(key):
            raise StorageError(f"refused part key {key!r}: not made by this server")
        return self.root / key

    def put_part(self, key: str, data: bytes) -> None:
        path = self._part_path(key)
        temporary = path.with_name(path.name + ".tmp")
        try:
            _private(path.parent)
            with open(temporary, "wb", opener=_owner_only) as fh:
                fh.write(data)
            os.replace(temporary, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise storage_error(exc, f"cannot store {key}") from exc

    def read_part(self, key: str) -> Iterator[bytes]:
        path = self._part_path(key)
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed by the generator
        except OSError as exc:
            raise StorageError(f"cannot read {key}: {exc.strerror}") from exc

        def chunks() -> Iterator[bytes]:
            with fh:
                while chunk := fh.read(_PART_CHUNK):
                    yield chunk

        return chunks()

    def delete_parts(self, task_no: str) -> int:
        if not re.fullmatch(_TASK_NO, task_no):
            raise StorageError(f"refused task number {task_no!r}")
        base = self.root / PART_PREFIX / task_no
        count = 0
        for dirpath, dirs, files in os.walk(base, topdown=False):
            for name in files:
                try:
                    (Path(dirpath) / name).unlink()
                    count += 1
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise StorageError(f"cannot delete parts of {task_no}: {exc.strerror}") from exc
            for name in dirs:
                with contextlib.suppress(OSError):
                    (Path(dirpath) / name).rmdir()
        with contextlib.suppress(OSError):
            base.rmdir()
        return count

    def space(self) -> Space | None:
        """Free and total bytes of the volume holding the root (``statvfs``: what an
        unprivileged writer may use)."""
        usage = shutil.disk_usage(self.root)
        return Space(free_bytes=usage.free, total_bytes=usage.total)


_PART_CHUNK = 1 << 20
"""Bytes per chunk when a segment is read back."""


def _owner_only(path: str, flags: int) -> int:
    """``open``'s opener of export files: readable and writable by their owner only
    (``0600``): a file holds one tenant's data."""
    return os.open(path, flags, 0o600)


def _private(directory: Path) -> None:
    """Make ``directory`` and its missing parents under the storage, ``0700``."""
    if directory.is_dir():
        return
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for created in reversed(missing):
        created.mkdir(mode=0o700, exist_ok=True)
        created.chmod(0o700)


def open_storage(settings: Settings) -> Storage:
    """The storage the settings choose: ``storage.backend`` ``local`` (a directory under
    the data dir) or ``s3`` (:class:`export_center.storage_s3.S3Storage`; needs boto3,
    the ``s3`` extra).

    Raises:
        ValueError: ``s3`` without a bucket.
    """
    if settings.storage.backend == "s3":
        from export_center.storage_s3 import S3Storage

        return S3Storage(settings.storage.s3)
    return LocalStorage(settings.files_dir)
