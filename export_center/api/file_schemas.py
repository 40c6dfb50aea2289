"""Bodies of the file a user asked for: a type's columns, the create body's ``columns``
and ``options``, and the preview's answer (JSON, camelCase).

The create body's ``columns`` and ``options`` are :class:`~export_center.api.schemas.
ExportCreate`'s (the preview takes the create body); the values are checked by
:func:`export_center.filespec.parse_file_spec`, which gives the error codes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from export_center.api.schemas import ExportTypePublic

__all__ = [
    "WARNING_CODES",
    "ManifestPublic",
    "ExportTypeDetail",
    "PreviewColumn",
    "PreviewPublic",
    "PreviewWarning",
    "TypeColumnPublic",
]

ColumnTypeName = Literal["STRING", "INTEGER", "DECIMAL", "BOOLEAN", "DATE", "DATETIME"]
#: The warning codes of a preview.
WARNING_CODES = (
    "XLSX_SHEETS",
    "OVER_ROW_CAP",
    "OVER_SIZE_CAP",
    "SPLIT_SUGGESTED",
    "TOO_MANY_PARTS",
)


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

    code: Literal[
        "XLSX_SHEETS", "OVER_ROW_CAP", "OVER_SIZE_CAP", "SPLIT_SUGGESTED", "TOO_MANY_PARTS"
    ]
    message: str = Field(description="In English")
    messageZh: str = Field(description="In Chinese")
    suggestedMaxRowsPerFile: int | None = Field(
        default=None,
        description="SPLIT_SUGGESTED: an options.split.maxRowsPerFile that fits; "
        "TOO_MANY_PARTS: the smallest one that keeps the split at 1,000 files",
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


class ManifestFile(BaseModel):
    """One delivered file: the download itself, or one part inside the ZIP."""

    name: str = Field(examples=["September orders-part-0001.csv"])
    rows: int = Field(description="Data rows (header rows not counted)")
    bytes: int = Field(description="Size in bytes (a part: as extracted)")
    sha256: str = Field(description="Lowercase hex SHA-256 of those bytes")


class ManifestArchive(BaseModel):
    """The delivered ZIP."""

    name: str
    bytes: int
    sha256: str


class ManifestSignature(BaseModel):
    """How the manifest is signed: HMAC-SHA256 with the installation's manifest key over
    the canonical JSON of the manifest without ``signature`` (keys sorted, compact,
    UTF-8); ``keyId`` is the first 8 hex digits of the key's SHA-256."""

    alg: Literal["HMAC-SHA256"]
    keyId: str
    value: str


class ManifestPublic(BaseModel):
    """The signed manifest of a succeeded export (``GET /api/v1/exports/{taskId}/manifest``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "manifestVersion": 1,
                    "taskId": "exp_01KB7Z3Y4V8N2Q6R0S1T2U3V4W",
                    "exportType": "ORDERS",
                    "parameters": {"from": "1995-09-01", "to": "1995-09-30"},
                    "format": "csv",
                    "options": {"language": "en", "encoding": "utf-8-bom", "compression": "none"},
                    "timeZone": "UTC",
                    "columns": [
                        {"key": "o_orderkey", "title": "Order key", "type": "INTEGER"},
                        {"key": "o_totalprice", "title": "Total price", "type": "DECIMAL"},
                    ],
                    "totalRows": 15408,
                    "files": [
                        {
                            "name": "September orders.csv",
                            "rows": 15408,
                            "bytes": 402114,
                            "sha256": "9f2c...e1",
                        }
                    ],
                    "archive": None,
                    "controlTotals": {
                        "rowCount": 15408,
                        "columns": {"o_totalprice": {"sum": "2331047117.52", "nulls": 0}},
                    },
                    "snapshotToken": "~eyJ2Ijo...",
                    "createdAt": "2026-12-01T03:20:11.204Z",
                    "finishedAt": "2026-12-01T03:20:11.980Z",
                    "signature": {"alg": "HMAC-SHA256", "keyId": "1a2b3c4d", "value": "5f0c..."},
                }
            ]
        }
    )

    manifestVersion: int
    taskId: str
    exportType: str
    parameters: dict[str, Any]
    format: str
    options: dict[str, Any] = Field(description="The file options, defaults filled in")
    timeZone: str
    columns: list[PreviewColumn] = Field(description="The file's columns in order")
    totalRows: int = Field(description="Data rows of all files")
    files: list[ManifestFile]
    archive: ManifestArchive | None = Field(description="The ZIP, or null")
    controlTotals: dict[str, Any] = Field(
        description="rowCount, and per column: exact sum of INTEGER and DECIMAL (text), "
        "min/max of DATE and DATETIME (ISO 8601, datetimes in UTC), nulls"
    )
    snapshotToken: str | None
    createdAt: str | None
    finishedAt: str | None
    signature: ManifestSignature
