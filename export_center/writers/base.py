"""What every file writer shares: the protocol, the writer frame, the byte-counting
stream, the stats, the wall clock and the date cache.

* :class:`ExportWriter` is the public contract (what ``open_writer`` returns).
* :class:`StreamingWriter` is the frame both writers are built on: the closed/failed
  state and its errors, rows to columns (``write_rows`` -> ``write_columns``), the
  batch shape check, failure handling (``abort``, abandoning the output) and the
  stats. A writer adds its renderers and two hooks, ``_write_batch`` and ``_finish``.
* :class:`CountingStream` enforces the size cap, :func:`wall_clock` gives wall times
  in the export time zone, :func:`date_cache` is a writer's bounded cache of day texts.

Source: DESIGN.md "Files": the file size cap (default 50 MB) is enforced *while
writing*, so a writer never produces a file larger than the cap plus one buffer.

Wall time (CASES E13): both writers write an aware datetime as its wall time in the
export's time zone (IANA name). A wall time that occurs twice in that zone, such as
01:30 on 2024-11-03 in America/New_York (once at -04:00, then at -05:00 after the DST
fall-back), would make two different moments look the same; :func:`wall_clock` tells
the writers which wall times are such repeated ones, and the writers then add the
UTC offset (see their module docstrings). Detection compares the zone's UTC offset of
the wall time with ``fold=0`` and ``fold=1`` (PEP 495); zones whose offset never
changes (UTC, ``Etc/GMT-8``) skip the check.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as _dt
import functools
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, runtime_checkable
from zoneinfo import ZoneInfo

from export_center.columns import Column
from export_center.errors import FileTooLarge
from export_center.values import BoundedCache

__all__ = [
    "DATE_CACHE_SIZE",
    "CountingStream",
    "ExportWriter",
    "StreamingWriter",
    "WallClock",
    "WriterStats",
    "check_columns",
    "date_cache",
    "has_fixed_offset",
    "wall_clock",
]

_MB = 1024 * 1024

DATE_CACHE_SIZE = 20_000
"""Distinct dates a writer's DATE column remembers the text of (about 55 years of days)."""


