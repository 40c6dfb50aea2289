"""File storage port and the local-directory adapter (DESIGN.md "Files").

Object keys are made only by the server: ``exports/{yyyy}/{mm}/{task_no}/{uuid}.{ext}``
(:func:`new_object_key`); no request can name a path (CASES E33). A file is written to
a temporary object (``<key>.part``) and becomes visible under its key only when
:meth:`Storage.commit` succeeds; every failure path calls :meth:`Storage.delete`,
which removes both.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Protocol

from export_center.errors import StorageError

__all__ = [
    "EXPORT_PREFIX",
    "LocalStorage",
    "Storage",
    "StoredObject",
    "file_extension",
    "new_object_key",
]

#: Every export file lives under this prefix (the orphan scan looks only here).
EXPORT_PREFIX = "exports/"
_KEY = re.compile(r"^exports/\d{4}/\d{2}/exp_[0-9A-Z]{26}/[0-9a-f]{32}\.(csv|xlsx)$")


def file_extension(task_format: str) -> str:
    """The file extension of a task's format: ``xlsx`` for XLSX, ``csv`` otherwise."""
    return "xlsx" if str(task_format).upper() == "XLSX" else "csv"


def new_object_key(task_no: str, extension: str, *, now: datetime | None = None) -> str:
    """Return a fresh server-made key for one attempt's file.

    Args:
        task_no: public task id (``exp_...``).
        extension: ``csv`` or ``xlsx``.
    """
    now = now or datetime.now(UTC)
    return f"{EXPORT_PREFIX}{now:%Y}/{now:%m}/{task_no}/{uuid.uuid4().hex}.{extension}"


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object found by :meth:`Storage.list`: key, size in bytes, mtime (UTC)."""

    key: str
    size: int
    modified_at: datetime


class Storage(Protocol):
    """Where export files live."""

    def open_write(self, key: str) -> BinaryIO:
        """Open the temporary object of ``key`` for writing (binary, truncating)."""

    def commit(self, key: str) -> int:
        """Make the temporary object visible under ``key``; return its size in bytes."""

    def delete(self, key: str) -> None:
        """Delete the object and its temporary object; no error if absent."""

    def exists(self, key: str) -> bool:
        """True when a committed object exists under ``key``."""

    def size(self, key: str) -> int:
        """Size in bytes of the committed object."""

    def local_path(self, key: str) -> Path:
        """Filesystem path of a committed object (for streaming a download)."""

    def list(self, prefix: str = EXPORT_PREFIX) -> Iterator[StoredObject]:
        """Committed and temporary objects under ``prefix``."""


class LocalStorage:
    """:class:`Storage` on a local or shared directory.

    Args:
        root: directory that holds the ``exports/`` tree.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise StorageError(f"refused object key {key!r}: not made by this server")
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):  # defence in depth next to the pattern
            raise StorageError(f"refused object key {key!r}: outside the storage root")
        return path

    def open_write(self, key: str) -> BinaryIO:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return open(path.with_name(path.name + ".part"), "wb", buffering=1 << 20)  # noqa: SIM115
        except OSError as exc:
            raise StorageError(f"cannot open {key}: {exc.strerror}") from exc

    def commit(self, key: str) -> int:
        path = self._path(key)
        part = path.with_name(path.name + ".part")
        try:
            with open(part, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(part, path)
            return path.stat().st_size
        except OSError as exc:
            raise StorageError(f"cannot store {key}: {exc.strerror}") from exc

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

    def local_path(self, key: str) -> Path:
        return self._path(key)

    def list(self, prefix: str = EXPORT_PREFIX) -> Iterator[StoredObject]:
        base = self.root / prefix
        if not base.exists():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                if key.endswith(".part"):
                    key = key[: -len(".part")]
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue
                yield StoredObject(key, st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))
