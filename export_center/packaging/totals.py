"""Control totals of an export: what a reader of the file can recount to prove it whole.

Rule (issue 23, item 6): per export the number of data rows; per INTEGER and DECIMAL
column the exact sum of its values (decimal text, never a float); per DATE and
DATETIME column the least and the greatest value (ISO 8601 text; datetimes compared as
instants, written in UTC). Empty cells (None) are skipped and counted per column
(``nulls``). STRING and BOOLEAN columns carry no totals.

Sums are exact: DECIMAL values are added in a decimal context with the most precision
the ``decimal`` module allows and ``Inexact`` trapped, so no sum is ever rounded;
INTEGER values are Python integers. A sum keeps the largest scale of its terms
(``1.10 + 2.2 = 3.30``), as ``decimal`` adds.

The totals of a sharded export are the merge of its shards' totals (:meth:`merge`);
a checkpoint stores :meth:`ControlTotals.to_dict` and reads it back with
:meth:`ControlTotals.from_dict`.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from export_center.columns import Column, ColumnType
from export_center.values import DecimalColumn, DecimalText

__all__ = ["SUMMED_TYPES", "TOTALLED_TYPES", "ControlTotals", "ColumnTotal", "exact_decimal"]

SUMMED_TYPES = frozenset({ColumnType.INTEGER, ColumnType.DECIMAL})
"""Column types whose values are summed."""
RANGED_TYPES = frozenset({ColumnType.DATE, ColumnType.DATETIME})
"""Column types whose least and greatest values are kept."""
TOTALLED_TYPES = SUMMED_TYPES | RANGED_TYPES
"""Column types that have control totals."""

_EXACT = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.Inexact, decimal.Overflow, decimal.InvalidOperation, decimal.Rounded],
)
"""Additions that can never round: an inexact result raises instead."""


def exact_decimal(value: Any) -> Decimal:
    """A summed value as an exact ``Decimal``.

    Args:
        value: ``int`` (not ``bool``), ``Decimal``, ``DecimalText`` or any ``str`` of a
            plain decimal number.

    Returns:
        The ``Decimal`` of the value, digit for digit.

    Raises:
        ValueError: a bool, a float, a non-finite Decimal or text that is not a number.
    """
    if isinstance(value, bool | float):
        raise ValueError(f"not an exact number: {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value))
    except decimal.InvalidOperation:
        raise ValueError(f"not a decimal number: {value!r}") from None
    if not number.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    return number


def _instant(value: Any) -> _dt.datetime:
    if not isinstance(value, _dt.datetime) or value.tzinfo is None:
        raise ValueError(f"a DATETIME total needs an aware datetime, got {value!r}")
    return value.astimezone(_dt.UTC)


def _day(value: Any) -> _dt.date:
    if isinstance(value, _dt.datetime) or not isinstance(value, _dt.date):
        raise ValueError(f"a DATE total needs a date, got {value!r}")
    return value


@dataclass(slots=True)
class ColumnTotal:
    """The running totals of one column.

    Attributes:
        key: the column key.
        type: INTEGER, DECIMAL, DATE or DATETIME.
        sum: the exact sum so far (summed types; ``Decimal(0)`` before any value).
        low: the least value so far (ranged types): a ``date``, or an aware UTC
            ``datetime``; None before any value.
        high: the greatest value so far, as ``low``.
        nulls: empty cells seen.
    """

    key: str
    type: ColumnType
    sum: Decimal = Decimal(0)
    low: _dt.date | None = None
    high: _dt.date | None = None
    nulls: int = 0

    def add(self, values: Sequence[Any]) -> None:
        """Add one batch of the column's values (None counts as a null).

        Each check is one C-level pass over the batch where it can be (``None in``,
        ``set(map(type, ...))``, ``min``/``max``): the totals cost a fraction of the
        rendering they ride along with.
        """
        present: Sequence[Any] = values
        if None in values:
            present = [v for v in values if v is not None]
            self.nulls += len(values) - len(present)
        if not present:
            return
        if self.type in SUMMED_TYPES:
            if isinstance(values, DecimalColumn) or set(map(type, present)) == {DecimalText}:
                # Validated plain positional texts (the common DECIMAL column): each
                # Decimal() is exact, and the additions run in C under the exact context.
                with decimal.localcontext(_EXACT):
                    self.sum = sum(map(Decimal, present), self.sum)
                return
            if set(map(type, present)) == {int}:  # the common INTEGER column
                self.sum = _EXACT.add(self.sum, Decimal(sum(present)))
                return
            total = self.sum
            for value in present:
                total = _EXACT.add(total, exact_decimal(value))
            self.sum = total
            return
        if self.type is ColumnType.DATE and set(map(type, present)) == {_dt.date}:
            self._widen(min(present), max(present))
            return
        if (
            self.type is ColumnType.DATETIME
            and set(map(type, present)) == {_dt.datetime}
            and all(v.utcoffset() is not None for v in present)
        ):  # aware datetimes compare as instants
            self._widen(_instant(min(present)), _instant(max(present)))
            return
        convert = _instant if self.type is ColumnType.DATETIME else _day
        points = [convert(v) for v in present]
        self._widen(min(points), max(points))

    def merge(self, other: ColumnTotal) -> None:
        """Add the totals of the same column over other rows."""
        if (other.key, other.type) != (self.key, self.type):
            raise ValueError(f"cannot merge the totals of {other.key!r} into {self.key!r}")
        self.nulls += other.nulls
        self.sum = _EXACT.add(self.sum, other.sum)
        if other.low is not None and other.high is not None:
            self._widen(other.low, other.high)

    def _widen(self, low: _dt.date, high: _dt.date) -> None:
        self.low = low if self.low is None or low < self.low else self.low
        self.high = high if self.high is None or high > self.high else self.high

    def as_json(self) -> dict[str, Any]:
        """``{"sum": "1234.50", "nulls": n}`` or ``{"min": iso, "max": iso, "nulls": n}``
        (``min``/``max`` are null for a column with no value)."""
        if self.type in SUMMED_TYPES:
            return {"sum": format(self.sum, "f"), "nulls": self.nulls}
        return {
            "min": None if self.low is None else _iso(self.low),
            "max": None if self.high is None else _iso(self.high),
            "nulls": self.nulls,
        }


def _iso(value: _dt.date) -> str:
    if isinstance(value, _dt.datetime):
        return value.astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")
    return value.isoformat()


def _parse_point(kind: ColumnType, text: Any) -> _dt.date | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"a stored min/max must be ISO text, got {text!r}")
    if kind is ColumnType.DATE:
        return _dt.date.fromisoformat(text)
    return _instant(_dt.datetime.fromisoformat(text))


class ControlTotals:
    """Row count and per-column totals of the rows written so far.

    Args:
        columns: the file's columns in output order; those of
            :data:`TOTALLED_TYPES` get totals, the others are ignored (their values
            are still expected in every batch, in column order).

    Raises:
        ValueError: from :meth:`add` on a value that cannot be totalled exactly (a
            float in a DECIMAL column, a naive datetime...), from :meth:`merge` on
            totals of other columns.
    """

    def __init__(self, columns: Sequence[Column]):
        self._width = len(columns)
        self._indexes: list[int] = []
        self.columns: list[ColumnTotal] = []
        for index, column in enumerate(columns):
            kind = ColumnType(column.type)
            if kind in TOTALLED_TYPES:
                self._indexes.append(index)
                self.columns.append(ColumnTotal(column.key, kind))
        self.rows = 0

    def add(self, columns: Sequence[Sequence[Any]]) -> None:
        """Count one column-major batch (the one handed to the writer).

        Args:
            columns: one sequence of typed values per output column, all of one length.

        Raises:
            ValueError: the batch has another number of columns, or a value cannot be
                totalled exactly.
        """
        if len(columns) != self._width:
            raise ValueError(f"expected {self._width} columns, got {len(columns)}")
        if not columns:
            return
        self.rows += len(columns[0])
        for index, total in zip(self._indexes, self.columns, strict=True):
            total.add(columns[index])

    def merge(self, other: ControlTotals) -> ControlTotals:
        """Add the totals of other rows of the same columns (another shard); returns self."""
        if [(c.key, c.type) for c in other.columns] != [(c.key, c.type) for c in self.columns]:
            raise ValueError("cannot merge control totals of other columns")
        self.rows += other.rows
        for mine, theirs in zip(self.columns, other.columns, strict=True):
            mine.merge(theirs)
        return self

    def as_json(self) -> dict[str, Any]:
        """The manifest's ``controlTotals``: ``{"rowCount": n, "columns": {key: {...}}}``.

        Sums are exact decimal text (``"1234.50"``); ``min``/``max`` ISO 8601 text (dates
        ``2024-01-31``, datetimes in UTC ``2024-01-31T16:00:00Z``); ``nulls`` counts the
        empty cells.
        """
        return {
            "rowCount": self.rows,
            "columns": {total.key: total.as_json() for total in self.columns},
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form for a shard's checkpoint (types included, microseconds kept)."""
        return {
            "width": self._width,
            "rows": self.rows,
            "columns": [
                {"index": index, "type": total.type.value, **total.as_json(), "key": total.key}
                for index, total in zip(self._indexes, self.columns, strict=True)
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControlTotals:
        """Read :meth:`to_dict`'s form back.

        Raises:
            ValueError: the data is not that form (missing field, bad number or date).
        """
        try:
            width = int(data["width"])
            totals = cls.__new__(cls)
            totals._width = width
            totals.rows = int(data["rows"])
            totals._indexes = []
            totals.columns = []
            for item in data["columns"]:
                kind = ColumnType(item["type"])
                total = ColumnTotal(str(item["key"]), kind, nulls=int(item["nulls"]))
                if kind in SUMMED_TYPES:
                    total.sum = exact_decimal(str(item["sum"]))
                else:
                    total.low = _parse_point(kind, item["min"])
                    total.high = _parse_point(kind, item["max"])
                totals._indexes.append(int(item["index"]))
                totals.columns.append(total)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not stored control totals: {exc!r}") from None
        if totals.rows < 0 or any(not 0 <= i < width for i in totals._indexes):
            raise ValueError("not stored control totals: a count or index out of range")
        return totals

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ControlTotals):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]
