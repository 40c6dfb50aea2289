"""The call shapes of a format's parts, and each format's openers behind them.

The format table (``writers.formats``) holds, per format, callables of one shape each:
:class:`WriterFactory` (the writer of a whole file), :class:`PartFactory` (a shard's
part writer), :class:`Assembler` (the parts joined into the file) and, for a compressed
format, :class:`SizedWriterFactory` (the writer of a part cut by bytes,
:class:`SizedWriter`). The functions here adapt those shapes to each writer's own
constructor: the CSV options reach the CSV writers only, the sheet row limit the XLSX
writer only, the export time zone Parquet's assembler.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO, Protocol

from export_center.columns import Column
from export_center.filespec import CsvOptions
from export_center.writers.base import ExportWriter, WriterStats
from export_center.writers.csv import CsvWriter
from export_center.writers.jsonl import JsonlPartWriter, JsonlWriter, assemble_jsonl
from export_center.writers.parquet import ParquetWriter
from export_center.writers.parquet_parts import ParquetPartWriter, assemble_parquet
from export_center.writers.parts import (
    CsvPartWriter,
    XlsxFragmentWriter,
    assemble_csv,
    assemble_xlsx,
)
from export_center.writers.xlsx import EXCEL_MAX_ROWS, XlsxWriter

__all__ = [
    "Assembler",
    "PartFactory",
    "PartWriter",
    "SizedWriter",
    "SizedWriterFactory",
    "WriterFactory",
    "join_csv",
    "join_jsonl",
    "join_parquet",
    "join_xlsx",
    "open_csv",
    "open_csv_part",
    "open_jsonl",
    "open_jsonl_part",
    "open_parquet",
    "open_parquet_sized",
    "open_parquet_part",
    "open_xlsx",
    "open_xlsx_part",
    "open_xlsx_sized",
]


class PartWriter(ExportWriter, Protocol):
    """A shard's part writer: an :class:`ExportWriter` whose running stats can be read
    at a segment boundary (``writers.parts``)."""

    def checkpoint(self) -> WriterStats:
        """The part's cumulative stats so far (every byte counted has been written)."""
        ...


class WriterFactory(Protocol):
    """Opens the streaming writer of one whole file (the single-stream path)."""

    def __call__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str,
        max_bytes: int | None,
        sheet_row_limit: int | None = None,
        csv: CsvOptions = CsvOptions(),
    ) -> ExportWriter:
        """Open the writer.

        ``sheet_row_limit`` is the data rows per sheet, None for the format's most
        (:attr:`FileFormat.sheet_rows`); formats without sheets ignore it. ``csv`` is
        the file's CSV options; formats other than CSV ignore them.
        """
        ...


class PartFactory(Protocol):
    """Opens a shard's part writer (the sharded path), resumed from a checkpoint or new."""

    def __call__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str,
        resume_from: WriterStats | None,
        csv: CsvOptions = CsvOptions(),
    ) -> PartWriter:
        """Open the part writer; ``resume_from`` is the part's last checkpoint or None;
        ``csv`` the file's CSV options (other formats ignore them)."""
        ...


class Assembler(Protocol):
    """Joins the shards' parts into the file, byte for byte the single writer's."""

    def __call__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        parts: Iterable[Iterable[bytes]],
        /,
        *,
        part_stats: WriterStats,
        max_bytes: int | None,
        csv: CsvOptions = CsvOptions(),
        time_zone: str = "UTC",
    ) -> WriterStats:
        """Write the file from the parts (per shard in order, its chunks in order).

        ``csv`` is the file's CSV options, as given to the part writers (other formats
        ignore them); ``time_zone`` the export time zone, which a format that renders
        its file from rows parts needs (Parquet's timestamp zone; the others' parts
        hold their wall times already).

        Returns:
            The file's stats, equal to the single writer's for the same rows.

        Raises:
            FileTooLarge: the file would pass ``max_bytes``.
        """
        ...


class SizedWriter(ExportWriter, Protocol):
    """The writer of a part cut by bytes in a compressed format, which takes rows only
    while the file closed after them stays within the cap (rule: ``packaging.split``)."""

    def write_within(
        self, columns: Sequence[Sequence[Any]], max_bytes: int, *, step: int
    ) -> list[Sequence[Any]] | None:
        """Take rows (column-major) in ``step``-row blocks while the file closed after
        them is <= ``max_bytes`` bytes; None when all were taken, else the rows given
        back (column-major) and the file is full."""
        ...

    def fit_within(self, max_bytes: int, *, step: int) -> list[Sequence[Any]] | None:
        """Before close: None when the file closed now is <= ``max_bytes`` bytes, else
        the rows given back (column-major)."""
        ...


class SizedWriterFactory(Protocol):
    """Opens the :class:`SizedWriter` of one part (no size cap of its own: the package
    caps the delivered bytes)."""

    def __call__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str,
        sheet_row_limit: int | None,
    ) -> SizedWriter:
        """Open the writer; ``sheet_row_limit`` as :class:`WriterFactory`'s."""
        ...


