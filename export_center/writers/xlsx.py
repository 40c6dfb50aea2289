"""Streaming XLSX writer: SpreadsheetML written straight into a ZIP stream.

openpyxl and XlsxWriter are not used for writing: they are several times slower
(see ``bench/writers_quick.py``), openpyxl turns text starting with ``=`` into
formulas (CASES E07) and corrupts integers beyond 15 digits (E04). This writer
renders rows column by column (one list comprehension per column, no call per cell
on the common paths) into one XML string per chunk of up to 1,000 rows and writes
each chunk once. Memory stays bounded by one batch (E16).

Cell rules (STRING, INTEGER, DECIMAL, BOOLEAN, DATE, DATETIME, time zones):
``writers.xlsx_cells``; text rules: ``writers.xlsx_text``; the package parts around
the rows (sheet head, styles, workbook, content types...): ``writers.xlsx_parts``.

Size checks (``size_checks=True``, for the parts of a byte split): worksheets are
deflated by zlib, whose state can be copied, so :meth:`XlsxWriter.write_within` can
tell the exact size of the file closed after the next rows before taking them
(``writers.xlsx_size``).

Sheet rules: at most ``sheet_row_limit`` data rows per sheet, then a new sheet
"Sheet2", ... with the header repeated (E12: no row number above 1,048,576).

Chunks (:class:`XlsxPackage`): a sheet's rows go to the compressor in chunks of 1,000
rows counted from the sheet's first data row (the last chunk of a sheet may be
shorter), whatever the batches were: a batch that ends inside a chunk is held until
the chunk is complete. ISA-L's deflate output depends on how its input is cut into
calls (zlib's does not), so this makes the file a function of the rows alone, the
same for any batch sizes and for a file assembled from shards
(``writers.parts.assemble_xlsx``), which uses the same package.

ZIP policy: the archive is written strictly forward (data descriptors) through a
non-seekable ``CountingStream`` that enforces the size cap while writing. ZIP64 is
*not* forced on the worksheet entries by default: Microsoft Excel has been reported
to reject small entries that carry ZIP64 extra fields in their local headers
(zlib-ng/minizip-ng#894, duckdb/duckdb-excel#64, kuba--/zip#384). Instead a sheet
is closed and a new one started before its XML reaches 1.5 GB uncompressed, which
keeps every entry under the 2 GiB limit of plain ZIP entries (checked between
chunks, so a sheet ends after at most one chunk past 1.5 GB). ``force_zip64=True``
restores ZIP64 entries for callers who prefer them.
"""

from __future__ import annotations

import dataclasses
import importlib
import zipfile
from collections.abc import Sequence
from typing import Any, BinaryIO

from export_center.columns import Column, ColumnType
from export_center.values import DecimalColumn
from export_center.writers.base import (
    CountingStream,
    StreamingWriter,
    WriterStats,
    check_columns,
)
from export_center.writers.xlsx_cells import MAX_NUMERIC_DIGITS, CellRenderer
from export_center.writers.xlsx_parts import package_parts, sheet_end, sheet_head
from export_center.writers.xlsx_size import closing_bytes, deflated_size
from export_center.writers.xlsx_text import MAX_CELL_UTF16_UNITS, excel_text

_isal_zlib: Any
try:  # optional: ISA-L's deflate, about 4x zlib level 1 at the same ratio
    _isal_zlib = importlib.import_module("isal.isal_zlib")
except ImportError:  # pragma: no cover - depends on the installation
    _isal_zlib = None

__all__ = [
    "CHUNK_ROWS",
    "EXCEL_MAX_ROWS",
    "MAX_CELL_UTF16_UNITS",
    "MAX_NUMERIC_DIGITS",
    "XlsxPackage",
    "XlsxWriter",
    "check_xlsx_columns",
    "column_letter",
    "excel_text",
    "slice_column",
]

EXCEL_MAX_ROWS = 1_048_576
"""Rows per worksheet in Excel, header included (E12)."""

