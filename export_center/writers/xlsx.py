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

import importlib
import zipfile
from collections.abc import Sequence
from typing import Any, BinaryIO

from export_center.columns import Column, ColumnType
from export_center.values import DecimalColumn
from export_center.writers.base import CountingStream, StreamingWriter, WriterStats
from export_center.writers.xlsx_cells import MAX_NUMERIC_DIGITS, CellRenderer
from export_center.writers.xlsx_parts import SHEET_END, package_parts, sheet_head
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
    ):
        self._counting = counting
        self._stats = stats
        self._sheet_row_limit = sheet_row_limit
        self._force_zip64 = force_zip64
        self._fast_deflate = _isal_zlib if compresslevel == 1 else None
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
        for name, text in package_parts(self._stats.sheets).items():
            self._zip.writestr(name, text.encode("utf-8"))
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
        if self._fast_deflate is not None and hasattr(self._sheet, "_compressor"):
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
        self._sheet.write(SHEET_END)
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

    # --- rendering --------------------------------------------------------------------

    def _render_rows(self, chunk: Sequence[Sequence[Any]], first: int, count: int) -> str:
        """Render rows ``first .. first+count-1`` as ``<row>`` elements, column by column."""
        numbers = [str(n) for n in range(first, first + count)]
        cells = [
            render(values, numbers) for render, values in zip(self._renderers, chunk, strict=True)
        ]
        rows = zip(numbers, zip(*cells, strict=True), strict=True)
        return "".join([f'<row r="{n}">{"".join(row)}</row>' for n, row in rows])


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
