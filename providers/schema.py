"""The column schema a provider declares, and its hash (DESIGN.md "Provider contract").

A column object on the wire: ``{key, title, type, width?, titleZh?, precision?,
scale?}``; types are :data:`TYPES`. :func:`schema_hash` is what the export center
compares between the batches of one export.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["MAX_PRECISION", "MAX_TITLE_CHARS", "TYPES", "Column", "schema_hash"]

TYPES = ("STRING", "INTEGER", "DECIMAL", "BOOLEAN", "DATE", "DATETIME")
"""The column types of the contract."""
MAX_PRECISION = 38
"""Most digits of a DECIMAL column (decimal128, and MySQL's DECIMAL(65) is cut to it)."""
MAX_TITLE_CHARS = 200
"""Longest Chinese title of a column, in characters."""


@dataclass(frozen=True, slots=True)
class Column:
    """A column of the export.

    Attributes:
        key: the row key (``o_orderkey``).
        title: the header in English (``Order key``).
        type: one of ``TYPES``.
        width: preferred column width in characters (XLSX), or None.
        title_zh: the header in Chinese (``订单号``, at most 200 characters), or None:
            the export center then writes the English title in both languages.
        precision: a DECIMAL column's total digits, 1..38 (``DECIMAL(15,2)``: 15), or
            None; Parquet files declare ``decimal128(precision, scale)`` from it.
        scale: a DECIMAL column's digits after the point, 0..precision, or None.

    Raises:
        ValueError: precision or scale on another type than DECIMAL, out of range,
            or one without the other; a Chinese title over 200 characters.
    """

    key: str
    title: str
    type: str = "STRING"
    width: int | None = None
    title_zh: str | None = None
    precision: int | None = None
    scale: int | None = None

    def __post_init__(self) -> None:
        if (self.precision is None) != (self.scale is None):
            raise ValueError(f"column {self.key}: give precision and scale together")
        if self.precision is not None and self.scale is not None:
            if self.type != "DECIMAL":
                raise ValueError(f"column {self.key}: only DECIMAL columns have a precision")
            if not 1 <= self.precision <= MAX_PRECISION or not 0 <= self.scale <= self.precision:
                raise ValueError(
                    f"column {self.key}: precision must be 1..{MAX_PRECISION} and scale "
                    f"0..precision, got ({self.precision}, {self.scale})"
                )
        if self.title_zh is not None and not 0 < len(self.title_zh) <= MAX_TITLE_CHARS:
            raise ValueError(f"column {self.key}: title_zh must be 1..{MAX_TITLE_CHARS} characters")

    def as_json(self) -> dict[str, Any]:
        """The contract's column object (``titleZh``, ``precision``, ``scale`` when set)."""
        out: dict[str, Any] = {"key": self.key, "title": self.title, "type": self.type}
        if self.width:
            out["width"] = self.width
        if self.title_zh:
            out["titleZh"] = self.title_zh
        if self.precision is not None:
            out["precision"] = self.precision
            out["scale"] = self.scale
        return out


def schema_hash(columns: Sequence[Column]) -> str:
    """``sha256:<hex>`` over the columns' keys, English titles and types, in order.

    The Chinese title, the width, the precision and the scale are not hashed: the
    export center compares the hash of every batch with the first one's and fails the
    export when it changes, and none of these change what a row means (the attempt
    keeps the first batch's columns). A provider that corrects a Chinese title, or
    declares the precision of a DECIMAL column it had left undeclared, does not fail
    the exports that are running, and its hash stays the one of earlier releases.
    """
    text = orjson.dumps([[c.key, c.title, c.type] for c in columns])
    return "sha256:" + hashlib.sha256(text).hexdigest()