_SHEET_XML_SOFT_LIMIT = 1_500_000_000
"""Start a new sheet once its uncompressed XML passed this many bytes (ZIP policy)."""

CHUNK_ROWS = 1_000
"""Rows of a sheet passed to the compressor in one call (counted from the sheet's first
data row; see "Chunks" above)."""


def column_letter(index: int) -> str:
    """Spreadsheet column name of a 1-based column index (1 -> A, 27 -> AA).

    Raises:
        ValueError: index is below 1 or above 16,384 (Excel's last column, XFD).
    """
    if not 1 <= index <= 16_384:
        raise ValueError(f"column index out of range: {index}")
    letters = ""
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


class XlsxPackage:
    """The ZIP package of one XLSX file, written forward: worksheets, then the rest.

    Both :class:`XlsxWriter` and ``writers.parts.assemble_xlsx`` write through it,
    so sheet splits, chunking and ZIP bytes are the same for both. The caller renders
    rows with their final row numbers: :meth:`reserve` says the number of the next
    row and how many rows may come in one piece, :meth:`add` takes them as UTF-8
    ``<row r="N">`` elements. The package starts a new sheet (header repeated) when
    the current one holds ``sheet_row_limit`` rows or, at a chunk boundary, 1.5 GB of
    XML; it hands rows to the compressor in whole chunks of :data:`CHUNK_ROWS`
    (see "Chunks" in the module docstring).

    Args:
        counting: the file's byte counter (size cap); the package writes only to it.
        columns: the export's columns, in file order (for the sheet head).
        header_xml: row 1, the ``<row r="1">`` element repeated on every sheet.
        stats: the stats the package adds ``sheets`` and ``rows`` to.
        sheet_row_limit: data rows per sheet, 1..1,048,575 (checked by the caller).
        compresslevel: deflate level 0-9 (ISA-L at level 1 when installed).
        force_zip64: write worksheet entries with ZIP64 headers.
        size_checks: keep each worksheet's deflate state copyable (zlib's, never
            ISA-L's, which cannot be copied) so that :meth:`size_if_closed` can tell
            the file's exact size before rows are added; the package parts' texts are
            then made once per sheet count, so the size told is the size written.

    Raises:
        FileTooLarge: from any method, when the file grows past the cap.
    """

    def __init__(
        self,
        counting: CountingStream,
        columns: Sequence[Column],
        header_xml: str,
        stats: WriterStats,
        *,
        sheet_row_limit: int,
        compresslevel: int,
        force_zip64: bool,
        size_checks: bool = False,
    ):
        self._counting = counting
        self._stats = stats
        self._sheet_row_limit = sheet_row_limit
        self._force_zip64 = force_zip64
        self._fast_deflate = _isal_zlib if compresslevel == 1 and not size_checks else None
        self._level = compresslevel
        self._size_checks = size_checks
        self._deflate: Any = None  # the open sheet's compressor (size_checks only)
        self._parts: dict[int, dict[str, bytes]] = {}  # by sheet count (size_checks only)
        self._deflated: dict[int, dict[str, int]] = {}  # their deflated sizes
        self._header_xml = header_xml
        self._sheet_head = sheet_head(columns)
        self._sheet: Any = None
        self._sheet_rows = 0  # data rows of the current sheet, held ones included
        self._sheet_bytes = 0  # XML bytes of the current sheet, held ones included
        self._held: list[bytes] = []  # rows of the current chunk not yet compressed
        self._zip = zipfile.ZipFile(
            counting,
            "w",
            compression=zipfile.ZIP_DEFLATED,
            compresslevel=compresslevel,
            allowZip64=True,
        )
        self._open_sheet()

    def reserve(self, wanted: int) -> tuple[int, int]:
        """Prepare for up to ``wanted`` (>= 1) rows, starting a new sheet when due.

        Returns:
            ``(first, room)``: the row number of the next row (2 for a sheet's first
            data row) and how many rows, 1..``wanted``, may be given to :meth:`add`
            now (up to the end of the chunk or sheet).
        """
        rows = self._sheet_rows
        if rows >= self._sheet_row_limit or (
            rows and rows % CHUNK_ROWS == 0 and self._sheet_bytes >= _SHEET_XML_SOFT_LIMIT
        ):
            self._close_sheet()
            self._open_sheet()
            rows = 0
        room = min(wanted, self._sheet_row_limit - rows, CHUNK_ROWS - rows % CHUNK_ROWS)
        return rows + 2, room

    def sheet_full(self) -> bool:
        """True when the next rows would start a new sheet (:meth:`reserve`'s rule)."""
        rows = self._sheet_rows
        return rows >= self._sheet_row_limit or bool(
            rows and rows % CHUNK_ROWS == 0 and self._sheet_bytes >= _SHEET_XML_SOFT_LIMIT
        )

    def size_if_closed(self, data: bytes = b"") -> int:
        """The file's size in bytes if ``data`` were added and the file closed now.

        Args:
            data: rows for the open sheet, as :meth:`add` takes them (no new sheet).

        Returns:
            The bytes out so far, plus the open sheet's deflate output of its held rows,
            ``data`` and its end (from a copy of the sheet's compressor; zlib's output
            does not depend on how its input is cut into calls), plus
            ``xlsx_size.closing_bytes``: exact below 2 GiB.

        Raises:
            ValueError: the package was opened without ``size_checks``.
        """
        if not self._size_checks:
            raise ValueError("size_if_closed needs a package opened with size_checks")
        trial = self._deflate.copy()
        rest = len(trial.compress(b"".join([*self._held, data, sheet_end()])))
        written = self._counting.count + rest + len(trial.flush())
        sheets = self._stats.sheets
        deflated = self._deflated.get(sheets)
        if deflated is None:
            deflated = {n: deflated_size(text, self._level) for n, text in self._texts(sheets)}
            self._deflated[sheets] = deflated
        return written + closing_bytes(
            sheet_names=[f"xl/worksheets/sheet{i}.xml" for i in range(1, sheets + 1)],
            open_sheet_zip64=self._force_zip64,
            parts=deflated,
            written=written,
        )

    def _texts(self, sheet_count: int) -> list[tuple[str, bytes]]:
        """The package parts written at close, UTF-8; made once per sheet count with
        ``size_checks`` (so ``docProps/core.xml``'s time is the one sizes were told for)."""
        if not self._size_checks:
            return [(n, t.encode("utf-8")) for n, t in package_parts(sheet_count).items()]
        parts = self._parts.get(sheet_count)
        if parts is None:
            parts = {n: t.encode("utf-8") for n, t in package_parts(sheet_count).items()}
            self._parts[sheet_count] = parts
        return list(parts.items())

    def add(self, data: bytes, count: int) -> None:
        """Append ``count`` rows (at most the ``room`` of the last :meth:`reserve`).

        Args:
            data: the rows' ``<row r="N">`` elements in UTF-8, numbered from the
                ``first`` that :meth:`reserve` returned.
            count: how many rows ``data`` holds.
        """
        self._sheet_rows += count
        self._sheet_bytes += len(data)
        self._stats.rows += count
        if self._sheet_rows % CHUNK_ROWS and self._sheet_rows < self._sheet_row_limit:
            self._held.append(data)  # the chunk is not complete yet
            return
        if self._held:
            self._held.append(data)
            data = b"".join(self._held)
            self._held.clear()
        self._sheet.write(data)

    def close(self) -> None:
        """End the last sheet, write the workbook parts and the ZIP directory, flush."""
        self._close_sheet()
        for name, text in self._texts(self._stats.sheets):
            self._zip.writestr(name, text)
        self._zip.close()
        self._counting.flush()

    def abandon(self) -> None:
        """After a failure: end the ZIP into the void (call ``counting.abandon()`` first).

        Closing the entry and the archive then writes nothing and raises nothing (no
        noise from finalizers later).
        """
        self._held.clear()
        try:
            if self._sheet is not None:
                self._sheet.close()
            self._zip.close()
        except Exception:  # noqa: S110 - best effort on a file that will be deleted
            pass
        self._sheet = None

    def _open_sheet(self) -> None:
        """Start ``sheetN.xml``: sheet head (frozen pane, widths) and the header row."""
        self._stats.sheets += 1
        # A name (not a ZipInfo) makes the entry use the archive's compresslevel.
        name = f"xl/worksheets/sheet{self._stats.sheets}.xml"
        self._sheet = self._zip.open(name, "w", force_zip64=self._force_zip64)
        if self._size_checks:
            # zipfile's own zlib compressor (raw deflate at the archive's level); its
            # copy() tells the size the rest of the sheet will take.
            self._deflate = getattr(self._sheet, "_compressor", None)
            if self._deflate is None or not hasattr(self._deflate, "copy"):
                raise RuntimeError("this Python's zipfile hides the entry's compressor")
        elif self._fast_deflate is not None and hasattr(self._sheet, "_compressor"):
            # Nothing is compressed yet: swap zipfile's zlib compressor for ISA-L's
            # (same raw deflate stream; zipfile still does CRC, sizes and headers).
            self._sheet._compressor = self._fast_deflate.compressobj(
                1, self._fast_deflate.DEFLATED, -15
            )
        head = (self._sheet_head(self._stats.sheets == 1) + self._header_xml).encode("utf-8")
        self._sheet.write(head)
        self._sheet_rows = 0
        self._sheet_bytes = len(head)

    def _close_sheet(self) -> None:
        """Write the held rows, end the current sheet's XML and its ZIP entry."""
        if self._held:
            self._sheet.write(b"".join(self._held))
            self._held.clear()
        self._sheet.write(sheet_end())
        self._sheet.close()
        self._sheet = None