def open_csv(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    max_bytes: int | None,
    sheet_row_limit: int | None = None,
    csv: CsvOptions = CsvOptions(),
) -> ExportWriter:
    """A :class:`CsvWriter` with the CSV options (one table, so no sheet row limit)."""
    return CsvWriter(stream, columns, time_zone=time_zone, max_bytes=max_bytes, options=csv)


def open_csv_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """A :class:`CsvPartWriter` with the CSV options."""
    return CsvPartWriter(stream, columns, time_zone=time_zone, resume_from=resume_from, options=csv)


def join_csv(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    /,
    *,
    part_stats: WriterStats,
    max_bytes: int | None,
    csv: CsvOptions = CsvOptions(),
    time_zone: str = "UTC",
) -> WriterStats:
    """:func:`~export_center.writers.parts.assemble_csv` with the CSV options."""
    return assemble_csv(
        stream, columns, parts, part_stats=part_stats, max_bytes=max_bytes, options=csv
    )


def open_xlsx(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    max_bytes: int | None,
    sheet_row_limit: int | None = None,
    csv: CsvOptions = CsvOptions(),
) -> ExportWriter:
    """An :class:`XlsxWriter` with ``sheet_row_limit`` data rows per sheet (None: the
    most a sheet holds, 1,048,575)."""
    return XlsxWriter(
        stream,
        columns,
        time_zone=time_zone,
        max_bytes=max_bytes,
        sheet_row_limit=EXCEL_MAX_ROWS - 1 if sheet_row_limit is None else sheet_row_limit,
    )


def open_xlsx_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """An :class:`XlsxFragmentWriter` (CSV options do not apply)."""
    return XlsxFragmentWriter(stream, columns, time_zone=time_zone, resume_from=resume_from)


def join_xlsx(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    /,
    *,
    part_stats: WriterStats,
    max_bytes: int | None,
    csv: CsvOptions = CsvOptions(),
    time_zone: str = "UTC",
) -> WriterStats:
    """:func:`~export_center.writers.parts.assemble_xlsx` (CSV options do not apply)."""
    return assemble_xlsx(stream, columns, parts, part_stats=part_stats, max_bytes=max_bytes)


def open_xlsx_sized(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    sheet_row_limit: int | None,
) -> SizedWriter:
    """An :class:`XlsxWriter` with ``size_checks`` (zlib's deflate, whose state can be
    copied to tell the size of the file closed now), one sheet of ``sheet_row_limit``
    rows at most (None: 1,048,575), no size cap."""
    return XlsxWriter(
        stream,
        columns,
        time_zone=time_zone,
        sheet_row_limit=EXCEL_MAX_ROWS - 1 if sheet_row_limit is None else sheet_row_limit,
        size_checks=True,
    )


def open_jsonl(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    max_bytes: int | None,
    sheet_row_limit: int | None = None,
    csv: CsvOptions = CsvOptions(),
) -> ExportWriter:
    """A :class:`JsonlWriter` (no sheets, no CSV options)."""
    return JsonlWriter(stream, columns, time_zone=time_zone, max_bytes=max_bytes)


def open_jsonl_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """A :class:`JsonlPartWriter`."""
    return JsonlPartWriter(stream, columns, time_zone=time_zone, resume_from=resume_from)


def join_jsonl(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    /,
    *,
    part_stats: WriterStats,
    max_bytes: int | None,
    csv: CsvOptions = CsvOptions(),
    time_zone: str = "UTC",
) -> WriterStats:
    """:func:`~export_center.writers.jsonl.assemble_jsonl` (the parts concatenated)."""
    return assemble_jsonl(stream, columns, parts, part_stats=part_stats, max_bytes=max_bytes)


def open_parquet(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    max_bytes: int | None,
    sheet_row_limit: int | None = None,
    csv: CsvOptions = CsvOptions(),
) -> ExportWriter:
    """A :class:`ParquetWriter` (imports pyarrow; no sheets, no CSV options)."""
    return ParquetWriter(stream, columns, time_zone=time_zone, max_bytes=max_bytes)


def open_parquet_sized(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    sheet_row_limit: int | None,
) -> SizedWriter:
    """A :class:`ParquetWriter` as it is (its size checks need no option; no sheets)."""
    return ParquetWriter(stream, columns, time_zone=time_zone)


def open_parquet_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """A :class:`ParquetPartWriter`: Parquet's parts are Arrow IPC record batches."""
    return ParquetPartWriter(stream, columns, time_zone=time_zone, resume_from=resume_from)


def join_parquet(
    stream: BinaryIO,
    columns: Sequence[Column],
    parts: Iterable[Iterable[bytes]],
    /,
    *,
    part_stats: WriterStats,
    max_bytes: int | None,
    csv: CsvOptions = CsvOptions(),
    time_zone: str = "UTC",
) -> WriterStats:
    """:func:`~export_center.writers.parquet_parts.assemble_parquet`: the parts' record
    batches written through one :class:`ParquetWriter`."""
    return assemble_parquet(
        stream, columns, parts, part_stats=part_stats, max_bytes=max_bytes, time_zone=time_zone
    )
