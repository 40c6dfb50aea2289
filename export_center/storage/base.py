"""The storage port: what every file storage offers, and the answers it gives.

A file is written to a temporary object and becomes visible under its key only when
:meth:`Storage.commit` succeeds; every failure path calls :meth:`Storage.delete`, which
removes the temporary object and the object. Shard parts of a sharded export are
stored as whole segments (:meth:`Storage.put_part`) until the file is assembled.

Adapters (:mod:`export_center.storage.local`, :mod:`export_center.storage.s3`) satisfy
:class:`Storage` structurally; the composition root
(:func:`export_center.runtime.open_storage`) picks one. They answer a download with a
:data:`DownloadAnswer`: a local file the API serves itself, a presigned URL the API
redirects to, or a ranged reader the API streams from.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Protocol

from export_center.errors import StorageError, StorageFull
from export_center.storage.keys import EXPORT_PREFIX

__all__ = [
    "reported_space",
    "FULL_ERRNOS",
    "storage_error",
    "DownloadAnswer",
    "LocalFile",
    "Proxied",
    "Redirect",
    "Space",
    "Storage",
    "StoredObject",
]


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

    def is_low(self, low_space_bytes: int) -> bool:
        """True when fewer than ``low_space_bytes`` are free (``storage.low_space_mb`` in
        bytes); a mark of 0 is never low."""
        return low_space_bytes > 0 and self.free_bytes < low_space_bytes


def reported_space(storage: Storage) -> Space | None:
    """What the storage reports about its room (metrics, ``/readyz``): its
    :meth:`Storage.space`, None for object storage, and ``Space(0, 0)`` for a volume that
    cannot be read (unmounted, permission lost), so that low space is reported rather
    than the figures vanishing."""
    try:
        return storage.space()
    except OSError:
        return Space(free_bytes=0, total_bytes=0)


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
            chunks; raises :class:`~export_center.errors.StorageError` when the store
            does not answer.
    """

    size: int
    etag: str
    read: Callable[[int, int], Iterator[bytes]]


DownloadAnswer = LocalFile | Redirect | Proxied
"""What :meth:`Storage.download` answers: serve a file, redirect, or stream."""


class Storage(Protocol):
    """Where export files live.

    Every method raises :class:`~export_center.errors.StorageError` (transient: the
    attempt retries) when the store cannot do it, and refuses with it a key this server
    did not make (:mod:`export_center.storage.keys`).
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
        """Store one segment of a shard part under ``key`` (made by
        :func:`~export_center.storage.keys.part_key`), whole or not at all; a segment
        stored again under the same key replaces it."""

    def read_part(self, key: str) -> Iterator[bytes]:
        """The bytes of a stored segment, in chunks of at most 1 MiB."""

    def delete_parts(self, task_no: str) -> int:
        """Delete every segment of the task's shard parts; return how many."""

    def space(self) -> Space | None:
        """Free and total bytes of the volume, or None when the store has no fixed size
        (object storage)."""


FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""``errno`` values that mean the storage has no space left."""


def storage_error(exc: OSError, doing: str) -> StorageError:
    """The export error of a storage ``OSError``.

    Args:
        exc: what the storage raised.
        doing: what the attempt was doing, e.g. ``"cannot assemble the file"``.

    Returns:
        :class:`StorageFull` ("<doing>: no space left on the file storage (...)") when
        ``exc.errno`` is ENOSPC or EDQUOT, else :class:`StorageError` ("<doing>: ...").
    """
    if exc.errno in FULL_ERRNOS:
        return StorageFull(f"{doing}: no space left on the file storage ({exc.strerror})")
    return StorageError(f"{doing}: {exc.strerror or exc}")
