"""What stands between an attempt and its file storage: the lease check and the errors.

* :class:`GuardedStream` wraps the writable stream of an attempt's file and calls a check
  (the watchdog's :meth:`~export_center.attempt.watchdog.Watchdog.check`) before every write and
  before closing it, so that no byte reaches storage after the attempt may have lost its
  lease (a local file, or an S3 multipart upload whose parts go out as the buffer fills).
* :func:`storage_error` turns an :class:`OSError` of the storage into the export's
  :class:`~export_center.errors.StorageError` (``STORAGE_ERROR``), or
  :class:`~export_center.errors.StorageFull` when the disk or quota is full, with a
  sentence saying what was being done.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import BinaryIO

from export_center.storage.base import storage_error

__all__ = ["GuardedStream"]


class GuardedStream:
    """A writable binary stream that asks ``check`` before every write and at close.

    Only the methods the writers use are offered (``write``, ``flush``, ``close``,
    ``closed``, ``tell``); an ``OSError`` of the wrapped stream becomes a
    :class:`StorageError` through :func:`storage_error`.

    Args:
        stream: the storage's stream (from ``Storage.open_write``).
        check: raises when the attempt may no longer write (lost lease, cancel, ...).
        doing: what the writes are, for error messages ("cannot write the file").
    """

    def __init__(self, stream: BinaryIO, check: Callable[[], None], doing: str) -> None:
        self.stream = stream
        self.check = check
        self.doing = doing

    def write(self, data: bytes) -> int:
        """Check, then write ``data``; returns the bytes written."""
        self.check()
        try:
            return self.stream.write(data)
        except OSError as exc:
            raise storage_error(exc, self.doing) from exc

    def flush(self) -> None:
        """Flush the wrapped stream."""
        try:
            self.stream.flush()
        except OSError as exc:
            raise storage_error(exc, self.doing) from exc

    def tell(self) -> int:
        """The wrapped stream's position."""
        return self.stream.tell()

    @property
    def closed(self) -> bool:
        """Whether the wrapped stream is closed."""
        return self.stream.closed

    def close(self) -> None:
        """Check, then close the wrapped stream (its last bytes go to storage here)."""
        if self.stream.closed:
            return
        self.check()
        try:
            self.stream.close()
        except OSError as exc:
            raise storage_error(exc, self.doing) from exc

    def abandon(self) -> None:
        """Close the wrapped stream without the check, after a failure (the caller then
        deletes the object); errors are the caller's to ignore."""
        if not self.stream.closed:
            self.stream.close()

    def __enter__(self) -> GuardedStream:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abandon()
