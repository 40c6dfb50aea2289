"""Typed values to Arrow arrays: the conversion both Parquet writers share.

:class:`ArrowColumns` turns one column-major batch (the values of
``export_center.values``) into Arrow arrays of the file's schema. ``ParquetWriter``
(``writers.parquet``) buffers the arrays into row groups; ``ParquetPartWriter``
(``writers.parquet_parts``) stores them as Arrow IPC record batches that the
assembler feeds to the same row-group buffer. One conversion, so a sharded file holds
exactly the values, replacements and refusals of a single writer's.

Types and rules, by column type (the schema of :meth:`ArrowColumns.schema`):

=========  ==========================================================================
STRING     ``string`` (UTF-8; a lone surrogate becomes U+FFFD and is counted in
           ``WriterStats.replaced_surrogates``)
INTEGER    ``int64``; a value outside int64 fails the export naming row and column
DECIMAL    ``decimal128(precision, scale)`` from ``Column.precision``/``scale``.
           Undeclared (rule :func:`decimal_type`): ``decimal128(38, 18)``, the range
           of the provider's plain decimals (20 integer and 18 fraction digits); only
           a precision: scale 0 (SQL's ``DECIMAL(p)``); only a scale: precision 38. A
           value is never rounded: more fraction digits than the scale, or more digits
           than the precision, fails the export naming row and column. NaN/Infinity
           are null and counted in ``invalid_numbers``.
BOOLEAN    ``bool``
DATE       ``date32``
DATETIME   ``timestamp("us", tz=<export time zone>)``: the instant, exact to the
           microsecond; readers show it in the export zone
=========  ==========================================================================

Decimals are converted from ``decimal.Decimal`` objects, not cast from strings: the
first cast loads Arrow's compute kernels, about 10 MB resident for good. The
conversion is exact and refuses the same values (rescaling that would lose digits,
more digits than the precision); it takes about as long as the cast.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import sys
from collections.abc import Sequence
from decimal import Context, Decimal
from typing import Any

from export_center.columns import Column, ColumnType
from export_center.errors import PermanentExportError
from export_center.values import DecimalColumn, DecimalText
from export_center.writers.base import WriterStats

__all__ = [
    "MEMORY_POOL",
    "MEMORY_POOL_VARIABLE",
    "UNDECLARED_DECIMAL",
    "VALUE_CODE",
    "ArrowColumns",
    "decimal_type",
    "load_pyarrow",
]

MEMORY_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
"""pyarrow's environment variable naming its default allocator (read at its import)."""

MEMORY_POOL = "system"
"""The allocator :func:`load_pyarrow` chooses when the operator named none."""

UNDECLARED_DECIMAL = (38, 18)
"""``(precision, scale)`` of a DECIMAL column that declares neither."""

VALUE_CODE = "VALUE_NOT_REPRESENTABLE"
"""Failure code of a value the Parquet type of its column cannot hold exactly."""

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_INT64 = (-(2**63), 2**63 - 1)


