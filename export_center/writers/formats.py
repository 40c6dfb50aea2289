"""The one table of export file formats: :data:`FORMATS`.

Every place that depends on the file format asks this table: the API's accepted values
and their error message, the OpenAPI enum and download content types, the export types'
``formats``, the object key's extension, the attempt's content type, the single-stream
writer, and the sharded path's part writer, size-cap check and assembler.

Adding a format is one writer module in ``export_center/writers/`` and one
:class:`FileFormat` entry in ``_ENTRIES`` below. The module holds the writer (a
``base.StreamingWriter`` with its ``content_type`` and ``extension``), the part writer of
a shard (a ``parts.CheckpointedWriter``) and the assembler that joins the parts into the
writer's file byte for byte. The download center's page lists its formats itself (a
radio button in ``api/static/ui/index.html``, labels in ``i18n.js``).

The formats, in table order:

* ``csv``: :class:`CsvWriter`, parts without head (``parts.CsvPartWriter``) joined after
  the head; takes the CSV options and gzip.
* ``xlsx``: :class:`XlsxWriter`, fragments without row numbers numbered and zipped at
  assembly (``parts.assemble_xlsx``).
* ``jsonl``: :class:`JsonlWriter` (``writers.jsonl``), parts are the same rows and are
  concatenated; takes gzip.
* ``parquet``: :class:`ParquetWriter` (``writers.parquet``, the optional extra
  ``parquet``: :attr:`FileFormat.available`), parts are Arrow IPC record batches
  (``parquet_parts.ParquetPartWriter``) fed to the writer's row groups at assembly.

Names: a format's *name* is its API value, in lower case (``csv``); a task row stores
the name in upper case (``CSV``, :attr:`FileFormat.task_value`); the API accepts any
letter case (:func:`find_format`).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import BinaryIO, Protocol

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
    "DEFAULT_FORMAT",
    "FORMATS",
    "Assembler",
    "FileFormat",
    "PartFactory",
    "PartWriter",
    "WriterFactory",
    "extension_pattern",
    "find_format",
    "format_choices",
    "format_names",
    "task_format",
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


@dataclass(frozen=True, slots=True)
class FileFormat:
    """One export file format and everything the service needs to write it.

    Attributes:
        name: the API value, lower-case ASCII (``csv``); a task stores it upper-cased.
        extension: the file name extension without the dot (``csv``), used in object
            keys and download names.
        content_type: the MIME type stored with the file and sent with its download
            (``text/csv; charset=utf-8``).
        open_writer: opens the writer of a whole file (:class:`WriterFactory`).
        open_part: opens a shard's part writer (:class:`PartFactory`).
        assemble: joins the parts into the file (:class:`Assembler`).
        sheet_rows: the most data rows one sheet holds (XLSX: 1,048,575, the header
            row taking the 1,048,576th), or None for a format without sheets.
        parts_sum_to_file: the file is a fixed head followed by the parts' bytes as
            they are, so a sharded export checks the size cap on the sum of its parts
            at every checkpoint; when False (a compressed file) only the assembler can
            check it.
        csv_options: the format takes the CSV options (encoding, delimiter, header row,
            line ending); another format refuses them (``OPTION_NOT_SUPPORTED``).
        gzip: ``compression: gzip`` applies (the file is not compressed inside).
        extra: the optional extra the format needs (``parquet``), or None.
        modules: the modules of that extra, whose presence makes the format
            :attr:`available`.
    """

    name: str
    extension: str
    content_type: str
    open_writer: WriterFactory
    open_part: PartFactory
    assemble: Assembler
    sheet_rows: int | None
    parts_sum_to_file: bool
    csv_options: bool = False
    gzip: bool = False
    extra: str | None = None
    modules: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        """True when the format can be written here: its extra's modules are installed
        (looked up without importing them); always True for a format without extra."""
        return all(importlib.util.find_spec(module) is not None for module in self.modules)

    @property
    def missing_extra(self) -> str | None:
        """Why the format cannot be written, in English, or None when :attr:`available`:
        ``format parquet needs the optional extra 'parquet': pip install -e '.[parquet]'``."""
        if self.available or self.extra is None:
            return None
        return (
            f"format {self.name} needs the optional extra '{self.extra}': "
            f"pip install -e '.[{self.extra}]'"
        )

    @property
    def missing_extra_zh(self) -> str | None:
        """:attr:`missing_extra` in Chinese, or None when :attr:`available`."""
        if self.available or self.extra is None:
            return None
        return f"{self.name} 格式需要安装可选组件 '{self.extra}'：pip install -e '.[{self.extra}]'"

    def content_type_for(self, csv: CsvOptions) -> str:
        """The content type of a file written with the CSV options: CSV names its
        charset (``text/csv; charset=gb18030``); other formats ignore the options."""
        if self.csv_options and csv.encoding == "gb18030":
            return f"{self.media_type}; charset=gb18030"
        return self.content_type

    @property
    def task_value(self) -> str:
        """The format as a task row stores it: the name in upper case (``CSV``)."""
        return self.name.upper()

    @property
    def media_type(self) -> str:
        """The content type without its parameters (``text/csv``): the OpenAPI key."""
        return self.content_type.partition(";")[0].strip()


def _open_csv(
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


def _open_csv_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """A :class:`CsvPartWriter` with the CSV options."""
    return CsvPartWriter(stream, columns, time_zone=time_zone, resume_from=resume_from, options=csv)


def _assemble_csv(
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


def _open_xlsx(
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


def _open_xlsx_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """An :class:`XlsxFragmentWriter` (CSV options do not apply)."""
    return XlsxFragmentWriter(stream, columns, time_zone=time_zone, resume_from=resume_from)


def _assemble_xlsx(
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


def _open_jsonl(
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


def _open_jsonl_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """A :class:`JsonlPartWriter`."""
    return JsonlPartWriter(stream, columns, time_zone=time_zone, resume_from=resume_from)


def _assemble_jsonl(
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


def _open_parquet(
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


def _open_parquet_part(
    stream: BinaryIO,
    columns: Sequence[Column],
    *,
    time_zone: str,
    resume_from: WriterStats | None,
    csv: CsvOptions = CsvOptions(),
) -> PartWriter:
    """A :class:`ParquetPartWriter`: Parquet's parts are Arrow IPC record batches."""
    return ParquetPartWriter(stream, columns, time_zone=time_zone, resume_from=resume_from)


