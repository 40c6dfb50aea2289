"""Shard parts of an export file, and the file assembled from them.

A sharded export renders each shard's rows (a day window, say) into a *part*, stored
as a sequence of byte *segments* (one per checkpoint); at finalize the parts are
joined in shard order into the file. The rule: the file is byte for byte the one
that ``CsvWriter`` or ``XlsxWriter`` writes from all rows in one go (same columns,
time zone and settings), whatever the number of shards and wherever the segments or
batches end. Tests: ``tests/unit/test_writer_parts.py``.

* CSV: :class:`CsvPartWriter` writes a shard's rows without BOM and header;
  :func:`csv_head` gives the BOM and the header row. ``csv_head(columns) + part_1 +
  ... + part_n`` is the file, which :func:`assemble_csv` streams to an output (or the
  storage concatenates the parts itself and checks :func:`csv_stats`).
* XLSX: :class:`XlsxFragmentWriter` writes a shard's rows as a *fragment*: the
  ``<row>`` elements of :class:`~export_center.writers.xlsx.XlsxWriter` with the row
  numbers left out, because they (and the sheet breaks) depend on the rows of earlier
  shards. :func:`assemble_xlsx` streams the fragments, numbers the rows, splits the
  sheets and writes the ZIP package through the same
  :class:`~export_center.writers.xlsx.XlsxPackage` as ``XlsxWriter``, which hands rows
  to the compressor in 1,000-row chunks counted per sheet. So the assembled file is
  identical to ``XlsxWriter``'s even with ISA-L's deflate, whose output depends on how
  its input is cut (zlib's does not). Only the package's clock differs: ZIP entry
  times and ``docProps/core.xml`` say when the file was written.
* Stats: each part writer counts its own cells (rows, truncated cells, replaced
  characters, invalid numbers; ``sheets=0``, ``bytes`` of the part). ``checkpoint()``
  returns them at a segment boundary, ``WriterStats.to_dict`` / ``from_dict`` store
  them, and a resumed part writer takes them as ``resume_from`` and continues
  counting from there (the *writer* continues, so the cap check and the counts stay
  right; the caller never adds a part's pieces). The file's stats come from
  :func:`csv_stats` / :func:`assemble_csv` or :func:`assemble_xlsx`, given
  ``WriterStats.total`` of the parts' last checkpoints: equal to what the single
  writer reports (rows, sheets, bytes and every count, the header's included).

Fragment format (``XlsxFragmentWriter``, read by ``assemble_xlsx``): UTF-8, one
``<row>...</row>`` per row with no attribute, its cells exactly as ``XlsxWriter``
writes them except that each cell reference holds :data:`ROW_NUMBER_MARK` (the byte
0x00) where the row number goes: ``<row><c r="A\\x00"><v>7</v></c></row>``. XML 1.0
cannot carry U+0000 and the writers replace it in every text (E08), and cell text is
XML-escaped (``<`` is ``&lt;``), so ``<row>``, ``</row>`` and the mark occur only
where the writer put them: row boundaries and numbers are found by byte search,
whatever the chunks and even if a chunk ends inside a UTF-8 character.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.filespec import CsvOptions
from export_center.writers.base import CountingStream, StreamingWriter, WriterStats, wall_clock
from export_center.writers.csv import CsvWriter
from export_center.writers.xlsx import (
    CHUNK_ROWS,
    EXCEL_MAX_ROWS,
    XlsxPackage,
    check_xlsx_columns,
    column_letter,
    slice_column,
)
from export_center.writers.xlsx_cells import CellRenderer

__all__ = [
    "ROW_NUMBER_MARK",
    "CheckpointedWriter",
    "CsvPartWriter",
    "XlsxFragmentWriter",
    "assemble_csv",
    "assemble_xlsx",
    "csv_head",
    "csv_stats",
]

ROW_NUMBER_MARK = "\x00"
"""What a fragment's cell references hold in place of the row number (``A\\x00``)."""

_MARK = ROW_NUMBER_MARK.encode("ascii")
_ROW_START = b"<row>"
_ROW_END = b"</row>"
_MB = 1024 * 1024


class CheckpointedWriter(StreamingWriter):
    """The frame of a part writer: its running stats can be read at any segment boundary.

    A format's part writer (``formats.FileFormat.open_part``) is a subclass: the
    format's cell rules (often its whole writer, as :class:`CsvPartWriter` shows) plus
    :meth:`checkpoint`.
    """

    def checkpoint(self) -> WriterStats:
        """The part's stats so far, for a checkpoint: every byte counted has been written.

        Call it between batches, when the bytes written since the last checkpoint
        become a segment; store ``checkpoint().to_dict()`` with the segment.

        Returns:
            Cumulative stats (``resume_from`` included): rows, the cell counts,
            ``replaced_chars`` total, ``bytes`` of the part so far, ``sheets=0``.

        Raises:
            ValueError: the writer failed.
        """
        if self._failed:
            raise ValueError(f"checkpoint on a failed {self.extension.upper()} writer")
        self._counting.flush()
        return self._snapshot()


