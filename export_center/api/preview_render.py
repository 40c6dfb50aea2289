"""A preview as it would be written: the sample rows through the real writer and back
through the format's reader, the bytes and files estimated, the warnings.

Rules:

* Sample rows: the format's own writer writes the rows to memory, with the file spec's
  columns, titles and CSV options; the format's reader from the format table
  (``FileFormat.reader``: ``csv`` with the encoding and delimiter, openpyxl, one JSON
  object per line, pyarrow) reads them back, and each cell is given as the text the
  reader shows (``writers.readers``): a CSV field as it is (formula guard included);
  an XLSX number with the decimals of its number format, a date (a number format
  without hours) ``YYYY-MM-DD``, a date-time ``YYYY-MM-DD HH:MM:SS``, a boolean
  ``TRUE``/``FALSE``; a JSON Lines or Parquet value as its JSON text (strings without
  quotes). An empty cell is ``""``.
* ``estimatedBytes = files x head + per_row x estimatedRows``, rounded up: ``head`` is
  the size of the format's file with no rows (BOM, header, workbook parts), ``per_row``
  the sample's bytes beyond the head divided by its rows. Before gzip or zip: a
  compressed delivery is smaller. XLSX rows compress, so 20 rows give a rough figure.
* ``files``: 1, or with a split the parts: ``ceil(rows / rows_per_part)``, where
  ``rows_per_part`` is ``maxRowsPerFile`` and/or what fits ``maxBytesPerFile``
  (``(maxBytesPerFile - head) // per_row``), the smaller.
* ``sheets``: XLSX only, the sheets of the largest file: ``ceil(rows / 1,048,575)``.
* Warnings: ``XLSX_SHEETS`` (more than one sheet), ``OVER_ROW_CAP`` (estimate above the
  type's ``max_rows``), ``OVER_SIZE_CAP`` (the largest file's estimate above the file
  size cap), ``SPLIT_SUGGESTED`` (either of the last two sheet/size cases, with a
  ``maxRowsPerFile`` that keeps each part in one sheet and under the cap, rounded down
  to two significant digits), ``TOO_MANY_PARTS`` (a split into more than
  :data:`~export_center.filespec.MAX_PARTS` files: the export would fail with that code,
  so the warning gives the smallest ``maxRowsPerFile`` that keeps it at the limit).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any, cast

from export_center.api.file_schemas import PreviewColumn, PreviewPublic, PreviewWarning
from export_center.api.preview import Preview
from export_center.columns import Column
from export_center.filespec import MAX_PARTS, FileSpec
from export_center.writers.formats import FileFormat

__all__ = ["render_preview", "sample_file", "sample_texts"]


def sample_file(
    file_format: FileFormat,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    spec: FileSpec,
    time_zone: str,
) -> bytes:
    """The file the format's writer makes of ``rows`` (column-major), in memory."""
    stream = io.BytesIO()
    writer = file_format.open_writer(
        stream, columns, time_zone=time_zone, max_bytes=None, csv=spec.csv
    )
    if rows and rows[0]:
        writer.write_columns([list(c) for c in rows])
    writer.close()
    return stream.getvalue()


def sample_texts(
    data: bytes, file_format: FileFormat, columns: Sequence[Column], spec: FileSpec
) -> list[list[str]]:
    """The data rows of ``data`` read back by the format's reader, as cell texts.

    Args:
        data: a file :func:`sample_file` wrote.
        file_format: its format.
        columns: its columns, in file order.
        spec: its file spec (CSV encoding, delimiter, header).

    Returns:
        One list of texts per data row (rule: module docstring).

    Raises:
        UnreadableFile: the bytes are not a file of the format.
    """
    reader = file_format.reader
    return [[reader.text(value) for value in row] for row in reader.rows(data, columns, spec.csv)]