def load_pyarrow() -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``, imported on first use with the system allocator.

    Rule: before pyarrow's first import in the process, ``ARROW_DEFAULT_MEMORY_POOL``
    is set to :data:`MEMORY_POOL` unless already set (``writers.parquet`` says why:
    with mimalloc, freed row-group buffers stay resident). Every module that imports
    pyarrow should do it through this function, since the first import fixes the
    allocator for the whole process.

    Returns:
        The two modules.

    Raises:
        ModuleNotFoundError: the extra ``parquet`` is not installed.
    """
    if "pyarrow" not in sys.modules:
        os.environ.setdefault(MEMORY_POOL_VARIABLE, MEMORY_POOL)
    return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")


def decimal_type(column: Column) -> tuple[int, int]:
    """The ``(precision, scale)`` of a DECIMAL column's ``decimal128`` (module docstring).

    Raises:
        ValueError: a declared precision outside 1..38 or scale outside 0..precision.
    """
    precision, scale = column.precision, column.scale
    if precision is None and scale is None:
        precision, scale = UNDECLARED_DECIMAL
    elif precision is None:
        precision = 38
    elif scale is None:
        scale = 0
    assert precision is not None and scale is not None
    if not 1 <= precision <= 38 or not 0 <= scale <= precision:
        raise ValueError(
            f"column {column.key}: DECIMAL({precision}, {scale}) is outside decimal128"
        )
    return precision, scale


class ArrowColumns:
    """The Arrow schema of an export's columns, and its batches as Arrow arrays.

    Args:
        pa: the ``pyarrow`` module (from :func:`load_pyarrow`).
        columns: the export's columns, in file order (keys name the fields, titles go
            into the field metadata ``title``, UTF-8).
        time_zone: IANA name of the export time zone, the DATETIME fields' zone.
        stats: the writer's running stats; ``replaced_surrogates`` and
            ``invalid_numbers`` are added to as values are converted.

    Attributes:
        schema: the ``pyarrow.Schema`` (field per column, nullable, ``title`` metadata).
        types: the Arrow type of each column, in order.

    Raises:
        ValueError: a declared DECIMAL outside decimal128.
    """

    def __init__(self, pa: Any, columns: Sequence[Column], time_zone: str, stats: WriterStats):
        self._pa = pa
        self._keys = [c.key for c in columns]
        self._kinds = [ColumnType(c.type) for c in columns]
        self._stats = stats
        self.types = [self._arrow_type(c, time_zone) for c in columns]
        self.schema = pa.schema(
            [
                pa.field(c.key, t, nullable=True, metadata={"title": c.title})
                for c, t in zip(columns, self.types, strict=True)
            ]
        )

    def _arrow_type(self, column: Column, time_zone: str) -> Any:
        pa = self._pa
        kind = ColumnType(column.type)
        if kind is ColumnType.DECIMAL:
            return pa.decimal128(*decimal_type(column))
        return {
            ColumnType.STRING: pa.string(),
            ColumnType.INTEGER: pa.int64(),
            ColumnType.BOOLEAN: pa.bool_(),
            ColumnType.DATE: pa.date32(),
            ColumnType.DATETIME: pa.timestamp("us", tz=time_zone),
        }[kind]

    def arrays(self, columns: Sequence[Sequence[Any]], first_row: int) -> list[Any]:
        """One checked, column-major batch as Arrow arrays, one per column.

        Args:
            columns: the batch (one sequence per column, in column order, equal lengths).
            first_row: the number that error messages give the batch's first row
                (1-based, over the file or the part).

        Returns:
            ``pyarrow.Array`` per column, of :attr:`types`.

        Raises:
            PermanentExportError: code ``VALUE_NOT_REPRESENTABLE``, a value outside its
                Parquet type (message: ``row N, column KEY: why: value``).
        """
        return [
            self._array(i, values if isinstance(values, list) else list(values), first_row)
            for i, values in enumerate(columns)
        ]

    def _refuse(self, index: int, row: int, value: Any, why: str) -> PermanentExportError:
        return PermanentExportError(
            f"row {row}, column {self._keys[index]}: {why}: {value!r} "
            "(Parquet cannot hold it exactly)",
            code=VALUE_CODE,
        )

    def _array(self, index: int, values: list[Any], first_row: int) -> Any:
        """One column of a batch as an Arrow array of its field's type."""
        kind = self._kinds[index]
        arrow_type = self.types[index]
        pa = self._pa
        if kind is ColumnType.STRING:
            return self._strings(values)
        if kind is ColumnType.INTEGER:
            for offset, v in enumerate(values):
                if v is not None and (type(v) is not int or not _INT64[0] <= v <= _INT64[1]):
                    why = "outside int64" if type(v) is int else "not an integer"
                    raise self._refuse(index, first_row + offset, v, why)
            return pa.array(values, arrow_type)
        if kind is ColumnType.DECIMAL:
            return self._decimals(index, values, first_row)
        return pa.array(values, arrow_type)

    def _strings(self, values: list[Any]) -> Any:
        pa = self._pa
        if type(values) is not list or not all(type(v) is str or v is None for v in values):
            values = [None if v is None else str(v) for v in values]
        try:
            return pa.array(values, pa.string())
        except UnicodeEncodeError:
            clean = []
            for v in values:
                if v is not None:
                    v, replaced = _SURROGATE_RE.subn("\ufffd", v)
                    self._stats.replaced_surrogates += replaced
                clean.append(v)
            return pa.array(clean, pa.string())

    def _decimals(self, index: int, values: list[Any], first_row: int) -> Any:
        """DECIMAL values through their exact text, as ``Decimal`` objects into decimal128
        (never rounded; no cast, see the module docstring)."""
        pa = self._pa
        if type(values) is DecimalColumn or set(map(type, values)) == {DecimalText}:
            texts: list[Any] = values
        else:
            texts = [
                self._decimal_text(index, first_row + offset, v) for offset, v in enumerate(values)
            ]
        numbers = [None if text is None else Decimal(text) for text in texts]
        try:
            return pa.array(numbers, self.types[index])
        except pa.ArrowInvalid:
            precision, scale = self.types[index].precision, self.types[index].scale
            for offset, text in enumerate(texts):
                if text is not None and not _fits(Decimal(text), precision, scale):
                    why = f"more digits than DECIMAL({precision}, {scale})"
                    raise self._refuse(index, first_row + offset, text, why) from None
            raise

    def _decimal_text(self, index: int, row: int, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, DecimalText):
            return str(value)
        if isinstance(value, bool):
            raise self._refuse(index, row, value, "not a decimal")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                self._stats.invalid_numbers += 1
                return None
            value = Decimal(repr(value))
        if isinstance(value, Decimal):
            if not value.is_finite():
                self._stats.invalid_numbers += 1
                return None
            return format(value, "f")
        raise self._refuse(index, row, value, "not a decimal")


_WIDE = Context(prec=100)
"""Room for any DECIMAL value (at most 38 digits): ``normalize`` never rounds here."""


def _fits(value: Decimal, precision: int, scale: int) -> bool:
    """True when ``value`` is exactly a ``DECIMAL(precision, scale)``: at most ``scale``
    fraction digits once trailing zeros go, at most ``precision - scale`` before the point."""
    if not value:
        return True
    exponent = value.normalize(_WIDE).as_tuple().exponent
    assert isinstance(exponent, int)
    integer = max(value.adjusted() + 1, 0)
    return max(0, -exponent) <= scale and integer <= precision - scale