class CountingStream(io.RawIOBase):
    """A write-only, non-seekable wrapper that counts the bytes passed to a binary stream.

    The wrapper never seeks, so zip and text layers on top of it write strictly
    forward (ZIP entries get data descriptors) and the count is the file size.
    Closing the wrapper does not close the wrapped stream.

    Args:
        stream: the binary stream receiving the bytes (file, upload buffer...).
        max_bytes: the size cap in bytes, or None for no cap.
        start: bytes already written before this wrapper (a resumed part's earlier
            segments); ``count`` starts there and the cap applies to the total.

    Attributes:
        count: bytes written so far, ``start`` included (int).
        max_bytes: the cap (int or None).

    Raises:
        FileTooLarge: from ``write`` as soon as ``count`` would exceed ``max_bytes``;
            the bytes that cross the cap are not passed on.
    """

    def __init__(self, stream: BinaryIO, max_bytes: int | None = None, start: int = 0):
        super().__init__()
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        self._stream = stream
        self.max_bytes = max_bytes
        self.count = start
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
        replaced_chars: characters replaced with U+FFFD, all kinds (CASES E08): the sum
            of the three counts below, kept for callers that read one number.
        bytes: size of the file in bytes.
        invalid_numbers: NaN/Infinity values written as empty cells (CASES E15).
        replaced_control_chars: C0 control characters other than TAB, LF and CR
            (``\\x00-\\x08``, ``\\x0b``, ``\\x0c``, ``\\x0e-\\x1f``) replaced; XLSX only,
            CSV keeps them.
        replaced_noncharacters: the non-characters U+FFFE and U+FFFF replaced; XLSX
            only (XML 1.0 cannot carry them), CSV keeps them.
        replaced_surrogates: lone surrogates (U+D800-U+DFFF) replaced, in both formats
            (UTF-8 cannot encode them either).
    """

    rows: int = 0
    sheets: int = 0
    truncated_cells: int = 0
    replaced_chars: int = 0
    bytes: int = 0
    invalid_numbers: int = 0
    replaced_control_chars: int = 0
    replaced_noncharacters: int = 0
    replaced_surrogates: int = 0

    def __add__(self, other: WriterStats) -> WriterStats:
        """Field-wise sum (two shards' parts, or a part and the file's head).

        Returns:
            A new ``WriterStats`` whose every field is the sum of both; ``sheets`` and
            ``bytes`` add up too, so the sum of parts is the file's only where the
            file is the parts' concatenation (CSV head plus parts). The XLSX
            assembler (``writers.parts.assemble_xlsx``) counts sheets and bytes itself.
        """
        if not isinstance(other, WriterStats):
            return NotImplemented
        return WriterStats(
            **{name: getattr(self, name) + getattr(other, name) for name in _STATS_FIELDS}
        )

    @classmethod
    def total(cls, parts: Iterable[WriterStats]) -> WriterStats:
        """Sum any number of stats field by field (``WriterStats()`` for none).

        Args:
            parts: e.g. the last checkpointed stats of every shard's part.

        Returns:
            A new ``WriterStats``, as repeated ``+``.
        """
        result = cls()
        for part in parts:
            result = result + part
        return result

    def to_dict(self) -> dict[str, int]:
        """The stats as a JSON-able dict ``{field name: int}``, every field present.

        The form stored in a checkpoint; :meth:`from_dict` reads it back.
        """
        return {name: getattr(self, name) for name in _STATS_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WriterStats:
        """Read stats back from :meth:`to_dict`'s form (e.g. a checkpoint's JSON).

        Args:
            data: ``{field name: count}``; a missing field is 0 (stats stored before
                the field existed).

        Returns:
            The ``WriterStats``.

        Raises:
            ValueError: a key that is no field, or a value that is not an int >= 0
                (``bool`` is not accepted): the checkpoint is corrupt or comes from a
                newer version whose counts this one would lose.
        """
        unknown = sorted(set(data) - set(_STATS_FIELDS))
        if unknown:
            raise ValueError(f"unknown WriterStats fields: {', '.join(unknown)}")
        values = {}
        for name, value in data.items():
            if type(value) is not int or value < 0:
                raise ValueError(f"WriterStats.{name} must be an int >= 0, got {value!r}")
            values[name] = value
        return cls(**values)


_STATS_FIELDS = tuple(field.name for field in dataclasses.fields(WriterStats))
"""The names of ``WriterStats``' counts, in declaration order."""

WallClock = Callable[[_dt.datetime], tuple[_dt.datetime, bool]]
"""``wall(moment) -> (local, repeated)``, made by :func:`wall_clock`."""

_PROBE_MOMENTS = [_dt.datetime(1, 1, 2), _dt.datetime(9999, 12, 30)] + [
    _dt.datetime(year, month, 1) for year in range(1800, 2101) for month in (1, 7)
]
"""Naive wall times at which :func:`has_fixed_offset` compares a zone's UTC offset."""


@functools.cache
def has_fixed_offset(time_zone: str) -> bool:
    """Tell whether an IANA zone has one UTC offset for all time (no DST, no history).

    Every geographic zone starts with its local mean time (``+08:05:43`` for
    Asia/Shanghai) and so changes its offset at least once; the fixed ones are UTC,
    ``Etc/GMT±N`` and their aliases. The offset is compared in the years 1 and 9999
    and on 1 January and 1 July of every year 1800-2100 (about 0.2 ms, once per zone
    and process).

    Args:
        time_zone: IANA name, e.g. ``"UTC"`` or ``"Europe/Berlin"``.

    Returns:
        True when every probe has the same offset: no wall time occurs twice.

    Raises:
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """
    zone = ZoneInfo(time_zone)
    return len({zone.utcoffset(moment) for moment in _PROBE_MOMENTS}) == 1