def _two_digits(number: int) -> int:
    """``number`` rounded down to two significant digits (1,048,575 -> 1,000,000)."""
    if number < 100:
        return max(1, number)
    step: int = 10 ** (len(str(number)) - 2)
    return int(number // step * step)


def render_preview(preview: Preview, *, byte_cap: int) -> PreviewPublic:
    """The answer of ``POST /api/v1/exports/preview`` (rules in the module docstring).

    Args:
        preview: what :func:`~export_center.api.preview.preview_export` found.
        byte_cap: the file size cap in bytes.
    """
    fmt, spec, columns = preview.file_format, preview.spec, preview.columns
    head = len(sample_file(fmt, columns, [[] for _ in columns], spec, preview.time_zone))
    data = sample_file(fmt, columns, preview.rows, spec, preview.time_zone)
    count = len(preview.rows[0]) if preview.rows else 0
    per_row = (len(data) - head) / count if count else 0.0
    rows = preview.estimated_rows if preview.estimated_rows is not None else count
    per_part = rows
    if spec.split is not None:
        limits = [spec.split.max_rows_per_file or rows]
        if spec.split.max_bytes_per_file is not None and per_row > 0:
            limits.append(max(1, int((spec.split.max_bytes_per_file - head) // per_row)))
        per_part = max(1, min(limits))
    files = max(1, math.ceil(rows / per_part)) if spec.split is not None and rows else 1
    largest = min(rows, per_part)
    sheet_rows = fmt.sheet_rows
    sheets = max(1, math.ceil(largest / sheet_rows)) if sheet_rows else 1
    estimated = math.ceil(files * head + per_row * rows)
    largest_bytes = math.ceil(head + per_row * largest)
    warnings = []
    if sheets > 1:
        warnings.append(
            PreviewWarning(
                code="XLSX_SHEETS",
                message=f"this becomes {sheets} sheets of at most {sheet_rows:,} rows each",
                messageZh=f"将分为 {sheets} 个工作表，每个最多 {sheet_rows:,} 行",
            )
        )
    if rows > preview.etype.max_rows:
        warnings.append(
            PreviewWarning(
                code="OVER_ROW_CAP",
                message=f"about {rows:,} rows, more than the {preview.etype.max_rows:,} an "
                f"export of {preview.etype.code} may have: narrow the filters",
                messageZh=f"约 {rows:,} 行，超过此类导出最多 {preview.etype.max_rows:,} 行的上限，"
                "请缩小筛选范围",
            )
        )
    over_size = largest_bytes > byte_cap
    if over_size:
        warnings.append(
            PreviewWarning(
                code="OVER_SIZE_CAP",
                message=f"a file of about {_mb(largest_bytes)}, more than the "
                f"{_mb(byte_cap)} file size cap",
                messageZh=f"单个文件约 {_mb(largest_bytes)}，超过 {_mb(byte_cap)} 的文件大小上限",
            )
        )
    if files > MAX_PARTS:
        fewest = max(1, math.ceil(rows / MAX_PARTS))
        warnings.append(
            PreviewWarning(
                code="TOO_MANY_PARTS",
                message=f"the split makes about {files:,} files, more than the {MAX_PARTS:,} "
                f"an export may have: ask for at least {fewest:,} rows per file",
                messageZh=f"按当前设置将拆分为约 {files:,} 个文件，超过 {MAX_PARTS:,} 个的上限，"
                f"请把每个文件的行数调到至少 {fewest:,} 行",
                suggestedMaxRowsPerFile=fewest,
            )
        )
    if sheets > 1 or over_size:
        fit = [preview.etype.max_rows]
        if sheet_rows:
            fit.append(sheet_rows)
        if per_row > 0:
            fit.append(max(1, int((byte_cap - head) * 0.9 // per_row)))
        suggested = _two_digits(min(fit))
        warnings.append(
            PreviewWarning(
                code="SPLIT_SUGGESTED",
                message=f"split the export into files of at most {suggested:,} rows "
                f"(options.split.maxRowsPerFile: {suggested})",
                messageZh=f"建议拆分为每个文件最多 {suggested:,} 行"
                f"（options.split.maxRowsPerFile: {suggested}）",
                suggestedMaxRowsPerFile=suggested,
            )
        )
    return PreviewPublic(
        estimatedRows=preview.estimated_rows,
        columns=[
            PreviewColumn(key=c.key, title=c.title, type=cast(Any, c.type.value)) for c in columns
        ],
        sampleRows=sample_texts(data, fmt, columns, spec),
        estimatedBytes=estimated,
        files=files,
        sheets=sheets,
        warnings=warnings,
    )


def _mb(size: int) -> str:
    return f"{size / 2**20:,.1f} MB"
