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
    """

    key: str
    title: str
    type: ColumnType = ColumnType.STRING
    width: int | None = None