def wall_clock(time_zone: str) -> WallClock:
    """Build the converter of aware datetimes to wall time in the export time zone.

    The converter ``wall(moment)`` returns ``(local, repeated)``:

    * ``local``: ``moment`` as an aware datetime in the zone (``ZoneInfo``); its fields
      are the wall time, ``local.isoformat(" ")`` adds the offset in force.
    * ``repeated``: True when that wall time occurs twice in the zone, i.e. it lies in
      the hour (or other span) that a fall-back of the UTC offset repeats: DST ending
      (2024-11-03 01:00-01:59:59 in America/New_York, 2024-10-27 02:00-02:59:59 in
      Europe/Berlin) or a historical shift such as local mean time to standard time.
      Both occurrences are repeated, the first (``fold=0``) and the second
      (``fold=1``). A wall time in a spring-forward gap never comes out of the
      converter: an aware moment always maps to a wall time that exists.

    Rule (PEP 495): a wall time is repeated when the zone gives it different UTC
    offsets for ``fold=0`` and ``fold=1``; ``astimezone`` marks the second occurrence
    with ``fold=1``. Zones with a fixed offset (:func:`has_fixed_offset`) skip the
    check and always answer False; the check costs about 0.6 µs per value elsewhere.

    Args:
        time_zone: IANA name of the export time zone.

    Returns:
        The converter. It raises ``OverflowError`` when the wall time falls outside
        the years 1-9999 (``9999-12-31T23:00Z`` east of UTC).

    Raises:
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """
    zone = ZoneInfo(time_zone)
    if has_fixed_offset(time_zone):

        def wall_fixed(moment: _dt.datetime) -> tuple[_dt.datetime, bool]:
            return moment.astimezone(zone), False

        return wall_fixed

    offset = zone.utcoffset
    naive = _dt.datetime
    utc = _dt.UTC

    def wall_checked(moment: _dt.datetime) -> tuple[_dt.datetime, bool]:
        if moment.tzinfo is zone:  # astimezone would return it as is, even in a gap
            moment = moment.astimezone(utc)
        local = moment.astimezone(zone)
        if local.fold:  # fromutc sets fold=1 on the second occurrence only
            return local, True
        # The same wall time with fold=1 (a constructor is faster than replace()).
        later = naive(
            local.year,
            local.month,
            local.day,
            local.hour,
            local.minute,
            local.second,
            local.microsecond,
            fold=1,
        )
        return local, offset(later) != offset(local)

    return wall_checked


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


def date_cache(render: Callable[[_dt.date], str]) -> BoundedCache[_dt.date, str]:
    """A writer's cache ``date -> text`` for one DATE column (bounded, per writer).

    Args:
        render: the text of one day (``date.isoformat`` for CSV, the Excel serial for
            XLSX); called once per distinct day.

    Returns:
        A :class:`export_center.values.BoundedCache` of at most
        :data:`DATE_CACHE_SIZE` days; map ``cache.__getitem__`` over a column of
        ``date`` values to get their texts.
    """
    return BoundedCache(render, DATE_CACHE_SIZE)


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


