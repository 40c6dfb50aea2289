"""Column schema of an export: the types of the provider contract.

Source: DESIGN.md "Provider contract": column types STRING, INTEGER, DECIMAL, BOOLEAN,
DATE, DATETIME; DECIMAL travels as a JSON string, DATE and DATETIME as ISO 8601
strings, so no value passes through a float.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Column", "ColumnType"]


class ColumnType(StrEnum):
    """Type of one column as declared by the provider."""

    STRING = "STRING"
    INTEGER = "INTEGER"
    DECIMAL = "DECIMAL"
    BOOLEAN = "BOOLEAN"
    DATE = "DATE"
    DATETIME = "DATETIME"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an export.

    Attributes:
        key: the row key the provider uses (``o_orderkey``).
        title: header text written to the file (``Order key``).
        type: the value type; decides the cell type and number format.
        width: preferred column width in characters (XLSX), or None for a default.
        title_zh: the header text in Chinese (``订单号``), or None when the provider
            gives none (the English title is then used for both languages).
        precision: a DECIMAL column's total digits (1..38), or None when undeclared.
        scale: a DECIMAL column's digits after the point (0..precision), or None.
    """

    key: str
    title: str
    type: ColumnType = ColumnType.STRING
    width: int | None = None
    title_zh: str | None = None
    precision: int | None = None
    scale: int | None = None