def _assemble_parquet(
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


_ENTRIES = (
    FileFormat(
        name="csv",
        extension=CsvWriter.extension,
        content_type=CsvWriter.content_type,
        open_writer=_open_csv,
        open_part=_open_csv_part,
        assemble=_assemble_csv,
        sheet_rows=None,
        parts_sum_to_file=True,
        csv_options=True,
        gzip=True,
    ),
    FileFormat(
        name="xlsx",
        extension=XlsxWriter.extension,
        content_type=XlsxWriter.content_type,
        open_writer=_open_xlsx,
        open_part=_open_xlsx_part,
        assemble=_assemble_xlsx,
        sheet_rows=EXCEL_MAX_ROWS - 1,
        parts_sum_to_file=False,
    ),
    FileFormat(
        name="jsonl",
        extension=JsonlWriter.extension,
        content_type=JsonlWriter.content_type,
        open_writer=_open_jsonl,
        open_part=_open_jsonl_part,
        assemble=_assemble_jsonl,
        sheet_rows=None,
        parts_sum_to_file=True,
        gzip=True,
    ),
    FileFormat(
        name="parquet",
        extension=ParquetWriter.extension,
        content_type=ParquetWriter.content_type,
        open_writer=_open_parquet,
        open_part=_open_parquet_part,
        assemble=_assemble_parquet,
        sheet_rows=None,
        parts_sum_to_file=False,
        extra="parquet",
        modules=("pyarrow",),
    ),
)

FORMATS: Mapping[str, FileFormat] = MappingProxyType({entry.name: entry for entry in _ENTRIES})
"""Every format the service writes, by name, in the order the API lists them."""

DEFAULT_FORMAT = FORMATS["csv"]
"""The format of an older order-export request that names none; also the one an
attempt is set up with when its task names an unknown format (it then fails with
``UNKNOWN_FORMAT``, see :func:`task_format`)."""

_BY_TASK_VALUE = {entry.task_value: entry for entry in _ENTRIES}


def find_format(value: str) -> FileFormat | None:
    """The format a request or a task row names, in any letter case.

    Rule: ``value.upper()`` equals the format's :attr:`~FileFormat.task_value`, so
    ``csv``, ``CSV`` and ``Csv`` all name CSV. Whitespace is not removed here.

    Args:
        value: e.g. the API's ``format`` field or a task row's ``format`` column.

    Returns:
        The :class:`FileFormat`, or None when no format has that name.
    """
    return _BY_TASK_VALUE.get(str(value).upper())


def task_format(value: str) -> FileFormat:
    """The format of a task row, :data:`DEFAULT_FORMAT` when it names no known one.

    The fallback lets an attempt set up its object key and file name before its
    format check fails the task with ``UNKNOWN_FORMAT``.

    Args:
        value: the task's ``format`` column (``CSV``, ``XLSX``...).

    Returns:
        The :class:`FileFormat` (see :func:`find_format`), or the default.
    """
    return find_format(value) or DEFAULT_FORMAT


def format_names() -> list[str]:
    """The API values of every format, in table order (``["csv", "xlsx"]``)."""
    return list(FORMATS)


def format_choices(*, quoted: bool = False) -> str:
    """The formats as a sentence lists them: ``csv or xlsx`` (``a, b or c`` for three).

    Args:
        quoted: put each name in single quotes (``'csv' or 'xlsx'``).

    Returns:
        The names in table order, the last joined with ``or``.
    """
    names = [f"'{name}'" if quoted else name for name in FORMATS]
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def extension_pattern() -> str:
    """A regular-expression alternation of every format's extension (``csv|xlsx``)."""
    return "|".join(re.escape(entry.extension) for entry in _ENTRIES)