class StreamingWriter(abc.ABC):
    """The frame of a streaming export writer; :class:`ExportWriter` is its contract.

    It holds what both writers do the same way: the column keys, the wall clock, the
    :class:`CountingStream` (size cap), the running :class:`WriterStats` and the life
    cycle open -> batches -> closed, or failed at any point. A subclass renders the
    cells and implements two hooks: ``_write_batch(columns)`` writes one checked,
    non-empty batch and adds its rows to ``_stats.rows``; ``_finish()`` ends the file
    and flushes it. An error in a hook, or in anything run through :meth:`_guarded`,
    fails the writer: it is unusable, later bytes go nowhere, and the caller deletes
    the partial file (DESIGN.md "Files"). A subclass with more output layers (the
    XLSX archive) ends them in its own :meth:`_fail`.

    ``_stats`` holds the running counts (rows, sheets, truncated cells, invalid
    numbers, replaced characters by kind) that the writer and its renderers add to;
    :meth:`close` returns a copy with ``bytes`` and the ``replaced_chars`` total.

    Args:
        stream: binary output; it is never closed by the writer.
        columns: the export's columns, in file order (at least one).
        time_zone: IANA name of the export time zone (E13).
        max_bytes: file size cap in bytes, or None for none.
        resume_from: stats to continue from (a resumed part, ``writers.parts``): the
            counts start at its values and its ``bytes`` count against ``max_bytes``;
            None starts from zero.

    Attributes:
        content_type: the MIME type of the file (set by the subclass).
        extension: the file name extension without the dot (set by the subclass); in
            upper case it names the format in error messages (``CSV``, ``XLSX``).

    Raises:
        ValueError: no columns, or a negative ``max_bytes``.
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """

    content_type: str
    extension: str

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str,
        max_bytes: int | None,
        resume_from: WriterStats | None = None,
    ):
        if not columns:
            raise ValueError("an export needs at least one column")
        self._columns = list(columns)
        self._keys = [c.key for c in self._columns]
        self._wall = wall_clock(time_zone)
        start = resume_from or WriterStats()
        # The running counts; bytes live in the counting stream, the total at close.
        self._stats = dataclasses.replace(start, bytes=0, replaced_chars=0)
        self._closed = False
        self._failed = False
        self._counting = CountingStream(stream, max_bytes, start.bytes)

    # --- ExportWriter -----------------------------------------------------------------

    def write_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append one batch of rows: turned into columns, then :meth:`write_columns`.

        Args:
            rows: typed values keyed by column key; keys that are not columns are
                ignored, missing keys are empty cells.

        Raises:
            FileTooLarge, ValueError: as :meth:`write_columns`.
        """
        self.write_columns([[row.get(key) for row in rows] for key in self._keys])

    def write_columns(self, columns: Sequence[Sequence[Any]]) -> None:
        """Append one batch given column by column (the pipeline's form).

        Args:
            columns: one sequence of typed values per column, in column order, all of
                the same length (``None`` is an empty cell).

        Raises:
            ValueError: not one sequence per column, sequences of different lengths,
                or the writer is closed or failed before.
            FileTooLarge: the file grew past ``max_bytes`` (the writer is then failed
                and the caller deletes the partial file).
        """
        if self._closed or self._failed:
            raise ValueError(f"write to a closed or failed {self.extension.upper()} writer")
        check_columns(columns, len(self._keys))
        if len(columns[0]):
            self._guarded(self._write_batch, columns)

    def close(self) -> WriterStats:
        """Finish the file and flush it; the output stream stays open. Idempotent.

        Returns:
            ``WriterStats``: rows, sheets, truncated_cells, replaced_chars and its
            split by kind, invalid_numbers and bytes (the whole file).

        Raises:
            FileTooLarge: the last bytes crossed ``max_bytes``.
            ValueError: the writer failed before.
        """
        if self._failed:
            raise ValueError(f"close on a failed {self.extension.upper()} writer")
        if not self._closed:
            self._guarded(self._finish)
            self._closed = True
        return self._snapshot()

    def abort(self) -> None:
        """Abandon the file after a failure elsewhere: nothing more is written."""
        self._fail()

    # --- for subclasses ---------------------------------------------------------------

    @abc.abstractmethod
    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Render and write one checked, non-empty batch; add its rows to ``_stats``."""

    @abc.abstractmethod
    def _finish(self) -> None:
        """Write the end of the file and flush it."""

    def _snapshot(self) -> WriterStats:
        """A copy of the running stats with ``bytes`` (written so far) and the total."""
        stats = dataclasses.replace(self._stats, bytes=self._counting.count)
        stats.replaced_chars = (
            stats.replaced_control_chars + stats.replaced_noncharacters + stats.replaced_surrogates
        )
        return stats

    def _guarded(self, action: Callable[..., None], *args: Any) -> None:
        """Run ``action(*args)``; on any error fail the writer, then re-raise."""
        try:
            action(*args)
        except BaseException:
            self._fail()
            raise

    def _fail(self) -> None:
        """Stop the writer after an error: it is unusable and later bytes go nowhere."""
        self._failed = True
        self._counting.abandon()