class CsvPartWriter(CheckpointedWriter, CsvWriter):
    """Stream one shard's rows as a CSV part: ``CsvWriter`` rows without BOM and header.

    Every rule is ``CsvWriter``'s (same renderers), so ``csv_head(columns)`` followed by
    the parts of all shards in order is ``CsvWriter``'s file of all rows.

    Args:
        stream: binary output of the part (or of its current segment); not closed.
        columns: the export's columns, in file order.
        time_zone: IANA name of the export time zone (E13).
        max_bytes: cap on the part's bytes (``resume_from.bytes`` included), None for
            none; the file's cap is checked on the sum (:func:`csv_stats`).
        resume_from: the stats of the part's last checkpoint when the shard resumes
            (``WriterStats.from_dict`` of the stored dict); counts continue from it.
        options: the file's CSV options (encoding, delimiter, line ending; the header
            row and the BOM are :func:`csv_head`'s).

    Raises:
        ValueError: no columns, or an option outside its enum.
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
        resume_from: WriterStats | None = None,
        options: CsvOptions = CsvOptions(),
    ):
        super().__init__(
            stream,
            columns,
            time_zone=time_zone,
            max_bytes=max_bytes,
            header=False,
            resume_from=resume_from,
            options=options,
        )


def csv_head(columns: Sequence[Column], *, options: CsvOptions = CsvOptions()) -> bytes:
    """The first bytes of the CSV file: the BOM (``utf-8-bom``) and the header row.

    Args:
        columns: the export's columns, in file order.
        options: the file's CSV options; with ``header=False`` the head is the BOM of
            a ``utf-8-bom`` file, or nothing.

    Returns:
        Exactly what ``CsvWriter`` writes before the first row (E01, E06 guard on the
        titles, lone surrogates in titles as U+FFFD).

    Raises:
        ValueError: no columns, or an option outside its enum.
    """
    out = io.BytesIO()
    CsvWriter(out, columns, options=options).close()
    return out.getvalue()


def csv_stats(
    columns: Sequence[Column],
    part_stats: WriterStats,
    *,
    max_bytes: int | None = None,
    options: CsvOptions = CsvOptions(),
) -> WriterStats:
    """The stats of the CSV file made of :func:`csv_head` and the parts.

    Args:
        columns: the export's columns, in file order.
        part_stats: ``WriterStats.total`` of every part's last checkpoint (or close).
        max_bytes: the file's size cap in bytes, None for none.
        options: the file's CSV options, as given to the part writers.

    Returns:
        What ``CsvWriter`` reports for the same rows: ``sheets=1``, ``bytes`` with the
        head, ``replaced_surrogates`` with the header's.

    Raises:
        FileTooLarge: the file would be larger than ``max_bytes``.
    """
    head = _head_stats(columns, options)
    stats = _with_total(head + dataclasses.replace(part_stats, sheets=0))
    if max_bytes is not None and stats.bytes > max_bytes:
        raise FileTooLarge(
            f"file exceeds the size cap of {max_bytes / _MB:g} MB ({max_bytes} bytes)"
        )
    return stats


def assemble_csv(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    *,
    part_stats: WriterStats,
    max_bytes: int | None = None,
    options: CsvOptions = CsvOptions(),
) -> WriterStats:
    """Write the CSV file: :func:`csv_head`, then every part's segments in order.

    Args:
        stream: binary output of the file; it is not closed.
        columns: the export's columns, in file order.
        parts: per shard in shard order, its segments in order (bytes-like chunks,
            e.g. read lazily from storage); chunk boundaries do not matter.
        part_stats: ``WriterStats.total`` of every part's last checkpoint.
        max_bytes: the file's size cap in bytes, None for none.
        options: the file's CSV options, as given to the part writers.

    Returns:
        The file's stats, as :func:`csv_stats`.

    Raises:
        FileTooLarge: checked before writing (from ``part_stats``) and while writing.
        ValueError: the parts do not hold ``part_stats.bytes`` bytes.
    """
    stats = csv_stats(columns, part_stats, max_bytes=max_bytes, options=options)
    counting = CountingStream(stream, max_bytes)
    counting.write(csv_head(columns, options=options))
    for part in parts:
        for chunk in part:
            counting.write(chunk)
    counting.flush()
    if counting.count != stats.bytes:
        raise ValueError(f"the parts hold {counting.count} bytes, their stats {stats.bytes}")
    return stats


class XlsxFragmentWriter(CheckpointedWriter):
    """Stream one shard's rows as an XLSX fragment (see the module docstring).

    The cells are ``XlsxWriter``'s (:class:`CellRenderer`: E03-E15, time zone, the
    counts); only the row numbers are left for :func:`assemble_xlsx`. Rows are
    rendered and written in chunks of at most 1,000, so memory stays bounded by one
    batch (E16).

    Args:
        stream: binary output of the fragment (or of its current segment); not closed.
        columns: the export's columns, in file order (at most 16,384).
        time_zone: IANA name of the export time zone (E13).
        max_bytes: cap on the fragment's bytes (``resume_from.bytes`` included), None
            for none. Fragments are uncompressed, so the file's cap is enforced by
            :func:`assemble_xlsx`.
        resume_from: the stats of the part's last checkpoint when the shard resumes;
            counts continue from it.

    Attributes:
        content_type: ``application/octet-stream`` (a fragment is no file format).
        extension: ``xlsx-part``.

    Raises:
        ValueError: no columns, or more than 16,384.
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
    """

    content_type = "application/octet-stream"
    extension = "xlsx-part"

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
        resume_from: WriterStats | None = None,
    ):
        check_xlsx_columns(columns, EXCEL_MAX_ROWS - 1)
        super().__init__(
            stream, columns, time_zone=time_zone, max_bytes=max_bytes, resume_from=resume_from
        )
        cells = CellRenderer(self._stats, self._wall)
        self._renderers = [
            cells.column_renderer(ColumnType(c.type), column_letter(index))
            for index, c in enumerate(self._columns, start=1)
        ]

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Render a batch in chunks of at most 1,000 rows, each written with one call."""
        total = len(columns[0])
        for start in range(0, total, CHUNK_ROWS):
            take = min(total - start, CHUNK_ROWS)
            if take == total:
                chunk = columns
            else:
                chunk = [slice_column(values, start, start + take) for values in columns]
            marks = [ROW_NUMBER_MARK] * take
            cells = [
                render(values, marks) for render, values in zip(self._renderers, chunk, strict=True)
            ]
            text = "".join([f"<row>{''.join(row)}</row>" for row in zip(*cells, strict=True)])
            self._counting.write(text.encode("utf-8"))
            self._stats.rows += take

    def _finish(self) -> None:
        """Flush the output (a fragment has no trailer)."""
        self._counting.flush()


