"""The delivered file: the format's writer as it is, in gzip, or in a ZIP of parts.

:func:`open_package` opens a :class:`Package`, an ``ExportWriter`` that wraps the
format's writer(s) and delivers one of:

* plain (``FileSpec.is_plain``): the writer's bytes as they are, ``{stem}.{ext}``;
* gzip (CSV, JSON Lines): ``{stem}.{ext}.gz``, gzip with mtime 0 and no file name;
* a ZIP (``compression: zip`` and every split): ``{stem}.zip``, written forward only
  (data descriptors, never a seek), every entry dated ``zip_time``, deflated, ZIP64
  records always (a part's size is not known before it ends). Entries in order: the
  file ``{stem}.{ext}`` or the parts ``{stem}-part-0001.{ext}``, ``-0002``..., then
  ``manifest.json``, the manifest of the parts (it cannot hold the ZIP's own hash).
  Each part is complete on its own: its own CSV header, workbook or Parquet file.
  Where a part ends: ``packaging.split``.

Determinism: the bytes depend on the rows only, never on the batches. The writers'
output does not depend on batching, and every compressor is fed through a
``BlockStream`` (blocks of 64 KiB) so it sees the same calls whatever the batches.

``max_bytes`` caps the delivered bytes (the ``.gz`` or the ZIP): ``FileTooLarge``
fails the package, which then writes nothing more; the caller deletes the object.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import gzip
import importlib
import json
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from export_center.columns import Column
from export_center.errors import FileTooLarge, PermanentExportError
from export_center.filespec import MAX_PARTS, FileSpec
from export_center.packaging.manifest import ArchiveEntry, FileEntry
from export_center.packaging.split import (
    BLOCK_ROWS,
    ByteMeter,
    SizedWriter,
    join_batches,
    open_sized_writer,
    row_additive,
    slice_batch,
)
from export_center.packaging.streams import BlockStream, HashingStream
from export_center.packaging.totals import ControlTotals
from export_center.writers.base import CountingStream, ExportWriter, WriterStats, check_columns
from export_center.writers.formats import FileFormat

__all__ = ["MANIFEST_NAME", "ManifestMaker", "Package", "open_package", "part_name"]

_isal_gzip: Any
_isal_zlib: Any
try:  # ISA-L's deflate (package ``isal``, a dependency): about four times zlib's speed
    _isal_gzip = importlib.import_module("isal.igzip")
    _isal_zlib = importlib.import_module("isal.isal_zlib")
except ImportError:  # pragma: no cover - isal is a dependency
    _isal_gzip = _isal_zlib = None

MANIFEST_NAME = "manifest.json"
"""The last entry of every ZIP a package writes."""

GZIP_LEVEL = 6
"""zlib's level of gzip and ZIP entries when ISA-L is not installed."""
ZIP_LEVEL = 6
FAST_LEVEL = 2
"""ISA-L's level (0..3) of gzip and ZIP entries. On the ORDERS CSV (200,000 rows) its
level 2 makes a ZIP 13 % larger than zlib's level 6 in under half the time; level 3
gains 1.5 % of size for 20 % more time."""


def _gzip_file(stream: Any) -> gzip.GzipFile:
    """A gzip writer on ``stream``: mtime 0 and no file name (the bytes depend on the
    data only), ISA-L's deflate when the ``isal`` package is there, else zlib's."""
    if _isal_gzip is not None:
        fast: gzip.GzipFile = _isal_gzip.GzipFile(
            filename="", mode="wb", compresslevel=FAST_LEVEL, fileobj=stream, mtime=0
        )
        return fast
    return gzip.GzipFile(filename="", mode="wb", compresslevel=GZIP_LEVEL, fileobj=stream, mtime=0)


def _fast_deflate(entry: Any) -> None:
    """Swap a just-opened ZIP entry's zlib compressor for ISA-L's (the same raw deflate
    stream; zipfile still writes the CRC, sizes and headers), as the XLSX writer does.
    Fed through a ``BlockStream``, its output depends on the data only."""
    if _isal_zlib is not None and hasattr(entry, "_compressor"):
        entry._compressor = _isal_zlib.compressobj(FAST_LEVEL, _isal_zlib.DEFLATED, -15)


