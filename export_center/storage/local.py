"""The local-directory adapter of the storage port (the embedded default).

Files live under ``<root>/exports/...`` by their key (:mod:`export_center.storage.keys`).
The temporary object of a file is ``<key>.part`` next to it, fsynced and renamed at
:meth:`LocalStorage.commit`; a shard segment is written to ``<key>.tmp`` and renamed, so
a reader never sees half of one. Directories are ``0700`` and files ``0600`` whatever
the umask: a file holds one tenant's data.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from export_center.errors import StorageError
from export_center.storage.base import DownloadAnswer, LocalFile, Space, StoredObject, storage_error
from export_center.storage.keys import (
    EXPORT_PREFIX,
    PART_PREFIX,
    check_export_key,
    check_part_key,
    check_task_no,
)

__all__ = ["LocalStorage"]


class LocalStorage:
    """:class:`~export_center.storage.base.Storage` on a local or shared directory.

    Args:
        root: directory that holds the ``exports/`` tree.
    """

    kind = "local"

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        _private(self.root)

    def _path(self, key: str) -> Path:
        path = (self.root / check_export_key(key)).resolve()
        if not path.is_relative_to(self.root):  # defence in depth next to the pattern
            raise StorageError(f"refused object key {key!r}: outside the storage root")
        return path

    def open_write(
        self, key: str, *, content_type: str = "", content_disposition: str = ""
    ) -> BinaryIO:
        """Open ``<key>.part`` for writing (1 MiB buffer); the headers are not kept.

        Raises:
            StorageError: the key is refused, or the file cannot be created
                (:class:`~export_center.errors.StorageFull` when the disk is full).
        """
        path = self._path(key)
        try:
            _private(path.parent)
            return open(  # noqa: SIM115 - the caller closes it
                path.with_name(path.name + ".part"), "wb", buffering=1 << 20, opener=_owner_only
            )
        except OSError as exc:
            raise storage_error(exc, f"cannot open {key}") from exc

    def commit(self, key: str) -> int:
        """Fsync ``<key>.part`` and rename it to ``key``; return its size in bytes.

        Raises:
            StorageError: no temporary file, or the disk refused.
        """
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
        """Remove the file, its ``.part`` and the per-task folder once empty."""
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
        """True when the committed file exists (a ``.part`` does not count)."""
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        """Size in bytes of the committed file (``OSError`` when it is missing)."""
        return self._path(key).stat().st_size

    def download(
        self, key: str, *, file_name: str, content_type: str, seconds: int
    ) -> DownloadAnswer:
        """A :class:`~export_center.storage.base.LocalFile`: the API serves it itself."""
        return LocalFile(self._path(key))

    def list(self, prefix: str = EXPORT_PREFIX) -> Iterator[StoredObject]:
        """Files under ``prefix``; a ``.part`` is listed under its key as temporary."""
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
        return self.root / check_part_key(key)

    def put_part(self, key: str, data: bytes) -> None:
        """Write the segment to ``<key>.tmp`` and rename it over ``key``.

        Raises:
            StorageError: the key is refused, or the disk refused (the ``.tmp`` is
                removed).
        """
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
        """The segment's bytes in chunks of 1 MiB; the file is opened at once.

        Raises:
            StorageError: the key is refused, or the segment is missing.
        """
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
        """Delete ``parts/{task_no}/`` and its folders; return how many files went.

        Raises:
            StorageError: ``task_no`` is not a task id, or a file cannot be deleted.
        """
        base = self.root / PART_PREFIX / check_task_no(task_no)
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