def assemble_xlsx(
    stream: BinaryIO,
    columns: Sequence[Column],
    fragments: Iterable[Iterable[bytes]],
    *,
    part_stats: WriterStats,
    max_bytes: int | None = None,
    sheet_row_limit: int = EXCEL_MAX_ROWS - 1,
    compresslevel: int = 1,
    force_zip64: bool = False,
) -> WriterStats:
    """Write the XLSX file from the shards' fragments, as ``XlsxWriter`` would.

    The rows are numbered in order over all fragments, the sheets split at
    ``sheet_row_limit`` data rows (E12: no row above 1,048,576) or after 1.5 GB of
    XML, the header repeated on each; the bytes equal ``XlsxWriter``'s for the same
    rows and settings (see the module docstring). The time zone is not needed: the
    fragments already hold the wall times.

    Memory: the fragments are read chunk by chunk; the assembler holds the current
    chunk, the row left unfinished by the chunk before, and the numbered rows of one
    1,000-row chunk (until the chunk is complete, as ``XlsxWriter`` does), never a
    part: about 1.7 MB for 256 kB chunks of a 21 MB fragment
    (``test_assembler_memory_is_one_segment_not_the_part``).

    Args:
        stream: binary output of the file (need not be seekable); it is not closed.
        columns: the export's columns, in file order, as given to the fragment writers.
        fragments: per shard in shard order, its segments in order (bytes-like
            chunks, e.g. read lazily from storage); a chunk may end anywhere, even
            inside a row, but each shard's fragment must end at a row's end.
        part_stats: ``WriterStats.total`` of every fragment's last checkpoint; its
            cell counts go into the result, its ``rows`` must match the fragments.
        max_bytes: the file's size cap in bytes, None for none; enforced while
            writing, as ``XlsxWriter`` does.
        sheet_row_limit: data rows per sheet, 1..1,048,575 (E12).
        compresslevel: deflate level 0-9 (as ``XlsxWriter``).
        force_zip64: write worksheet entries with ZIP64 headers (as ``XlsxWriter``).

    Returns:
        The file's stats, equal to ``XlsxWriter.close()``'s for the same rows: rows,
        sheets, bytes, and the cell counts of the parts plus the header's.

    Raises:
        FileTooLarge: the file grew past ``max_bytes``.
        ValueError: bad columns or ``sheet_row_limit``; a fragment that is not a
            sequence of ``<row>`` elements or ends inside a row; ``part_stats.rows``
            differs from the rows found. The output is then partial: delete it.
    """
    if not columns:
        raise ValueError("an export needs at least one column")
    check_xlsx_columns(columns, sheet_row_limit)
    counting = CountingStream(stream, max_bytes)
    stats = WriterStats()
    letters = [column_letter(i) for i in range(1, len(columns) + 1)]
    header_xml = CellRenderer(stats, wall_clock("UTC")).header_row(columns, letters)
    package: XlsxPackage | None = None
    try:
        package = XlsxPackage(
            counting,
            columns,
            header_xml,
            stats,
            sheet_row_limit=sheet_row_limit,
            compresslevel=compresslevel,
            force_zip64=force_zip64,
        )
        numbering = _RowNumbering(package)
        for index, fragment in enumerate(fragments, start=1):
            for chunk in fragment:
                numbering.feed(chunk)
            numbering.end_part(index)
        if stats.rows != part_stats.rows:
            raise ValueError(f"the fragments hold {stats.rows} rows, their stats {part_stats.rows}")
        package.close()
    except BaseException:
        counting.abandon()
        if package is not None:
            package.abandon()
        raise
    cells = dataclasses.replace(part_stats, rows=0, sheets=0, bytes=0)
    return _with_total(dataclasses.replace(stats + cells, bytes=counting.count))


