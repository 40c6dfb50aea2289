"""Bodies of the file a user asked for: a type's columns, the create body's ``columns``
and ``options``, and the preview's answer (JSON, camelCase).

:class:`FileExportCreate` extends :class:`~export_center.api.schemas.ExportCreate` with
``columns`` and ``options`` until the create body itself carries them; the values are
checked by :func:`export_center.filespec.parse_file_spec`, which gives the error codes
(``UNKNOWN_COLUMN``, ``INVALID_OPTION``, ...), so the option fields are plain text here
with their enums in the schema.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictInt

from export_center.api.schemas import ExportCreate, ExportTypePublic
from export_center.filespec import COMPRESSIONS, DELIMITERS, ENCODINGS, LANGUAGES, LINE_ENDINGS

__all__ = [
    "WARNING_CODES",
    "ColumnChoiceBody",
    "ExportTypeDetail",
    "FileExportCreate",
    "FileOptions",
    "PreviewColumn",
    "PreviewPublic",
    "PreviewWarning",
    "SplitOptions",
    "TypeColumnPublic",
]

ColumnTypeName = Literal["STRING", "INTEGER", "DECIMAL", "BOOLEAN", "DATE", "DATETIME"]
#: The warning codes of a preview.
WARNING_CODES = ("XLSX_SHEETS", "OVER_ROW_CAP", "OVER_SIZE_CAP", "SPLIT_SUGGESTED")


def _enum(values: tuple[str, ...]) -> dict[str, JsonValue]:
    return {"enum": list(values)}


class TypeColumnPublic(BaseModel):
    """One column of an export type, as a column picker shows it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "key": "o_totalprice",
                    "title": "Total price",
                    "titles": {"en": "Total price", "zh-CN": "订单总额"},
                    "type": "DECIMAL",
                    "precision": 15,
                    "scale": 2,
                }
            ]
        }
    )

    key: str = Field(description="The key to put in the create body's columns")
    title: str = Field(description="The header in English")
    titles: dict[str, str] = Field(
        description='The header per language: {"en": ..., "zh-CN": ...} (the English '
        "title stands in when the type gives no Chinese one)"
    )
    type: ColumnTypeName
    precision: int | None = Field(
        default=None, description="DECIMAL: total digits (1..38), when declared"
    )
    scale: int | None = Field(
        default=None, description="DECIMAL: digits after the point, when declared"
    )


class ExportTypeDetail(ExportTypePublic):
    """One export type the caller may use, with its columns."""

    columns: list[TypeColumnPublic] = Field(
        description="Every column, in the provider's order (the file's order when the "
        "create body chooses none)"
    )
    columnsSource: Literal["registry", "provider"] = Field(
        description="Where the columns come from: the registry file, or the provider's "
        "schema answer (asked at most once a minute per type)"
    )


class ColumnChoiceBody(BaseModel):
    """A chosen column with its header renamed."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=128, examples=["o_totalprice"])
    title: str | None = Field(
        default=None,
        description="The header to write instead of the column's title (1..100 characters)",
        examples=["Amount"],
    )


class SplitOptions(BaseModel):
    """Where to cut the file into parts (several files in one ZIP with manifest.json)."""

    model_config = ConfigDict(extra="forbid")

    maxRowsPerFile: StrictInt | None = Field(
        default=None,
        description="Data rows per part, 1..the type's maxRows",
        examples=[100000],
    )
    maxBytesPerFile: StrictInt | None = Field(
        default=None,
        description="Bytes per part, 1024..the file size cap",
        examples=[20971520],
    )


class FileOptions(BaseModel):
    """How the file is written. CSV options are refused with other formats."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"language": "zh-CN", "encoding": "gb18030", "delimiter": ";", "header": True}
            ]
        },
    )

    language: str | None = Field(
        default=None,
        description="Header language (default: from Accept-Language)",
        json_schema_extra=_enum(LANGUAGES),
    )
    encoding: str | None = Field(
        default=None, description="CSV: text encoding", json_schema_extra=_enum(ENCODINGS)
    )
    delimiter: str | None = Field(
        default=None, description="CSV: field delimiter", json_schema_extra=_enum(DELIMITERS)
    )
    header: StrictBool | None = Field(default=None, description="CSV: write the header row")
    lineEnding: str | None = Field(
        default=None, description="CSV: record terminator", json_schema_extra=_enum(LINE_ENDINGS)
    )
    compression: str | None = Field(
        default=None,
        description="gzip: CSV and JSON Lines only; zip: any format",
        json_schema_extra=_enum(COMPRESSIONS),
    )
    split: SplitOptions | None = None


