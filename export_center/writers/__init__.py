"""Streaming export file writers (DESIGN.md "Files").

``formats.FORMATS`` is the table of file formats (extension, content type, writer,
part writer, assembler, what each supports): ``csv``, ``xlsx``, ``jsonl`` and
``parquet`` (the optional extra ``parquet``); ``open_writer`` opens the writer of a
format named there. Every writer takes typed Python values
(see ``export_center.values``) batch by batch, enforce the file size cap while
writing and never close the stream they write to.

Modules:

* ``base``: the ``ExportWriter`` contract, the ``StreamingWriter`` frame both writers
  are built on, the byte-counting stream, ``WriterStats``, the wall clock of the
  export time zone and the writers' bounded date cache.
* ``csv``: ``CsvWriter`` and its field rules.
* ``xlsx``: ``XlsxWriter`` (chunks, sheets, the ZIP archive), with
  ``xlsx_cells`` (cell rules and per-column renderers), ``xlsx_text`` (text rules)
  and ``xlsx_parts`` (the static package parts and style indices).
* ``jsonl``: ``JsonlWriter`` (one JSON object per row) and its part writer.
* ``parquet``: ``ParquetWriter`` (pyarrow, imported when a writer opens), with
  ``parquet_arrays`` (values to Arrow arrays), ``parquet_size`` (the size of a file
  closed now) and ``parquet_parts`` (a shard's Arrow IPC part, ``ParquetPartWriter``,
  and the file assembled from the parts).
* ``rows``: ``RowsPartWriter`` and ``read_rows_parts``, a shard's typed rows stored
  losslessly and read back column-major, for files that are rendered after the shards
  (split or compressed files).
* ``formats``: the table of formats, asked by every place that depends on the format.
* ``openers``: the call shapes of a format's writers, part writers and assemblers, and
  each format's adapters to them.
* ``readers``: each format's file read back by its real reader (data rows and cell
  texts, for ``verify`` and the preview).
* ``parts``: a sharded export's parts (CSV rows without head, XLSX fragments without
  row numbers), their checkpointed stats, and the file assembled from them, byte for
  byte the single writer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO

from export_center.columns import Column
from export_center.filespec import CsvOptions
from export_center.writers.base import CountingStream, ExportWriter, WriterStats
from export_center.writers.csv import CsvWriter
from export_center.writers.formats import FORMATS, format_choices
from export_center.writers.jsonl import JsonlPartWriter, JsonlWriter, assemble_jsonl
from export_center.writers.parquet import ParquetWriter
from export_center.writers.parquet_parts import ParquetPartWriter, assemble_parquet
from export_center.writers.parts import (
    CsvPartWriter,
    XlsxFragmentWriter,
    assemble_csv,
    assemble_xlsx,
    csv_head,
    csv_stats,
)
from export_center.writers.rows import RowsPartWriter, read_rows_parts
from export_center.writers.xlsx import EXCEL_MAX_ROWS, XlsxWriter

__all__ = [
    "CountingStream",
    "CsvPartWriter",
    "CsvWriter",
    "ExportWriter",
    "JsonlPartWriter",
    "JsonlWriter",
    "ParquetPartWriter",
    "ParquetWriter",
    "RowsPartWriter",
    "WriterStats",
    "XlsxFragmentWriter",
    "XlsxWriter",
    "assemble_csv",
    "assemble_jsonl",
    "assemble_parquet",
    "assemble_xlsx",
    "csv_head",
    "csv_stats",
    "open_writer",
    "read_rows_parts",
]


def open_writer(
    fmt: str,
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str = "UTC",
    max_bytes: int | None = None,
    sheet_row_limit: int = EXCEL_MAX_ROWS - 1,
    csv: CsvOptions = CsvOptions(),
) -> ExportWriter:
    """Open a streaming writer of one export file.

    Args:
        fmt: a name in ``formats.FORMATS`` (``"csv"``, ``"xlsx"``, ``"jsonl"``,
            ``"parquet"``), case-insensitive
            (its lower case is looked up), so the task's ``CSV``/``XLSX`` works as is.
        stream: binary output; the writer writes forward only and never closes it.
        columns: the export's columns, in file order.
        time_zone: IANA zone for datetimes (CASES E13), e.g. ``"Asia/Shanghai"``:
            aware datetimes are written as wall time there, with the UTC offset when
            a DST fall-back repeats that wall time (``2024-11-03 01:30:00-04:00``).
        max_bytes: file size cap in bytes, None for none (DESIGN.md: default 50 MB is
            the caller's setting); ``errors.FileTooLarge`` is raised while writing.
        sheet_row_limit: XLSX data rows per sheet (1..1,048,575; CASES E12); ignored
            by formats without sheets (CSV).
        csv: the CSV options (encoding, delimiter, header row, line ending); ignored by
            the other formats.

    Returns:
        An ``ExportWriter``: call ``write_rows`` per batch, then ``close()``.

    Raises:
        ValueError: unknown format, no columns, a bad ``sheet_row_limit`` or CSV option.
        ModuleNotFoundError: ``parquet`` without its optional extra (pyarrow).
        zoneinfo.ZoneInfoNotFoundError: unknown time zone.
        FileTooLarge: ``max_bytes`` is smaller than the file's first bytes.
    """
    entry = FORMATS.get(str(fmt).lower())
    if entry is None:
        raise ValueError(f"unknown export format: {fmt!r} (expected {format_choices(quoted=True)})")
    return entry.open_writer(
        stream,
        columns,
        time_zone=time_zone,
        max_bytes=max_bytes,
        sheet_row_limit=sheet_row_limit,
        csv=csv,
    )
