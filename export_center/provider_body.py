"""Reading a provider's answer body within its cap, inflating it while it arrives.

The client asks for ``Accept-Encoding: gzip, deflate`` (:data:`ACCEPT_ENCODING`) and
reads the bytes as sent (``httpx.Response.iter_raw``), never through httpx's own
decoders: those inflate a whole received chunk at once, and undo any number of stacked
encodings, before a size can be counted (a few KB of ``gzip, gzip, gzip`` made a worker
allocate about 2 GB). Here every encoding is undone in pieces of at most
:data:`INFLATE_STEP` bytes, counted against the cap as they come, so a body never holds
more than its cap plus one piece, whatever it inflates to.

==========================================  ============================================
``Content-Encoding`` of the answer          what happens
==========================================  ============================================
absent or ``identity``                      read as sent
``gzip`` (or ``x-gzip``)                    inflated while read; several gzip members
                                            one after the other are one body
``deflate``                                 inflated while read (the zlib format; a raw
                                            deflate stream is accepted too, as browsers
                                            do)
any other (``br``, ``zstd``, ``compress``,  :class:`ProviderContractError` naming it,
an unknown name) or more than one           before the body is read (:func:`content_coding`)
(``gzip, gzip``)
compressed data that is corrupt, ends       :class:`ProviderContractError`
early, or has bytes after its end
more than the cap, as sent or inflated      :class:`Body` with ``complete=False``: the
                                            reading stops there (the client: a page too
                                            large for a 2xx, the first bytes of an error
                                            answer)
==========================================  ============================================
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from export_center.errors import ProviderContractError
from export_center.provider_batch import printable

__all__ = ["ACCEPT_ENCODING", "INFLATE_STEP", "Body", "content_coding", "read_body"]

ACCEPT_ENCODING = "gzip, deflate"
"""The ``Accept-Encoding`` of every batch request: the encodings read within the cap."""
INFLATE_STEP = 64 * 1024
"""Most bytes one inflating step gives; a body holds at most its cap plus this."""

_CODINGS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}
"""Content codings read, by the name an answer may give them (``x-gzip`` is ``gzip``)."""
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS


@dataclass(frozen=True, slots=True)
class Body:
    """What :func:`read_body` read.

    Attributes:
        data: the body (inflated); its first ``cap`` bytes when not ``complete`` and the
            start was asked for, else empty when not ``complete``.
        complete: False when the body was more than ``cap`` bytes, as sent or inflated.
        coding: the coding undone (``"gzip"``, ``"deflate"``), or None.
    """

    data: bytes
    complete: bool
    coding: str | None


def content_coding(header: str | None) -> str | None:
    """The one content coding an answer's ``Content-Encoding`` asks to undo.

    Args:
        header: the header's value (several headers joined with ``", "``), or None.

    Returns:
        ``"gzip"`` or ``"deflate"``; None for no coding (absent, empty, ``identity``).

    Raises:
        ProviderContractError: another coding than gzip or deflate, or more than one
            (names the header as sent).
    """
    if header is None:
        return None
    names = [name.strip().lower() for name in header.split(",")]
    names = [name for name in names if name and name != "identity"]
    if not names:
        return None
    shown = repr(printable(header, 80))
    if len(names) > 1:
        raise ProviderContractError(
            f"the answer's Content-Encoding {shown} stacks {len(names)} encodings; one of "
            f"gzip or deflate at most is read (the request said Accept-Encoding: "
            f"{ACCEPT_ENCODING})"
        )
    coding = _CODINGS.get(names[0])
    if coding is None:
        raise ProviderContractError(
            f"the answer's Content-Encoding {shown} is not one the request accepts "
            f"(Accept-Encoding: {ACCEPT_ENCODING})"
        )
    return coding


def read_body(
    chunks: Iterable[bytes],
    coding: str | None,
    cap: int,
    check: Callable[[], None],
    *,
    keep_start: bool = False,
) -> Body:
    """Read a body as sent, inflate it piece by piece, and stop past ``cap`` bytes.

    Args:
        chunks: the bytes as received (``response.iter_raw()``).
        coding: what :func:`content_coding` said (None: read as sent).
        cap: the most bytes the body may have, as sent and inflated.
        check: called before each received chunk and at the end; raises to stop (the
            batch's abort event and time limit).
        keep_start: past ``cap``, keep the first ``cap`` bytes (an error answer, whose
            start holds its code); else keep nothing.

    Returns:
        The body (see :class:`Body`).

    Raises:
        ProviderContractError: the compressed data is corrupt, ends early or has bytes
            after its end.
        Exception: what ``check`` raises.
    """
    inflater = _Inflater(coding) if coding is not None else None
    parts: list[bytes] = []
    sent = size = 0

    def cut(piece: bytes) -> Body:
        if not keep_start:
            return Body(b"", False, coding)
        parts.append(piece[: cap - size])
        return Body(b"".join(parts), False, coding)

    for chunk in chunks:
        check()
        sent += len(chunk)
        if sent > cap:  # more than the cap as sent, whatever it inflates to
            return cut(chunk if inflater is None else b"")
        for piece in (chunk,) if inflater is None else inflater.pieces(chunk):
            if len(piece) > cap - size:
                return cut(piece)
            parts.append(piece)
            size += len(piece)
    check()
    if inflater is not None:
        inflater.finish()
    return Body(b"".join(parts), True, coding)


class _Inflater:
    """Undoes gzip or deflate in steps of at most :data:`INFLATE_STEP` output bytes."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._gzip = coding == "gzip"
        self._z = zlib.decompressobj(_GZIP_WBITS if self._gzip else zlib.MAX_WBITS)
        self._begun = False  # a step succeeded (no more falling back to raw deflate)
        self._open = False  # input fed to the current stream, and its end not reached

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """The inflated output of ``data``, in pieces of at most :data:`INFLATE_STEP`.

        Raises:
            ProviderContractError: the data is corrupt, or follows the end of a deflate
                stream.
        """
        while True:
            if self._z.eof:
                if not data:
                    return
                if not self._gzip:
                    raise self._broken("has bytes after the end of its deflate stream")
                self._z = zlib.decompressobj(_GZIP_WBITS)  # the next gzip member
            try:
                out = self._z.decompress(data, INFLATE_STEP)
            except zlib.error as exc:
                if not self._gzip and not self._begun:  # no zlib header: raw deflate
                    self._begun = True
                    self._z = zlib.decompressobj(_RAW_DEFLATE_WBITS)
                    continue
                raise self._broken(f"cannot be inflated ({exc})") from None
            self._begun = self._open = True
            if out:
                yield out
            if self._z.eof:
                self._open = False
                data = self._z.unused_data
                continue
            data = self._z.unconsumed_tail
            # A full step may leave output inside zlib with no input left: ask again.
            if not data and len(out) < INFLATE_STEP:
                return

    def finish(self) -> None:
        """Check that the body ended where its compressed data ends.

        Raises:
            ProviderContractError: the compressed data was cut short.
        """
        if self._open:
            raise self._broken(f"ends before the end of its {self.coding} stream")

    def _broken(self, what: str) -> ProviderContractError:
        return ProviderContractError(f"the answer's {self.coding} data {what}")