class FileExportCreate(ExportCreate):
    """A create body with the file's ``columns`` and ``options`` (the preview's body)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "exportType": "ORDERS",
                    "format": "xlsx",
                    "parameters": {"from": "1995-09-01", "to": "1995-09-30"},
                    "timeZone": "Asia/Shanghai",
                    "columns": ["o_orderkey", {"key": "o_totalprice", "title": "Amount"}],
                    "options": {"language": "zh-CN"},
                }
            ]
        },
    )

    columns: list[str | ColumnChoiceBody] | None = Field(
        default=None,
        max_length=100,
        description="The columns to write, in order: keys, or {key, title} to rename a "
        "header (default: every column of the type)",
    )
    options: FileOptions | None = None

    def raw_columns(self) -> list[object] | None:
        """``columns`` as :func:`~export_center.filespec.parse_file_spec` reads them."""
        if self.columns is None:
            return None
        return [c if isinstance(c, str) else c.model_dump(exclude_none=True) for c in self.columns]

    def raw_options(self) -> dict[str, object] | None:
        """``options`` as :func:`~export_center.filespec.parse_file_spec` reads them."""
        return None if self.options is None else self.options.model_dump(exclude_none=True)


class PreviewColumn(BaseModel):
    """A column as the file would have it."""

    key: str
    title: str = Field(description="The header as written (renamed, in the header language)")
    type: ColumnTypeName


class PreviewWarning(BaseModel):
    """Something the user should know before creating the export."""

    code: Literal["XLSX_SHEETS", "OVER_ROW_CAP", "OVER_SIZE_CAP", "SPLIT_SUGGESTED"]
    message: str = Field(description="In English")
    messageZh: str = Field(description="In Chinese")
    suggestedMaxRowsPerFile: int | None = Field(
        default=None, description="SPLIT_SUGGESTED: an options.split.maxRowsPerFile that fits"
    )


class PreviewPublic(BaseModel):
    """What an export of the body would give, without creating it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "estimatedRows": 15408,
                    "columns": [
                        {"key": "o_orderkey", "title": "订单号", "type": "INTEGER"},
                        {"key": "o_totalprice", "title": "Amount", "type": "DECIMAL"},
                    ],
                    "sampleRows": [["3", "193846.25"], ["5", "144659.20"]],
                    "estimatedBytes": 413250,
                    "files": 1,
                    "sheets": 1,
                    "warnings": [],
                }
            ]
        }
    )

    estimatedRows: int | None = Field(
        description="The provider's row estimate for the parameters (None: it gives none)"
    )
    columns: list[PreviewColumn]
    sampleRows: list[list[str]] = Field(
        description="Up to 20 first rows, each cell's text as the format writes it (the CSV "
        "fields; XLSX, JSON Lines and Parquet cells read back by their readers)"
    )
    estimatedBytes: int = Field(
        description="Head bytes per file plus the sample rows' mean bytes per row times "
        "estimatedRows, before gzip or zip compression"
    )
    files: int = Field(description="Files delivered: the parts of a split, else 1")
    sheets: int = Field(description="XLSX: sheets of the largest file; 1 for other formats")
    warnings: list[PreviewWarning]
