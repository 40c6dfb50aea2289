"""What every file writer shares: the byte-counting stream, the stats and the protocol.

Source: DESIGN.md "Files": the file size cap (default 50 MB) is enforced *while
writing*, so a writer never produces a file larger than the cap plus one buffer.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, runtime_checkable

from export_center.errors import FileTooLarge

__all__ = ["CountingStream", "ExportWriter", "WriterStats"]

_MB = 1024 * 1024


class CountingStream(io.RawIOBase):
    """A write-only, non-seekable wrapper that counts the bytes passed to a binary stream.

    The wrapper never seeks, so zip and text layers on top of it write strictly
    forward (ZIP entries get data descriptors) and the count is the file size.
    Closing the wrapper does not close the wrapped stream.

    Args:
        stream: the binary stream receiving the bytes (file, upload buffer...).
        max_bytes: the size cap in bytes, or None for no cap.

    Attributes:
        count: bytes written so far (int).
        max_bytes: the cap (int or None).

    Raises:
        FileTooLarge: from ``write`` as soon as ``count`` would exceed ``max_bytes``;
            the bytes that cross the cap are not passed on.
    """

    def __init__(self, stream: BinaryIO, max_bytes: int | None = None):
        super().__init__()
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self._stream = stream
        self.max_bytes = max_bytes
        self.count = 0
        self._abandoned = False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def tell(self) -> int:
        """Bytes written so far (the position in the output, which only grows)."""
        return self.count

    def write(self, data: Any) -> int:
        """Pass ``data`` (bytes-like) on and count it.

        Returns:
            The number of bytes accepted (always all of them, or an exception).

        Raises:
            FileTooLarge: the cap would be exceeded; nothing of ``data`` is written.
            ValueError: the wrapper was closed.
        """
        if self.closed:
            raise ValueError("write to a closed CountingStream")
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        if self._abandoned:
            return size
        if self.max_bytes is not None and self.count + size > self.max_bytes:
            raise FileTooLarge(
                f"file exceeds the size cap of {self.max_bytes / _MB:g} MB ({self.max_bytes} bytes)"
            )
        self._stream.write(data)
        self.count += size
        return size

    def flush(self) -> None:
        """Flush the wrapped stream (a no-op once abandoned)."""
        if not self._abandoned and not self.closed:
            flush = getattr(self._stream, "flush", None)
            if flush is not None:
                flush()

    def abandon(self) -> None:
        """Drop every later write silently (used after a writer failed).

        A writer that failed half-way (size cap, error in a row) still owns zip or
        text layers whose finalizers write trailing bytes; after ``abandon`` those
        bytes go nowhere instead of raising again from a finalizer. The partial
        file is garbage anyway and the caller deletes it (DESIGN.md "Files").
        """
        self._abandoned = True

    def close(self) -> None:
        """Mark the wrapper closed; the wrapped stream stays open."""
        if not self.closed:
            self.flush()
        super().close()


@dataclass(slots=True)
class WriterStats:
    """What a writer did, returned by ``close()``.

    Attributes:
        rows: data rows written (header rows not counted).
        sheets: worksheets written (XLSX; 1 for CSV).
        truncated_cells: string cells cut to the XLSX cell limit (CASES E10).
        replaced_chars: characters replaced with U+FFFD (CASES E08; lone surrogates
            in CSV, control characters and non-characters in XLSX).
        bytes: size of the file in bytes.
        invalid_numbers: NaN/Infinity values written as empty cells (CASES E15).
    """

    rows: int = 0
    sheets: int = 0
    truncated_cells: int = 0
    replaced_chars: int = 0
    bytes: int = 0
    invalid_numbers: int = 0


def check_columns(columns: Sequence[Sequence[Any]], expected: int) -> None:
    """Check the shape of a column-major batch for ``write_columns``.

    Args:
        columns: the batch, one sequence per column.
        expected: the writer's number of columns.

    Raises:
        ValueError: ``len(columns) != expected``, or the columns differ in length.
    """
    if len(columns) != expected:
        raise ValueError(f"expected {expected} columns, got {len(columns)}")
    if len(set(map(len, columns))) > 1:
        raise ValueError("the columns of one batch differ in length")


@runtime_checkable
class ExportWriter(Protocol):
    """A streaming writer of one export file (CSV or XLSX).

    Attributes:
        content_type: the MIME type of the file.
        extension: the file name extension without the dot (``csv``, ``xlsx``).
    """

    content_type: str
    extension: str

    def write_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append one batch of rows.

        Args:
            rows: typed Python values (see ``export_center.values``) keyed by column
                key; keys that are not columns are ignored, missing keys are empty
                cells.

        Raises:
            FileTooLarge: the file grew past ``max_bytes``.
        """
        ...

    def write_columns(self, columns: Sequence[Sequence[Any]]) -> None:
        """Append one batch given column by column (what the pipeline hands over).

        Args:
            columns: one sequence of typed values per column, in column order, all of
                the same length; ``None`` is an empty cell.

        Raises:
            ValueError: not one sequence per column, or sequences of different lengths.
            FileTooLarge: the file grew past ``max_bytes``.
        """
        ...

    def close(self) -> WriterStats:
        """Finish the file and flush it; the underlying stream is NOT closed.

        Returns:
            The statistics of the written file.
        """
        ...

    def abort(self) -> None:
        """Abandon the file after a failure: nothing more is written (the caller deletes it)."""
        ...
