"""Bodies of the file a user asked for: a type's columns, the create body's ``columns``
and ``options``, and the preview's answer (JSON, camelCase).

The create body's ``columns`` and ``options`` are :class:`~export_center.api.schemas.
ExportCreate`'s (the preview takes the create body); the values are checked by
:func:`export_center.filespec.parse_file_spec`, which gives the error codes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from export_center.api.schemas import ExportTypePublic

__all__ = [
    "WARNING_CODES",
    "ExportTypeDetail",
    "PreviewColumn",
    "PreviewPublic",
    "PreviewWarning",
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
