"""The one table of export file formats: :data:`FORMATS`.

Every place that depends on the file format asks this table: the API's accepted values
and their error message, the OpenAPI enum and download content types, the export types'
``formats``, the object key's extension, the attempt's content type, the single-stream
writer, the sharded path's part writer, size-cap check and assembler, the byte split's
writer of a compressed part, and the reader that reads a file back (``verify``'s recount
and the preview's sample cells, ``writers.readers``) with the precision of its
date-times.

Adding a format is one writer module in ``export_center/writers/``, its reader in
``writers/readers.py`` and one :class:`FileFormat` entry in ``_ENTRIES`` below. The
module holds the writer (a ``base.StreamingWriter`` with its ``content_type`` and
``extension``), the part writer of a shard (a ``parts.CheckpointedWriter``) and the
assembler that joins the parts into the writer's file byte for byte; a compressed
format also gives the writer of a part cut by bytes (:class:`SizedWriter`). The call
shapes of these parts and each format's adapters to its writers are in
``writers.openers``. The download center's page lists its formats itself (a radio
button in ``api/static/ui/index.html``, labels in ``strings_en.js`` and ``strings_zh.js``).

The formats, in table order:

* ``csv``: :class:`CsvWriter`, parts without head (``parts.CsvPartWriter``) joined after
  the head; takes the CSV options and gzip.
* ``xlsx``: :class:`XlsxWriter`, fragments without row numbers numbered and zipped at
  assembly (``parts.assemble_xlsx``); byte-split parts by trial (``size_checks``);
  date-times to the millisecond.
* ``jsonl``: :class:`JsonlWriter` (``writers.jsonl``), parts are the same rows and are
  concatenated; takes gzip.
* ``parquet``: :class:`ParquetWriter` (``writers.parquet``, the optional extra
  ``parquet``: :attr:`FileFormat.available`), parts are Arrow IPC record batches
  (``parquet_parts.ParquetPartWriter``) fed to the writer's row groups at assembly;
  byte-split parts by trial.

Names: a format's *name* is its API value, in lower case (``csv``); a task row stores
the name in upper case (``CSV``, :attr:`FileFormat.task_value`); the API accepts any
letter case (:func:`find_format`).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from export_center.filespec import CsvOptions
from export_center.writers.csv import CsvWriter
from export_center.writers.jsonl import JsonlWriter
from export_center.writers.openers import (
    Assembler,
    PartFactory,
    PartWriter,
    SizedWriter,
    SizedWriterFactory,
    WriterFactory,
    join_csv,
    join_jsonl,
    join_parquet,
    join_xlsx,
    open_csv,
    open_csv_part,
    open_jsonl,
    open_jsonl_part,
    open_parquet,
    open_parquet_part,
    open_parquet_sized,
    open_xlsx,
    open_xlsx_part,
    open_xlsx_sized,
)
from export_center.writers.parquet import ParquetWriter
from export_center.writers.readers import (
    CSV_READER,
    JSONL_READER,
    PARQUET_READER,
    XLSX_READER,
    FileReader,
)
from export_center.writers.xlsx import EXCEL_MAX_ROWS, XlsxWriter

__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "Assembler",
    "FileFormat",
    "PartFactory",
    "PartWriter",
    "SizedWriter",
    "SizedWriterFactory",
    "WriterFactory",
    "extension_pattern",
    "find_format",
    "format_choices",
    "format_names",
    "task_format",
]


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
        reader: reads a file of the format back, its data rows and each cell's text
            (:class:`~export_center.writers.readers.FileReader`).
        sheet_rows: the most data rows one sheet holds (XLSX: 1,048,575, the header
            row taking the 1,048,576th), or None for a format without sheets.
        parts_sum_to_file: the file is a fixed head followed by the parts' bytes as
            they are, so a sharded export checks the size cap on the sum of its parts
            at every checkpoint; when False (a compressed file) only the assembler can
            check it.
        open_sized: opens the writer of a part cut by ``maxBytesPerFile``
            (:class:`SizedWriterFactory`) for a format whose parts do not sum to the
            file; None for one that does (its rows are measured one by one).
        time_resolution_us: the finest step of a date-time the file holds, in
            microseconds: 1,000 for XLSX (Excel serials hold milliseconds), else 1.
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
    reader: FileReader
    sheet_rows: int | None
    parts_sum_to_file: bool
    open_sized: SizedWriterFactory | None = None
    time_resolution_us: int = 1
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


_ENTRIES = (
    FileFormat(
        name="csv",
        extension=CsvWriter.extension,
        content_type=CsvWriter.content_type,
        open_writer=open_csv,
        open_part=open_csv_part,
        assemble=join_csv,
        reader=CSV_READER,
        sheet_rows=None,
        parts_sum_to_file=True,
        csv_options=True,
        gzip=True,
    ),
    FileFormat(
        name="xlsx",
        extension=XlsxWriter.extension,
        content_type=XlsxWriter.content_type,
        open_writer=open_xlsx,
        open_part=open_xlsx_part,
        assemble=join_xlsx,
        reader=XLSX_READER,
        sheet_rows=EXCEL_MAX_ROWS - 1,
        parts_sum_to_file=False,
        open_sized=open_xlsx_sized,
        time_resolution_us=1_000,
    ),
    FileFormat(
        name="jsonl",
        extension=JsonlWriter.extension,
        content_type=JsonlWriter.content_type,
        open_writer=open_jsonl,
        open_part=open_jsonl_part,
        assemble=join_jsonl,
        reader=JSONL_READER,
        sheet_rows=None,
        parts_sum_to_file=True,
        gzip=True,
    ),
    FileFormat(
        name="parquet",
        extension=ParquetWriter.extension,
        content_type=ParquetWriter.content_type,
        open_writer=open_parquet,
        open_part=open_parquet_part,
        assemble=join_parquet,
        reader=PARQUET_READER,
        sheet_rows=None,
        parts_sum_to_file=False,
        open_sized=open_parquet_sized,
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
