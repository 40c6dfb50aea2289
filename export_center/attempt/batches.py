"""Converting a whole batch of provider rows into typed columns: the export's hot path.

:class:`BatchConverter` turns one batch (decoded JSON objects, or JSON arrays in the
order of the columns when the provider answers ``rowFormat: "array"``) into one list
per column,
with the values :mod:`export_center.values` defines, at a fraction of the cost of
converting row by row: C-level extraction and type checks per column, one regex over a
column of plain decimals, a per-export cache of DATE strings. It also checks the rows
against the declared columns: a declared column in no row of a batch is a contract
error (:class:`MissingColumns`), undeclared keys are remembered for the warning, and a
batch holding a float asks the caller to decode it exactly (:class:`InexactNumber`).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import operator
from collections.abc import Sequence
from typing import Any

from export_center.columns import Column, ColumnType
from export_center.values import (
    _DATE_CACHE_SIZE,
    _PLAIN_DECIMAL_COLUMN_RE,
    BoundedCache,
    DecimalColumn,
    DecimalText,
    InvalidValue,
    _inexact_message,
    _to_date,
    make_converters,
)

__all__ = ["BatchConverter", "InexactNumber", "InvalidRow", "MissingColumns"]


class InvalidRow(ValueError):
    """A row of a batch that cannot be converted (raised by :class:`BatchConverter`).

    Attributes:
        index: 0-based position of the row in the batch.
        column: the column key, or None when the row is not a JSON object.
        message: what is wrong (the :class:`InvalidValue` message, or "not an object").
    """

    def __init__(self, index: int, column: str | None, message: str):
        self.index, self.column, self.message = index, column, message
        super().__init__(message)


class InexactNumber(InvalidRow):
    """A value cell holds a ``float``: a JSON number the decoder may have rounded.

    Raised by :meth:`BatchConverter.columns_of` before any value is converted. The
    caller decodes the batch again exactly (``provider_client.Batch.exact_rows``:
    ``Decimal`` for fractions and exponents, ``int`` at any size) and converts that; a
    caller that cannot treats it as the :class:`InvalidRow` it also is.

    Attributes:
        index: 0-based position of the first such row for ``column``.
        column: the column key.
        message: e.g. ``"a JSON number that was not read exactly: 1.8446744073709552e+19"``.
    """


NOT_DECLARED_ARRAY = 'an array, but the answer does not say "rowFormat": "array"'
"""Why an array row of an answer without ``rowFormat: "array"`` is refused."""

_KEYS_NAMED = 5
"""Keys named at most in one message (the rest are counted)."""
_UNDECLARED_KEPT = 10
"""Distinct undeclared keys remembered per export for the warning."""


def _key_list(keys: Sequence[str]) -> str:
    """``'a', 'b' and 3 more``: keys as short reprs, at most :data:`_KEYS_NAMED` named."""
    shown = [repr(k if len(k) <= 40 else k[:37] + "...") for k in keys[:_KEYS_NAMED]]
    more = f" and {len(keys) - _KEYS_NAMED} more" if len(keys) > _KEYS_NAMED else ""
    return ", ".join(shown) + more


class MissingColumns(ValueError):
    """Declared columns that no row of a non-empty batch carries (a contract error).

    A key missing from only some rows is an empty cell; a key missing from every row
    means the provider sends other keys than it declared (``customerName`` for
    ``customer_name``), which would silently give a column of empty cells.

    Attributes:
        columns: the declared keys found in no row, in column order.
        unknown: the keys the rows carry that are not declared, in first-seen order.
    """

    def __init__(self, columns: list[str], unknown: list[str]):
        self.columns, self.unknown = columns, unknown
        super().__init__(self.describe())

    def describe(self, batch_no: int | None = None) -> str:
        """The message, e.g. ``column 'customer_name' is in no row of batch 1 (rows carry
        unknown keys 'customerName', 'amt')``.

        Args:
            batch_no: the batch's number in the export (1-based), or None.
        """
        where = f"batch {batch_no}" if batch_no is not None else "the batch"
        what = "column" if len(self.columns) == 1 else "columns"
        verb = "is" if len(self.columns) == 1 else "are"
        text = f"{what} {_key_list(self.columns)} {verb} in no row of {where}"
        if self.unknown:
            text += f" (rows carry unknown keys {_key_list(self.unknown)})"
        return text


_FINAL_TYPES: dict[ColumnType, frozenset[type]] = {
    ColumnType.STRING: frozenset({str, type(None)}),
    ColumnType.INTEGER: frozenset({int, type(None)}),
    ColumnType.BOOLEAN: frozenset({bool, type(None)}),
    ColumnType.DECIMAL: frozenset({DecimalText, type(None)}),
    ColumnType.DATE: frozenset({type(None)}),
    ColumnType.DATETIME: frozenset({type(None)}),
}
"""Per type, the value types a column may hold that need no conversion at all."""


class BatchConverter:
    """Convert a whole batch of provider rows column by column (the export's hot path).

    :meth:`columns_of` gives the same values and the same first error as converting row
    by row with :func:`make_converters` (``conv(row.get(key))`` for each row in order,
    each column in order), at a fraction of the cost:

    * each column is taken out of the row dicts with one ``map`` of an
      ``operator.itemgetter`` (a C loop); when that succeeds and every row has as many
      keys as there are columns (``set(map(len, rows))``, another C loop), the rows carry
      exactly the declared keys and nothing else is looked at. Only otherwise the keys
      of all rows are collected once: a declared key in no row raises
      :class:`MissingColumns`, a key in some rows only is an empty cell where missing,
      and undeclared keys are remembered for :meth:`notes`;
    * a column whose values are all of the type's final Python type is checked with one
      C-level ``set(map(type, ...))`` and kept as it is; the same sets show a ``float``
      (a JSON number the decoder may have rounded), which raises :class:`InexactNumber`
      before anything is converted;
    * a column of plain decimal strings is validated with one regex match over the
      column joined with LF, and marked as a :class:`DecimalColumn`;
    * DATE strings go through a per-export cache (each distinct string parsed once);
    * only the other columns take the per-value converters.

    On any invalid value the batch is converted again row by row, so the error names
    the first bad row in row order (:class:`InvalidRow`). The row dicts are not changed.

    Args:
        columns: the export's columns (at least one).
        required: the keys that must be in some row of every non-empty batch of
            objects (the chosen columns: a provider may leave the others out, which are
            then empty cells), None for every declared key.
    """

    def __init__(self, columns: Sequence[Column], required: Sequence[str] | None = None):
        self.columns = list(columns)
        if not self.columns:
            raise ValueError("an export needs at least one column")
        self.keys = [c.key for c in self.columns]
        self.types = [ColumnType(c.type) for c in self.columns]
        self.converters = make_converters(self.columns)
        self._dates: BoundedCache[Any, _dt.date | None] = BoundedCache(_to_date, _DATE_CACHE_SIZE)
        self._getters = [operator.itemgetter(key) for key in self.keys]
        self._declared = frozenset(self.keys)
        self._required = self._declared if required is None else frozenset(required)
        self._width = {len(self.keys)}
        self._undeclared: dict[str, None] = {}
        self._more_undeclared = False

    def columns_of(self, rows: Sequence[Any], arrays: bool = False) -> list[list[Any]]:
        """Convert ``rows`` (decoded JSON objects or arrays) to typed values, column-major.

        Args:
            rows: one batch as the provider sent it, numbers decoded exactly (``int``,
                ``Decimal``); a ``float`` in a value cell is refused (see Raises).
            arrays: the rows are JSON arrays holding one value per declared column, in
                column order (``rowFormat: "array"``): each must be a list of exactly
                ``len(columns)`` values. The columns come out with one C-level
                ``zip(*rows)``, with no key lookups; the values are checked and converted
                as for objects.

        Returns:
            One list per column, in column order, each ``len(rows)`` long; a key missing
            from a row is ``None`` (an empty cell). A DECIMAL column of plain positional
            strings comes as a :class:`DecimalColumn` of those strings; other DECIMAL
            values are ``DecimalText`` or ``Decimal`` as :func:`make_converters` gives.

        Raises:
            MissingColumns: the rows are objects and a declared key is in none of them.
            InexactNumber: a declared column holds a ``float``; decode the batch exactly
                and call again.
            InvalidRow: a row is not an object (with ``arrays``: not an array of one
                value per column), or has a value that does not fit its column (the
                first one in row order).
        """
        batch = rows if isinstance(rows, list) else list(rows)
        if not batch:
            return [[] for _ in self.keys]
        if arrays:
            return self._columns_of_arrays(batch)
        if set(map(type, batch)) != {dict}:
            self._refuse_floats(batch)
            return self._transpose(self._row_by_row(batch))
        extracted: list[list[Any]] | None
        try:  # one C-level pass per column; no per-row tuples for the GC to count
            extracted = [list(map(getter, batch)) for getter in self._getters]
        except KeyError:  # a row without some column
            extracted = None
        if extracted is None or set(map(len, batch)) != self._width:
            self._check_keys(batch)  # not exactly the declared keys in every row
            if extracted is None:
                extracted = [[row.get(key) for row in batch] for key in self.keys]
        return self._typed(extracted, batch, arrays=False)

    def _columns_of_arrays(self, batch: list[Any]) -> list[list[Any]]:
        """:meth:`columns_of` for rows that are arrays in column order.

        Raises:
            InvalidRow: the first row that is not a list of ``len(columns)`` values.
            InexactNumber: as :meth:`columns_of`.
        """
        if set(map(type, batch)) != {list} or set(map(len, batch)) != self._width:
            width = len(self.keys)
            for index, row in enumerate(batch):
                if type(row) is not list:
                    raise InvalidRow(index, None, f"not an array of {width} values")
                if len(row) != width:
                    raise InvalidRow(
                        index, None, f"an array of {len(row)} values for {width} columns"
                    )
        extracted = list(map(list, zip(*batch, strict=True)))
        return self._typed(extracted, batch, arrays=True)

    def _typed(self, extracted: list[list[Any]], batch: list[Any], arrays: bool) -> list[list[Any]]:
        """The extracted raw columns checked and converted (:meth:`columns_of`).

        Args:
            extracted: one list of raw values per column.
            batch: the rows they came from, for the row-by-row pass that names the first
                bad value.
            arrays: the rows are arrays in column order.
        """
        kinds = [set(map(type, values)) for values in extracted]
        for values, found, key in zip(extracted, kinds, self.keys, strict=True):
            if float in found:
                index = next(i for i, v in enumerate(values) if type(v) is float)
                raise InexactNumber(index, key, _inexact_message(values[index]))
        out: list[list[Any]] = []
        for values, found, kind, convert in zip(
            extracted, kinds, self.types, self.converters, strict=True
        ):
            if found <= _FINAL_TYPES[kind]:
                out.append(values)
                continue
            if kind is ColumnType.DECIMAL and found == {str}:
                joined = "\n".join(values)
                if (
                    joined.count("\n") == len(values) - 1
                    and _PLAIN_DECIMAL_COLUMN_RE.fullmatch(joined) is not None
                ):
                    out.append(DecimalColumn(values))
                    continue
            try:
                if kind is ColumnType.DATE and found <= {str, type(None)}:
                    out.append(list(map(self._dates.__getitem__, values)))
                else:
                    out.append([convert(v) for v in values])
            except InvalidValue:
                return self._transpose(self._row_by_row(batch, arrays))
        return out

    def notes(self) -> list[str]:
        """Sentences for the export's warning: the undeclared keys seen in any batch so
        far, once per export (e.g. ``["rows carried undeclared keys 'x', 'y'
        (ignored)"]``), or ``[]``."""
        if not self._undeclared:
            return []
        keys = list(self._undeclared)
        if self._more_undeclared:  # more distinct keys than kept: not counted exactly
            text = _key_list(keys[:_KEYS_NAMED]) + " and more"
        else:
            text = _key_list(keys)
        return [f"rows carried undeclared keys {text} (ignored)"]

    def _check_keys(self, batch: list[dict[str, Any]]) -> None:
        """Collect the keys of all rows once (C loops); raise for declared keys in no
        row, remember undeclared ones (at most :data:`_UNDECLARED_KEPT` per export).

        Raises:
            MissingColumns: a declared key is in no row of the batch.
        """
        present = dict.fromkeys(itertools.chain.from_iterable(batch))
        declared = self._declared
        unknown = [key for key in present if key not in declared]
        absent = [key for key in self.keys if key not in present and key in self._required]
        if absent:
            raise MissingColumns(absent, unknown)
        for key in unknown:
            if key in self._undeclared:
                continue
            if len(self._undeclared) >= _UNDECLARED_KEPT:
                self._more_undeclared = True
                break
            self._undeclared[key] = None

    def _refuse_floats(self, batch: list[Any]) -> None:
        """The float check of the slow path (a batch with rows that are not objects).

        Raises:
            InexactNumber: the first row object with a float in a declared column.
        """
        for index, row in enumerate(batch):
            if isinstance(row, dict):
                for key in self.keys:
                    if type(row.get(key)) is float:
                        raise InexactNumber(index, key, _inexact_message(row[key]))

    def convert(self, rows: Sequence[Any]) -> list[dict[str, Any]]:
        """Convert ``rows`` to new row dicts ``{column key: typed value}``.

        The row-major view of :meth:`columns_of` (every column key present, extra keys
        dropped), for callers that want rows.

        Raises:
            InvalidRow: as :meth:`columns_of`.
        """
        columns = [
            list(map(DecimalText, c)) if type(c) is DecimalColumn else c
            for c in self.columns_of(rows)
        ]
        if not columns[0]:
            return []
        return [dict(zip(self.keys, cells, strict=True)) for cells in zip(*columns, strict=True)]

    def _transpose(self, rows: list[dict[str, Any]]) -> list[list[Any]]:
        return [[row[key] for row in rows] for key in self.keys]

    def _row_by_row(self, batch: list[Any], arrays: bool = False) -> list[dict[str, Any]]:
        """The reference conversion, row by row; raises at the first bad row.

        With ``arrays``, each row (already checked to be a list of one value per column)
        is read as the object it stands for.
        """
        pairs = list(zip(self.keys, self.converters, strict=True))
        out = []
        for index, raw in enumerate(batch):
            if arrays:
                raw = dict(zip(self.keys, raw, strict=True))
            if isinstance(raw, list):
                raise InvalidRow(index, None, NOT_DECLARED_ARRAY)
            if not isinstance(raw, dict):
                raise InvalidRow(index, None, "not an object")
            try:
                out.append({key: conv(raw.get(key)) for key, conv in pairs})
            except InvalidValue as exc:
                raise InvalidRow(index, exc.column, exc.message) from None
        return out