class _RowNumbering:
    """Turn fragment bytes into numbered rows for an :class:`XlsxPackage`, chunk by chunk.

    ``feed`` takes any chunk: the row left unfinished by the chunk before is completed
    from the chunk's first bytes, then the chunk's complete rows are numbered and added
    straight from the chunk (no copy of it), and its unfinished end is held.
    """

    def __init__(self, package: XlsxPackage):
        self._package = package
        self._tail = bytearray()  # the unfinished row at the end of the last chunk

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """Number and add the rows that ``chunk`` completes; hold its unfinished end."""
        data = bytes(chunk) if isinstance(chunk, memoryview) else chunk
        pos = 0
        if self._tail:
            pos = self._tail_row_end(data)
            if pos < 0:
                self._tail += data
                return
            self._tail += data[:pos]
            self._add_rows(self._tail, 0, len(self._tail))
            self._tail = bytearray()
        end = data.rfind(_ROW_END, pos)
        if end < 0:
            self._tail += data[pos:]
            return
        end += len(_ROW_END)
        self._add_rows(data, pos, end)
        self._tail += data[end:]

    def end_part(self, index: int) -> None:
        """Check that shard ``index`` (1-based) ended at a row's end.

        Raises:
            ValueError: bytes after its last ``</row>``.
        """
        if self._tail:
            raise ValueError(f"the fragment of shard {index} ends inside a row")

    def _tail_row_end(self, data: bytes | bytearray) -> int:
        """Where in ``data`` the held row ends (after its ``</row>``), or -1 if not there.

        The ``</row>`` may begin in the held bytes: the tail holds no complete one, so
        only its last five bytes can start it.
        """
        before = bytes(self._tail[1 - len(_ROW_END) :])
        at = (before + data[: len(_ROW_END) - 1]).find(_ROW_END)
        if 0 <= at < len(before):
            return at + len(_ROW_END) - len(before)
        at = data.find(_ROW_END)
        return at if at < 0 else at + len(_ROW_END)

    def _add_rows(self, data: bytes | bytearray, pos: int, end: int) -> None:
        """Number the complete rows of ``data[pos:end]`` and add them to the package.

        Raises:
            ValueError: something other than a ``<row>`` element.
        """
        package = self._package
        start_len = len(_ROW_START)
        while pos < end:
            first, room = package.reserve(CHUNK_ROWS)
            pieces = []
            number = first
            while pos < end and number < first + room:
                if not data.startswith(_ROW_START, pos):
                    raise ValueError(f"not an XLSX fragment: {bytes(data[pos : pos + 20])!r}")
                stop = data.find(_ROW_END, pos) + len(_ROW_END)
                text = b"%d" % number
                pieces.append(
                    b'<row r="' + text + b'">' + data[pos + start_len : stop].replace(_MARK, text)
                )
                pos = stop
                number += 1
            package.add(b"".join(pieces), number - first)


def _head_stats(columns: Sequence[Column], options: CsvOptions) -> WriterStats:
    """The stats of a CSV file without rows (the head: BOM, header, its surrogates)."""
    return CsvWriter(io.BytesIO(), columns, options=options).close()


def _with_total(stats: WriterStats) -> WriterStats:
    """``stats`` with ``replaced_chars`` recomputed as the sum of its three kinds."""
    stats.replaced_chars = (
        stats.replaced_control_chars + stats.replaced_noncharacters + stats.replaced_surrogates
    )
    return stats
