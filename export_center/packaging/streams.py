"""The byte streams a package is made of: a hashing stream, a fixed-block stream and a
counting sink.

* :class:`HashingStream` passes bytes on and keeps their count and SHA-256: the size
  and hash of a delivered file or of one part inside the ZIP, taken while writing.
* :class:`BlockStream` passes bytes on in blocks of exactly :data:`BLOCK_BYTES` (the
  last one shorter, at :meth:`BlockStream.close`). A compressor (gzip, a ZIP entry)
  behind it is therefore fed the same calls whatever the batches a writer was given,
  which is what makes the compressed bytes depend on the rows only.
* :class:`CountingSink` counts bytes and keeps none (measuring a row's rendering).

None of them seeks or closes the stream it wraps.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any, Protocol

__all__ = ["BLOCK_BYTES", "BlockStream", "CountingSink", "HashingStream"]

BLOCK_BYTES = 64 * 1024
"""The size of every block a :class:`BlockStream` passes on, but the last."""


class Writable(Protocol):
    """Anything with ``write(bytes)`` (a file, a ``GzipFile``, a ZIP entry...)."""

    def write(self, data: Any, /) -> Any:
        """Write ``data``."""
        ...


def _size(data: Any) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


class _WriteOnly(io.RawIOBase):
    """A write-only, non-seekable raw stream (zipfile then writes data descriptors)."""

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False


class HashingStream(_WriteOnly):
    """Pass bytes to ``stream`` and keep their count and SHA-256.

    Args:
        stream: where the bytes go (a ``CountingStream`` with the size cap, a ZIP
            entry, a :class:`BlockStream`...).

    Attributes:
        count: bytes passed on so far (int); also :meth:`tell`.
    """

    def __init__(self, stream: Writable):
        super().__init__()
        self._stream = stream
        self._hash = hashlib.sha256()
        self.count = 0

    def tell(self) -> int:
        """Bytes written so far."""
        return self.count

    def write(self, data: Any) -> int:
        """Pass ``data`` on first, then count and hash it (bytes refused by the
        stream, e.g. past the size cap, are never counted)."""
        self._stream.write(data)
        self._hash.update(data)
        size = _size(data)
        self.count += size
        return size

    def hexdigest(self) -> str:
        """Lowercase hex SHA-256 of the bytes so far."""
        return self._hash.hexdigest()

    def flush(self) -> None:
        """Flush the wrapped stream."""
        flush = getattr(self._stream, "flush", None)
        if flush is not None and not self.closed:
            flush()


class BlockStream(_WriteOnly):
    """Pass bytes on in blocks of exactly :data:`BLOCK_BYTES`; :meth:`close` writes the
    rest. ``flush`` passes nothing on early (that would change the blocks)."""

    def __init__(self, stream: Writable, block: int = BLOCK_BYTES):
        super().__init__()
        self._stream = stream
        self._block = block
        self._buffer = bytearray()

    def write(self, data: Any) -> int:
        """Buffer ``data``; pass on every complete block."""
        self._buffer += data
        block = self._block
        if len(self._buffer) >= block:
            whole = len(self._buffer) - len(self._buffer) % block
            view = memoryview(self._buffer)
            try:
                for start in range(0, whole, block):
                    self._stream.write(view[start : start + block])
            finally:
                view.release()
            del self._buffer[:whole]
        return _size(data)

    def flush(self) -> None:
        """Keep the blocks whole: nothing is passed on before :meth:`close`."""

    def close(self) -> None:
        """Pass on the last, shorter block (if any); the wrapped stream stays open."""
        if not self.closed and self._buffer:
            self._stream.write(bytes(self._buffer))
            self._buffer.clear()
        super().close()

    def discard(self) -> None:
        """Drop what is buffered and close without writing (after a failure)."""
        self._buffer.clear()
        super().close()


class CountingSink(_WriteOnly):
    """Count the bytes written and keep none (``count``)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def write(self, data: Any) -> int:
        """Count ``data``."""
        size = _size(data)
        self.count += size
        return size