ManifestMaker = Callable[[Sequence[FileEntry], ControlTotals], Mapping[str, Any]]
"""Makes the ``manifest.json`` inside a ZIP from the parts and the totals (the caller
adds the task's fields and signs it)."""


def part_name(file_stem: str, extension: str, number: int) -> str:
    """The name of part ``number`` (from 1): ``{stem}-part-0001.{ext}``."""
    return f"{file_stem}-part-{number:04d}.{extension}"


@dataclass(slots=True)
class _Part:
    """One file being written: its writer, the stream that hashes it, its ZIP entry."""

    name: str
    writer: ExportWriter
    hashing: HashingStream
    block: BlockStream | None
    entry: Any  # the ZIP entry's write handle, or None
    sized: SizedWriter | None = None  # the writer again, when cut by trial
    rows: int = 0


class Package:
    """An ``ExportWriter`` that delivers the file a :class:`FileSpec` asks for.

    Use :func:`open_package`. After :meth:`close`: :attr:`files` (the delivered file,
    or each part in the ZIP), :attr:`archive` (the ZIP or None), :attr:`totals`
    (:class:`ControlTotals` of every row), :attr:`delivered_name`,
    :attr:`content_type` and :attr:`extension` (``zip``, ``csv.gz``, ``csv``...).
    """

    def __init__(
        self,
        stream: BinaryIO,
        file_format: FileFormat,
        columns: Sequence[Column],
        spec: FileSpec,
        *,
        time_zone: str,
        max_bytes: int | None,
        file_stem: str,
        zip_time: _dt.datetime,
        sheet_row_limit: int | None = None,
        manifest: ManifestMaker | None = None,
    ):
        if not columns:
            raise ValueError("an export needs at least one column")
        if spec.compression == "gzip" and spec.archived:
            raise ValueError("a split export is a ZIP; gzip does not apply")
        self._format = file_format
        self._columns = list(columns)
        self._keys = [c.key for c in self._columns]
        self._spec = spec
        self._time_zone = time_zone
        self._sheet_row_limit = sheet_row_limit
        self._stem = file_stem
        self._zip_time = (zip_time.year, zip_time.month, zip_time.day) + (
            zip_time.hour,
            zip_time.minute,
            zip_time.second,
        )
        self._manifest = manifest
        self._counting = CountingStream(stream, max_bytes)
        self._delivered = HashingStream(self._counting)
        self.totals = ControlTotals(self._columns)
        self._stats = WriterStats()
        self._done: list[FileEntry] = []
        self._part: _Part | None = None
        self._failed = False
        self._closed = False
        self._gzip: gzip.GzipFile | None = None
        self._zip: zipfile.ZipFile | None = None
        self._meter: ByteMeter | None = None
        ext = file_format.extension
        if spec.archived:
            self.extension, self.content_type = "zip", "application/zip"
        elif spec.compression == "gzip":
            self.extension, self.content_type = f"{ext}.gz", "application/gzip"
        else:
            self.extension, self.content_type = ext, file_format.content_type
        self.delivered_name = f"{file_stem}.{self.extension}"
        split = spec.split
        self._max_rows = split.max_rows_per_file if split else None
        self._max_part_bytes = split.max_bytes_per_file if split else None
        self._additive = row_additive(file_format)
        # compressed parts cut by bytes: rows wait here until a block is whole
        self._sized = self._max_part_bytes is not None and not self._additive
        self._queue: list[Sequence[Sequence[Any]]] = []
        self._queued = 0
        self._rows_out = 0  # rows of the parts ended
        try:
            if spec.archived:
                self._zip = zipfile.ZipFile(
                    self._delivered, "w", zipfile.ZIP_DEFLATED, allowZip64=True
                )
                if self._max_part_bytes is not None and self._additive:
                    self._meter = ByteMeter(self._open_writer)
            elif spec.compression == "gzip":
                self._gzip = _gzip_file(self._delivered)
                self._open_part(self.delivered_name, BlockStream(self._gzip))
            else:
                self._open_part(self.delivered_name, None)
        except BaseException:
            self.abort()
            raise

    # --- the format's writer ----------------------------------------------------------

    def _open_writer(self, stream: BinaryIO) -> ExportWriter:
        return self._format.open_writer(
            stream,
            self._columns,
            time_zone=self._time_zone,
            max_bytes=None,  # the cap applies to the delivered bytes (self._counting)
            sheet_row_limit=self._sheet_row_limit,
            csv=self._spec.csv,  # every part, and the byte meter, with the file's options
        )

    def _open_part(self, name: str, block: BlockStream | None) -> None:
        entry = None
        if self._zip is not None:
            info = zipfile.ZipInfo(name, date_time=self._zip_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            if len(self._done) >= MAX_PARTS:
                raise PermanentExportError(
                    f"the split makes more than {MAX_PARTS:,} parts; ask for larger parts "
                    "(options.split.maxRowsPerFile or maxBytesPerFile)",
                    code="TOO_MANY_PARTS",
                )
            entry = self._zip.open(info, "w", force_zip64=True)
            _fast_deflate(entry)
            block = BlockStream(entry)
        target: Any = block if block is not None else self._delivered
        hashing = self._delivered if target is self._delivered else HashingStream(target)
        if self._sized:
            sized = open_sized_writer(
                self._format,
                hashing,  # type: ignore[arg-type]
                self._columns,
                time_zone=self._time_zone,
                sheet_row_limit=self._sheet_row_limit,
            )
            self._part = _Part(name, sized, hashing, block, entry, sized)
            return
        self._part = _Part(name, self._open_writer(hashing), hashing, block, entry)  # type: ignore[arg-type]

    def _next_part_name(self) -> str:
        if self._spec.split is None:
            return f"{self._stem}.{self._format.extension}"
        return part_name(self._stem, self._format.extension, len(self._done) + 1)

    def _end_part(self) -> None:
        part = self._part
        assert part is not None
        stats = part.writer.close()
        # Each part is a file of its own: the sheets of the largest part, not their sum
        # (a split XLSX export is not "rows split over N sheets").
        sheets = max(self._stats.sheets, stats.sheets)
        self._stats = dataclasses.replace(self._stats + stats, sheets=sheets)
        if part.block is not None:
            part.block.close()
        if part.entry is not None:
            part.entry.close()
        self._part = None
        self._rows_out += part.rows
        if self._zip is not None:  # a file inside the ZIP: its own size and hash
            self._done.append(
                FileEntry(part.name, part.rows, part.hashing.count, part.hashing.hexdigest())
            )

    # --- ExportWriter -----------------------------------------------------------------

    def write_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append rows keyed by column key (see ``ExportWriter.write_rows``)."""
        self.write_columns([[row.get(key) for row in rows] for key in self._keys])

    def write_columns(self, columns: Sequence[Sequence[Any]]) -> None:
        """Append one column-major batch, cutting parts where the split says.

        Raises:
            ValueError: a closed or failed package, or a badly shaped batch.
            FileTooLarge: the delivered bytes passed ``max_bytes``, or a row does not
                fit in an empty part of ``maxBytesPerFile``.
        """
        if self._closed or self._failed:
            raise ValueError("write to a closed or failed package")
        check_columns(columns, len(self._keys))
        try:
            self.totals.add(columns)
            self._write(columns)
        except BaseException:
            self.abort()
            raise

    def _write(self, columns: Sequence[Sequence[Any]]) -> None:
        if self._sized:
            if len(columns[0]):
                self._queue.append(columns)
                self._queued += len(columns[0])
            self._drain(final=False)
            return
        total = len(columns[0])
        done = 0
        while done < total:
            if self._part is None:
                self._open_part(self._next_part_name(), None)
            part = self._part
            assert part is not None
            take = total - done
            if self._max_rows is not None:
                take = min(take, self._max_rows - part.rows)
            chunk = columns if take == total else slice_batch(columns, done, done + take)
            if self._meter is not None and self._max_part_bytes is not None:
                room = self._max_part_bytes - part.hashing.count
                fitting = self._meter.fit(chunk, room)
                if fitting == 0:
                    if part.rows == 0:
                        raise FileTooLarge(
                            f"row {self.totals.rows - total + done + 1} does not fit in a part of "
                            f"maxBytesPerFile {self._max_part_bytes} bytes"
                        )
                    self._end_part()
                    continue
                if fitting < take:
                    chunk, take = slice_batch(chunk, 0, fitting), fitting
            part.writer.write_columns(chunk)
            part.rows += take
            done += take
            if self._part_full(part):
                self._end_part()

    def _part_full(self, part: _Part) -> bool:
        if self._spec.split is None:
            return False
        # by bytes: full when the next row was refused (handled in _write)
        return self._max_rows is not None and part.rows >= self._max_rows

    # --- compressed parts cut by bytes (packaging.split) --------------------------------

    def _take(self, count: int) -> Sequence[Sequence[Any]]:
        """The first ``count`` queued rows as one batch."""
        pieces: list[Sequence[Sequence[Any]]] = []
        wanted = count
        while wanted:
            head = self._queue[0]
            size = len(head[0])
            if size <= wanted:
                pieces.append(self._queue.pop(0))
                wanted -= size
            else:
                pieces.append(slice_batch(head, 0, wanted))
                self._queue[0] = slice_batch(head, wanted, size)
                wanted = 0
        self._queued -= count
        return pieces[0] if len(pieces) == 1 else join_batches(pieces)

    def _drain(self, *, final: bool) -> None:
        """Give the queued rows to the parts in whole blocks (the rest too if ``final``),
        then, if ``final``, have the last part check what it holds."""
        limit = self._max_part_bytes
        assert limit is not None
        while True:
            while self._queued:
                if self._part is None:
                    self._open_part(self._next_part_name(), None)
                part = self._part
                assert part is not None and part.sized is not None
                need = BLOCK_ROWS - part.rows % BLOCK_ROWS
                if self._max_rows is not None:
                    need = min(need, self._max_rows - part.rows)
                if self._queued < need and not final:
                    return
                block = self._take(min(need, self._queued))
                back = part.sized.write_within(block, limit, step=BLOCK_ROWS)
                self._given_back(part, len(block[0]), back)
                if self._part is part and self._part_full(part):
                    self._end_part()
            part = self._part
            if not final or part is None or part.sized is None:
                return
            back = part.sized.fit_within(limit, step=BLOCK_ROWS)
            if back is None:
                return
            self._given_back(part, 0, back)

    def _given_back(self, part: _Part, given: int, back: Sequence[Sequence[Any]] | None) -> None:
        """Count the rows a part kept; a part that gave rows back ends, and they lead
        the queue for the next part."""
        returned = len(back[0]) if back else 0
        part.rows += given - returned
        if back is None:
            return
        if part.rows == 0:
            raise FileTooLarge(
                f"row {self._rows_out + 1} does not fit in a part of maxBytesPerFile "
                f"{self._max_part_bytes} bytes"
            )
        self._end_part()
        if returned:
            self._queue.insert(0, back)
            self._queued += returned

    def close(self) -> WriterStats:
        """Finish every part, the manifest entry and the ZIP or gzip trailer.

        Returns:
            The stats summed over the parts, ``bytes`` the delivered bytes.

        Raises:
            FileTooLarge: the last bytes passed ``max_bytes``.
            ValueError: the package failed before.
        """
        if self._failed:
            raise ValueError("close on a failed package")
        if not self._closed:
            try:
                self._finish()
            except BaseException:
                self.abort()
                raise
            self._closed = True
        self._stats.bytes = self._delivered.count
        return self._stats

    def _finish(self) -> None:
        if self._sized:
            self._drain(final=True)
        if self._part is None and (self._zip is None or not self._done):
            self._open_part(self._next_part_name(), None)  # no rows: one empty file
        if self._part is not None:
            self._end_part()
        if self._meter is not None:
            self._meter.close()
        if self._zip is not None:
            body = (
                self._manifest(self._done, self.totals)
                if self._manifest is not None
                else self._default_manifest()
            )
            info = zipfile.ZipInfo(MANIFEST_NAME, date_time=self._zip_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            text = json.dumps(body, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
            self._zip.writestr(info, text.encode("utf-8"), compresslevel=ZIP_LEVEL)
            self._zip.close()
        else:
            if self._gzip is not None:
                self._gzip.close()
            self._done.append(
                FileEntry(
                    self.delivered_name,
                    self.totals.rows,
                    self._delivered.count,
                    self._delivered.hexdigest(),
                )
            )
        self._counting.flush()

    def _default_manifest(self) -> dict[str, Any]:
        """The parts' manifest when the caller gives none: unsigned."""
        return {
            "manifestVersion": 1,
            "format": self._format.name,
            "options": self._spec.to_json()["options"],
            "timeZone": self._time_zone,
            "columns": [
                {"key": c.key, "title": c.title, "type": str(c.type)} for c in self._columns
            ],
            "totalRows": self.totals.rows,
            "files": [entry.as_json() for entry in self._done],
            "archive": None,
            "controlTotals": self.totals.as_json(),
        }

    def abort(self) -> None:
        """Abandon the output after a failure: nothing more is written (the caller
        deletes the object).

        Every layer is closed into the abandoned stream, the open ZIP entry before the
        ZIP: a ZIP left with an open entry cannot close, and its finalizer would raise
        later ("Can't close the ZIP file while there is an open writing handle").
        """
        self._failed = True
        self._counting.abandon()
        part, self._part = self._part, None
        if part is not None:
            part.writer.abort()
            if part.block is not None:
                part.block.discard()
            if part.entry is not None:
                with contextlib.suppress(Exception):  # output that will be deleted
                    part.entry.close()
        for closer in (self._gzip, self._zip):
            try:
                if closer is not None:
                    closer.close()
            except Exception:  # noqa: S110 - best effort on output that will be deleted
                pass
        if self._meter is not None:
            self._meter.close()

    # --- after close ------------------------------------------------------------------

    @property
    def files(self) -> list[FileEntry]:
        """The delivered file, or each part inside the ZIP in order (after close)."""
        self._require_closed()
        return list(self._done)

    @property
    def archive(self) -> ArchiveEntry | None:
        """The ZIP's name, bytes and SHA-256, or None when not archived (after close)."""
        self._require_closed()
        if self._zip is None:
            return None
        return ArchiveEntry(self.delivered_name, self._delivered.count, self._delivered.hexdigest())

    def _require_closed(self) -> None:
        if not self._closed:
            raise ValueError("the package is not closed yet")


def open_package(
    stream: BinaryIO,
    file_format: FileFormat,
    columns: Sequence[Column],
    spec: FileSpec,
    *,
    time_zone: str,
    max_bytes: int | None,
    file_stem: str,
    zip_time: _dt.datetime,
    sheet_row_limit: int | None = None,
    manifest: ManifestMaker | None = None,
) -> Package:
    """Open the package of one export file.

    Args:
        stream: where the delivered bytes go (never closed, never seeked).
        file_format: the format's entry of ``writers.formats.FORMATS``.
        columns: the file's columns in output order (``FileSpec.project``'s).
        spec: the file the task asked for (compression, split, CSV options).
        time_zone: IANA name of the export time zone.
        max_bytes: the cap of the delivered bytes, or None.
        file_stem: the delivered name without extension (``orders-2024-01``).
        zip_time: the date of every ZIP entry (e.g. the task's creation, in UTC; from
            1980 on); fixed so that the bytes depend on the rows only.
        sheet_row_limit: XLSX data rows per sheet, None for the most.
        manifest: makes ``manifest.json`` in a ZIP from the parts and totals; None
            writes an unsigned manifest of the parts.

    Returns:
        The :class:`Package`.

    Raises:
        ValueError: no columns, or a spec that asks gzip of a split.
        FileTooLarge: the first bytes already pass ``max_bytes``.
    """
    return Package(
        stream,
        file_format,
        columns,
        spec,
        time_zone=time_zone,
        max_bytes=max_bytes,
        file_stem=file_stem,
        zip_time=zip_time,
        sheet_row_limit=sheet_row_limit,
        manifest=manifest,
    )