class XlsxWriter(StreamingWriter):
    """Stream rows into an XLSX workbook with typed cells.

    The frame (``write_rows``, ``write_columns``, ``close``, ``abort``, the closed and
    failed states, the stats) is :class:`~export_center.writers.base.StreamingWriter`'s
    and the cells are :class:`~export_center.writers.xlsx_cells.CellRenderer`'s; this
    class cuts batches into chunks and the :class:`XlsxPackage` writes sheets and the
    ZIP archive. ``write_columns`` fills the current sheet until it holds
    ``sheet_row_limit`` data rows, then starts a new sheet with the header repeated
    (E12). The file depends on the rows and the settings only, not on the batches.

    Args:
        stream: binary output (need not be seekable); it is not closed by ``close()``.
        columns: the export's columns, in file order (at most 16,384).
        time_zone: IANA name of the export time zone for aware datetimes (E13); a wall
            time repeated by a DST fall-back is written as text with its UTC offset.
        max_bytes: file size cap in bytes (None = unlimited); ``write_rows`` raises
            ``errors.FileTooLarge`` as soon as the file would grow past it.
        sheet_row_limit: data rows per sheet, 1..1,048,575 (E12).
        compresslevel: deflate level 0-9; 1 is the fastest and, on export data, only
            a few percent larger than 6. At level 1 the worksheets are deflated with
            ISA-L (package ``isal``) when it is installed: about four times faster
            than zlib, standard deflate, the same size.
        force_zip64: write worksheet entries with ZIP64 headers (see the ZIP policy
            in the module docstring); False by default.
        size_checks: allow :meth:`write_within` (worksheets deflated by zlib at
            ``compresslevel``, not ISA-L; the same bytes otherwise).

    Attributes:
        content_type: the XLSX MIME type.
        extension: ``xlsx``.
    """

    content_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    extension = "xlsx"

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
        sheet_row_limit: int = EXCEL_MAX_ROWS - 1,
        compresslevel: int = 1,
        force_zip64: bool = False,
        size_checks: bool = False,
    ):
        check_xlsx_columns(columns, sheet_row_limit)
        super().__init__(stream, columns, time_zone=time_zone, max_bytes=max_bytes)
        self._letters = [column_letter(i) for i in range(1, len(self._columns) + 1)]
        self._package: XlsxPackage | None = None
        cells = CellRenderer(self._stats, self._wall)
        self._renderers = [
            cells.column_renderer(ColumnType(c.type), letter)
            for c, letter in zip(self._columns, self._letters, strict=True)
        ]
        header_xml = cells.header_row(self._columns, self._letters)

        def open_package() -> None:
            self._package = XlsxPackage(
                self._counting,
                self._columns,
                header_xml,
                self._stats,
                sheet_row_limit=sheet_row_limit,
                compresslevel=compresslevel,
                force_zip64=force_zip64,
                size_checks=size_checks,
            )

        self._guarded(open_package)

    # --- StreamingWriter hooks ---------------------------------------------------------

    def _fail(self) -> None:
        """After a failure: the counting stream is abandoned, then the ZIP ended."""
        super()._fail()
        if self._package is not None:
            self._package.abandon()

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Render a batch in pieces that never cross a chunk or sheet boundary (E12)."""
        package = self._package
        assert package is not None  # opened in __init__, or the writer failed
        total = len(columns[0])
        done = 0
        while done < total:
            first, take = package.reserve(total - done)
            if done == 0 and take == total:
                chunk = columns
            else:
                chunk = [slice_column(values, done, done + take) for values in columns]
            package.add(self._render_rows(chunk, first, take).encode("utf-8"), take)
            done += take

    def _finish(self) -> None:
        """End the last sheet, write the workbook parts and the ZIP directory."""
        assert self._package is not None  # opened in __init__, or the writer failed
        self._package.close()

    # --- a part of a byte split (packaging.split) ----------------------------------------

    def write_within(
        self, columns: Sequence[Sequence[Any]], max_bytes: int, *, step: int = CHUNK_ROWS
    ) -> list[Sequence[Any]] | None:
        """Append the leading rows of a batch while the file, closed right after them,
        stays within ``max_bytes``; give back the others.

        Rule (exact: :meth:`XlsxPackage.size_if_closed`): rows are taken in the pieces
        :meth:`XlsxPackage.reserve` allows (never past a chunk of 1,000 rows, nor past
        the end of a batch). A piece is taken whole when the file closed after it is
        at most ``max_bytes``; otherwise that piece and the rest are given back and the
        file is full. Only while the file holds no row yet are the most leading rows
        of the piece that fit taken (at least one, or none when not even one fits). A
        full sheet also ends the file (the rest is given back): a file written this
        way is one sheet. Given batches that end at multiples of 1,000 rows of the
        file (the package's blocks), the file ends at such a multiple unless its first
        block does not fit. The file written is the one :meth:`write_columns` would
        write for the rows taken.

        Args:
            columns: one batch, column-major, as :meth:`write_columns` takes it.
            max_bytes: the most bytes the closed file may take.
            step: unused: the batches set the step (kept for the interface that
                Parquet's writer shares, ``packaging.split.SizedWriter``).

        Returns:
            None when every row was taken, else the rows not taken (column-major
            slices of ``columns``); the file is then full and should be closed.

        Raises:
            ValueError: a writer opened without ``size_checks``, closed or failed, or a
                badly shaped batch.
        """
        del step
        if self._closed or self._failed:
            raise ValueError("write to a closed or failed XLSX writer")
        check_columns(columns, len(self._keys))
        result: list[list[Sequence[Any]] | None] = [None]

        def write() -> None:
            result[0] = self._write_within(columns, max_bytes)

        self._guarded(write)
        return result[0]

    def _write_within(
        self, columns: Sequence[Sequence[Any]], max_bytes: int
    ) -> list[Sequence[Any]] | None:
        package = self._package
        assert package is not None  # opened in __init__, or the writer failed
        total = len(columns[0])
        done = 0
        while done < total:
            if package.sheet_full():
                break
            first, take = package.reserve(total - done)
            piece = [slice_column(values, done, done + take) for values in columns]
            before = dataclasses.replace(self._stats)
            rows = self._render_row_list(piece, first, take)
            data = "".join(rows).encode("utf-8")
            if package.size_if_closed(data) <= max_bytes:
                package.add(data, take)
                done += take
                continue
            _restore(self._stats, before)  # the cells rendered are not written
            if self._stats.rows == 0:  # an empty file takes the most rows that fit
                fitting = self._most_rows_within(rows, max_bytes)
                if fitting:
                    head = [slice_column(values, 0, fitting) for values in piece]
                    package.add(
                        "".join(self._render_row_list(head, first, fitting)).encode(), fitting
                    )
                    done += fitting
            break
        if done == total:
            return None
        return [slice_column(values, done, total) for values in columns]

    def fit_within(self, max_bytes: int, *, step: int = CHUNK_ROWS) -> list[Sequence[Any]] | None:
        """Before close: None, since :meth:`write_within` checked every row it took
        with the file's end included (the interface Parquet's writer shares)."""
        del max_bytes, step
        if self._failed:
            raise ValueError("fit_within on a failed XLSX writer")
        return None

    def _most_rows_within(self, rows: Sequence[str], max_bytes: int) -> int:
        """The most leading rendered rows whose file, closed after them, fits."""
        package = self._package
        assert package is not None
        low, high = 0, len(rows)  # low rows fit, high rows do not
        while high - low > 1:
            middle = (low + high) // 2
            if package.size_if_closed("".join(rows[:middle]).encode("utf-8")) <= max_bytes:
                low = middle
            else:
                high = middle
        return low

    # --- rendering --------------------------------------------------------------------

    def _render_rows(self, chunk: Sequence[Sequence[Any]], first: int, count: int) -> str:
        """Render rows ``first .. first+count-1`` as ``<row>`` elements, column by column."""
        return "".join(self._render_row_list(chunk, first, count))

    def _render_row_list(self, chunk: Sequence[Sequence[Any]], first: int, count: int) -> list[str]:
        """The ``<row>`` elements of rows ``first .. first+count-1``, one string each."""
        numbers = [str(n) for n in range(first, first + count)]
        cells = [
            render(values, numbers) for render, values in zip(self._renderers, chunk, strict=True)
        ]
        rows = zip(numbers, zip(*cells, strict=True), strict=True)
        return [f'<row r="{n}">{"".join(row)}</row>' for n, row in rows]


def _restore(stats: WriterStats, saved: WriterStats) -> None:
    """Put the running counts back to ``saved`` in place (the renderers hold ``stats``)."""
    for field in dataclasses.fields(stats):
        setattr(stats, field.name, getattr(saved, field.name))


def check_xlsx_columns(columns: Sequence[Column], sheet_row_limit: int) -> None:
    """Check what an XLSX file allows: at most 16,384 columns, a valid sheet row limit.

    Args:
        columns: the export's columns (an empty list is left to the writer frame,
            which reports it first).
        sheet_row_limit: data rows per sheet.

    Raises:
        ValueError: more than 16,384 columns, or ``sheet_row_limit`` outside
            1..1,048,575 (E12).
    """
    if len(columns) > 16_384:
        raise ValueError(f"XLSX allows at most 16,384 columns, got {len(columns)}")
    if columns and not 1 <= sheet_row_limit <= EXCEL_MAX_ROWS - 1:
        raise ValueError(
            f"sheet_row_limit must be between 1 and {EXCEL_MAX_ROWS - 1}, got {sheet_row_limit}"
        )


def slice_column(values: Sequence[Any], start: int, stop: int) -> Sequence[Any]:
    """``values[start:stop]`` of one column of a batch, keeping the :class:`DecimalColumn` mark.

    Args:
        values: one column's values.
        start, stop: the row range, as for a slice.

    Returns:
        The slice, a ``DecimalColumn`` when ``values`` is one.
    """
    part = values[start:stop]
    return DecimalColumn(part) if type(values) is DecimalColumn else part
