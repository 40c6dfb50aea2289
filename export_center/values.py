"""Turn provider JSON values into typed Python values, one column type at a time.

The provider contract (DESIGN.md "Provider contract") sends DECIMAL values as JSON
strings ("182210.40") and DATE/DATETIME values as ISO 8601 strings, so that no value
passes through a float. This module is the single place where those JSON values become
the typed values the file writers expect:

=========  ==========================================  ==========================
type       accepted JSON values                        Python value
=========  ==========================================  ==========================
STRING     string; any other JSON scalar as its JSON    ``str``
           text: a number's exact digits (below),
           true/false -> "true"/"false"; an array
           or an object is refused
INTEGER    integer; string of digits ("-12"); integral  ``int`` (exact, any size)
           Decimal within 38 digits ("1.0", "1.0E+2");
           integral float up to 2**53
DECIMAL    numeric string ("182210.40", "-1.5E-3");     ``decimal.Decimal``
           integer; Decimal; finite float (via          (``DecimalText`` from
           ``repr``)                                   ``make_converters``, below)
BOOLEAN    true/false; the integers 1/0 (MySQL          ``bool``
           ``TINYINT(1)``); "true"/"false" (any case)
DATE       "YYYY-MM-DD"                                 ``datetime.date``
DATETIME   ISO 8601, with or without offset, "Z" ok     aware ``datetime.datetime``
=========  ==========================================  ==========================

``None`` (JSON null) stays ``None`` for every type. Anything else raises
:class:`InvalidValue`; the caller adds the row number to the message.

Why a STRING column takes scalars but not arrays: a JSON scalar has one text that
means it (``true``, ``12``, ``0.10``), which is what a reader of the file expects in a
text cell, whereas an array or an object in a flat file has no single cell text (JSON,
a list joined with commas?) and usually means the provider sends another shape than it
declared; the export fails naming row and column instead of guessing. A BOOLEAN column
takes 1/0 because databases without a boolean type store one that way, and refuses
every other number: ``2`` or ``1.0`` there is a value nobody can read as yes or no.

Speed (``bench/README.md``): the converters of :func:`make_converters` run once per
cell of every export, so their common cases cost one type check and, for DECIMAL, one
compiled regex:

* a DECIMAL string in plain positional form (``-?digits[.digits]``, no leading zero,
  at most 20 integer and 18 fraction digits, so always within 38 digits and exponent
  +-38) becomes a :class:`DecimalText`: the validated text itself, which the CSV writer
  writes as is and the XLSX writer puts straight into ``<v>``. Every other DECIMAL
  value takes the full path and becomes a ``Decimal`` as :func:`coerce` returns it.
* DATE strings are parsed once per distinct value and export (a :class:`BoundedCache`,
  the one bounded cache type the writers use too); the result is the same
  ``datetime.date``.

Policies:
    * Big integers stay exact (CASES E04): ``json.loads`` keeps them as ``int`` and no
      step here goes through ``float``.
    * JSON numbers are exact or refused, never rounded: orjson (the fast decoder) gives
      a ``float`` for a number with a fraction or an exponent and for an integer beyond
      64 bits, so :meth:`BatchConverter.columns_of` refuses a batch whose values hold a
      float with :class:`InexactNumber`; the pipeline then decodes that batch again
      with ``Decimal`` for fractions (``provider_client.Batch.exact_rows``). A number
      reaches the converters as ``int`` or ``Decimal`` with the digits the provider
      sent: DECIMAL keeps them (``0E-8`` is written ``0.00000000``), INTEGER takes an
      integral one (``1.0`` -> 1, ``1.5`` refused), STRING writes its exact text
      (positional within the DECIMAL range, ``1E+400`` beyond it).
    * NaN, Infinity and -Infinity are rejected for DECIMAL (CASES E15: Excel has no such
      numbers), as are decimals with more than 38 significant digits or an exponent
      outside [-38, 38] (the range of SQL ``DECIMAL(38, s)``).
    * A naive DATETIME means UTC (CASES E13 policy); the returned datetime is always
      timezone-aware, and the writers convert it to the export time zone.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from export_center.columns import Column, ColumnType

__all__ = [
    "BoundedCache",
    "Converter",
    "DecimalColumn",
    "DecimalText",
    "InvalidValue",
    "MAX_DECIMAL_DIGITS",
    "MAX_DECIMAL_EXPONENT",
    "coerce",
    "make_converters",
]

MAX_DECIMAL_DIGITS = 38
"""Most significant digits a DECIMAL value may have (SQL ``DECIMAL(38, s)``)."""

MAX_DECIMAL_EXPONENT = 38
"""Largest absolute decimal exponent accepted (``1E+38`` is fine, ``1E+39`` is not)."""

_MAX_EXACT_FLOAT_INT = 2**53
"""Integral floats up to this magnitude are exact and accepted for INTEGER columns."""

Converter = Callable[[Any], Any]
"""One column's converter: JSON value -> typed Python value (or raises InvalidValue)."""

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_PLAIN_DECIMAL_RE = re.compile(r"-?(?:0|[1-9][0-9]{0,19})(?:\.[0-9]{1,18})?\Z")
"""DECIMAL text that is already canonical positional notation and within range: no
sign but ``-``, no leading zero, no exponent, <= 20 integer and <= 18 fraction digits
(so <= 38 digits, exponent within +-38). ``str(Decimal(t))`` may differ ("1E-8") but
``format(Decimal(t), "f") == t``, the positional text the writers use."""
_PLAIN_DECIMAL_COLUMN_RE = re.compile(
    rf"(?:{_PLAIN_DECIMAL_RE.pattern[:-2]}\n)*+{_PLAIN_DECIMAL_RE.pattern}"
)
"""A whole column of plain decimals joined with LF, checked with one match."""
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_DATETIME_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]{1,9})?)?"
    r"(?:[Zz]|[+-][0-9]{2}(?::?[0-9]{2}(?::?[0-9]{2})?)?)?)?\Z"
)
_UTC = _dt.UTC


class DecimalText(str):
    """A DECIMAL value kept as its validated, exact positional text (``"182210.40"``).

    Made by the DECIMAL converter of :func:`make_converters` for strings that match
    the plain positional form (see the module docstring); the text is exactly
    ``format(Decimal(text), "f")``, so writers use it without parsing: CSV writes it
    as is, XLSX writes it into ``<v>`` with the number format of its scale.

    It is a ``str`` (text operations see the digits) that compares equal to the
    ``Decimal`` of the same value, so ``DecimalText("1.50") == Decimal("1.50")``.
    Its hash is the text's: do not mix it with ``Decimal`` keys in one set or dict.
    """

    __slots__ = ()

    def to_decimal(self) -> Decimal:
        """The value as ``decimal.Decimal``."""
        return Decimal(str(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Decimal | int) and not isinstance(other, bool):
            return Decimal(str(self)) == other
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return f"DecimalText({str.__repr__(self)})"


class DecimalColumn(list[str]):
    """One batch's DECIMAL column whose every value is validated plain positional text.

    Made by :meth:`BatchConverter.columns_of` when all values of a DECIMAL column match
    the plain positional form (the one :class:`DecimalText` holds): the column is
    marked once instead of wrapping each value, which costs about 1.7 µs per value
    because a ``str`` subclass copies its text. Writers treat a ``DecimalColumn``
    exactly like a list of ``DecimalText`` (CSV writes each text as is, XLSX puts it
    into ``<v>``). A slice of it is a plain ``list``: wrap the slice again to keep the
    mark.
    """

    __slots__ = ()


_K = TypeVar("_K")
_V = TypeVar("_V")


class BoundedCache(dict[_K, _V]):
    """``key -> compute(key)``, each distinct key computed once, at most ``limit`` kept.

    The one bounded cache of the export path: DATE strings to ``date`` here, ``date``
    to ISO text in the CSV writer and to the Excel serial text in the XLSX writer. An
    export's dates repeat a lot, and a hit is one C-level dict lookup
    (``cache[key]`` or ``map(cache.__getitem__, column)``), about 10x cheaper than
    parsing or formatting the value again.

    Rule: a miss calls ``compute(key)`` and remembers the result only while fewer than
    ``limit`` keys are held; after that the cache stops growing and new keys are
    computed on every lookup (they cost what they would cost without a cache). Memory
    is bounded by ``limit`` entries whatever the export holds, and a hit never changes
    the cache, so the common path stays one lookup with no bookkeeping.
    An error raised by ``compute`` (``InvalidValue`` for a bad DATE string) reaches
    the caller, and nothing is remembered for that key.

    Args:
        compute: the pure function of one key (hashable) to its value.
        limit: the most keys remembered (>= 0).
    """

    __slots__ = ("_compute", "_limit")

    def __init__(self, compute: Callable[[_K], _V], limit: int):
        super().__init__()
        self._compute = compute
        self._limit = limit

    def __missing__(self, key: _K) -> _V:
        value = self._compute(key)
        if len(self) < self._limit:
            self[key] = value
        return value


class InvalidValue(ValueError):
    """A provider value that does not fit its column type.

    Args:
        message: what is wrong, e.g. ``"not a finite decimal: 'NaN'"``.
        column: the column key, or None when the column is not known (``coerce``).

    Attributes:
        column: the column key (str) or None.
        message: the message; ``str(error)`` is the message alone, so that the caller
            can say ``f"row {n}, column {error.column}: {error}"``.
    """

    def __init__(self, message: str, column: str | None = None):
        self.message = message
        self.column = column
        super().__init__(message)


def _inexact_message(value: Any) -> str:
    return f"a JSON number that was not read exactly: {value!r}"


def _describe(value: Any) -> str:
    """Short repr of a bad value for an error message (at most ~60 characters); a
    ``Decimal`` (a JSON number read exactly) shows as the number, e.g. ``1.5``."""
    text = str(value) if isinstance(value, Decimal) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- STRING -------------------------------------------------------------------------


def _number_text(number: Decimal) -> str:
    """Exact text of a finite ``Decimal``: positional (``0E-8`` -> ``0.00000000``) within
    the DECIMAL range (exponent and adjusted exponent within +-38), else scientific
    (``1E+400``), so a huge exponent never becomes a huge cell."""
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)  # finite
    if exponent >= -MAX_DECIMAL_EXPONENT and number.adjusted() <= MAX_DECIMAL_EXPONENT:
        return format(number, "f")
    return str(number)


def _to_string(value: Any) -> str | None:
    """STRING: str as is; booleans become ``true``/``false``, numbers their exact text."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValue(f"not a finite number: {_describe(value)}")
        return json.dumps(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise InvalidValue(f"not a finite number: {_describe(value)}")
        return _number_text(value)
    raise InvalidValue(f"expected a string, got {type(value).__name__}: {_describe(value)}")


# --- INTEGER ------------------------------------------------------------------------


def _to_integer(value: Any) -> int | None:
    """INTEGER: int, a string of digits, an integral Decimal of at most 38 digits
    (a JSON ``1.0`` or ``1.0E+2`` read exactly), or an exactly representable integral
    float."""
    if value is None:
        return None
    if type(value) is int:
        return value
    if isinstance(value, bool):
        raise InvalidValue(f"expected an integer, got a boolean: {value!r}")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        if not _INT_RE.match(value):
            raise InvalidValue(f"not an integer: {_describe(value)}")
        try:
            return int(value)
        except ValueError as exc:  # more digits than sys.get_int_max_str_digits()
            raise InvalidValue(f"integer too long: {len(value)} characters") from exc
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) <= _MAX_EXACT_FLOAT_INT:
            return int(value)
        raise InvalidValue(f"not an exact integer: {_describe(value)}")
    if isinstance(value, Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            raise InvalidValue(f"not an integer: {_describe(value)}")
        if value.adjusted() >= MAX_DECIMAL_DIGITS:  # 1E+400: no 401-digit cells
            raise InvalidValue(
                f"integer out of range (more than {MAX_DECIMAL_DIGITS} digits): {_describe(value)}"
            )
        return int(value)
    raise InvalidValue(f"expected an integer, got {type(value).__name__}: {_describe(value)}")


# --- DECIMAL ------------------------------------------------------------------------


def _checked_decimal(number: Decimal, original: Any) -> Decimal:
    """Reject non-finite decimals and those outside 38 digits / exponent +-38 (E15)."""
    if not number.is_finite():
        raise InvalidValue(f"not a finite decimal: {_describe(original)}")
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite
    if len(digits) > MAX_DECIMAL_DIGITS:
        raise InvalidValue(
            f"decimal has {len(digits)} digits, more than {MAX_DECIMAL_DIGITS}: "
            f"{_describe(original)}"
        )
    if abs(exponent) > MAX_DECIMAL_EXPONENT or number.adjusted() > MAX_DECIMAL_EXPONENT:
        raise InvalidValue(f"decimal exponent out of range: {_describe(original)}")
    return number


def _to_decimal(value: Any) -> Decimal | None:
    """DECIMAL: numeric string, int, finite float (via repr) or Decimal."""
    if value is None:
        return None
    if type(value) is str:
        if not _DECIMAL_RE.match(value):  # also rejects "NaN", "Infinity", "1_0", " 1"
            raise InvalidValue(f"not a decimal number: {_describe(value)}")
        if len(value) > 120:
            raise InvalidValue(f"decimal text too long: {len(value)} characters")
        try:
            number = Decimal(value)
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
            raise InvalidValue(f"not a decimal number: {_describe(value)}") from exc
        return _checked_decimal(number, value)
    if isinstance(value, bool):
        raise InvalidValue(f"expected a decimal, got a boolean: {value!r}")
    if isinstance(value, int):
        return _checked_decimal(Decimal(int(value)), value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValue(f"not a finite decimal: {_describe(value)}")
        return _checked_decimal(Decimal(repr(value)), value)
    if isinstance(value, Decimal):
        return _checked_decimal(value, value)
    if isinstance(value, str):
        return _to_decimal(str(value))
    raise InvalidValue(f"expected a decimal, got {type(value).__name__}: {_describe(value)}")


# --- BOOLEAN ------------------------------------------------------------------------

_BOOL_TEXT = {"true": True, "false": False}


def _to_boolean(value: Any) -> bool | None:
    """BOOLEAN: true/false; the JSON integers 1 and 0 (what a MySQL ``TINYINT(1)``
    gives); the strings "true"/"false" in any letter case. Nothing else: not 2 or -1,
    not ``1.0`` or ``1e0`` (a ``Decimal`` or ``float`` here), not "1" or "yes"."""
    if value is None or type(value) is bool:
        return value
    if type(value) is int:
        if value == 1:
            return True
        if value == 0:
            return False
    elif isinstance(value, str):
        found = _BOOL_TEXT.get(value.lower())
        if found is not None:
            return found
    elif isinstance(value, Decimal | float):  # 1e0 reads as Decimal("1"): say why
        raise InvalidValue(
            f"expected a boolean (true, false, 1 or 0), got {_describe(value)} "
            "(a number written with a fraction or an exponent)"
        )
    raise InvalidValue(f"expected a boolean (true, false, 1 or 0), got {_describe(value)}")


# --- DATE / DATETIME ----------------------------------------------------------------


def _to_date(value: Any) -> _dt.date | None:
    """DATE: ISO "YYYY-MM-DD" (a ``date`` that is not a ``datetime`` passes through)."""
    if value is None:
        return None
    if isinstance(value, str):
        if _DATE_RE.match(value):
            try:
                return _dt.date.fromisoformat(value)
            except ValueError:
                pass
        raise InvalidValue(f"not an ISO date (YYYY-MM-DD): {_describe(value)}")
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value
    raise InvalidValue(f"expected a date, got {type(value).__name__}: {_describe(value)}")


def _aware(moment: _dt.datetime) -> _dt.datetime:
    """Attach UTC to a naive datetime (CASES E13 policy: naive means UTC)."""
    return moment.replace(tzinfo=_UTC) if moment.tzinfo is None else moment


def _to_datetime(value: Any) -> _dt.datetime | None:
    """DATETIME: ISO 8601 text with or without offset ("Z" accepted); naive -> UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        if _DATETIME_RE.match(value):
            text = value
            if text[-1] in "Zz":
                text = text[:-1] + "+00:00"
            try:
                return _aware(_dt.datetime.fromisoformat(text))
            except ValueError:
                pass
        raise InvalidValue(f"not an ISO 8601 date-time: {_describe(value)}")
    if isinstance(value, _dt.datetime):
        return _aware(value)
    raise InvalidValue(f"expected a date-time, got {type(value).__name__}: {_describe(value)}")


_CONVERTERS: dict[ColumnType, Converter] = {
    ColumnType.STRING: _to_string,
    ColumnType.INTEGER: _to_integer,
    ColumnType.DECIMAL: _to_decimal,
    ColumnType.BOOLEAN: _to_boolean,
    ColumnType.DATE: _to_date,
    ColumnType.DATETIME: _to_datetime,
}


def coerce(value: Any, column_type: ColumnType | str) -> Any:
    """Convert one provider JSON value to the typed Python value of its column type.

    Args:
        value: a value as decoded by ``json.loads`` (str, int, float, bool, None), or
            an already typed value (``Decimal``, ``date``, ``datetime``).
        column_type: the declared type of the column (``ColumnType`` or its name).

    Returns:
        ``None`` for None; otherwise ``str``, ``int``, ``Decimal``, ``bool``,
        ``datetime.date`` or a timezone-aware ``datetime.datetime`` (see module table).

    Raises:
        InvalidValue: the value does not fit the type (``.column`` is None here).
        ValueError: ``column_type`` is not a known column type.
    """
    return _CONVERTERS[ColumnType(column_type)](value)


_PASS_THROUGH: dict[ColumnType, type] = {
    ColumnType.STRING: str,
    ColumnType.INTEGER: int,
    ColumnType.BOOLEAN: bool,
}
"""Per type, the Python type whose values are already final (checked with ``type() is``)."""


_DATE_CACHE_SIZE = 10_000
"""Distinct DATE strings one converter remembers (an export's dates repeat a lot)."""


def _bind(column_type: ColumnType, key: str) -> Converter:
    """Build the converter of one column: fast path, then the type's converter.

    Args:
        column_type: the column's type.
        key: the column key put into ``InvalidValue.column``.
    """
    if column_type is ColumnType.DECIMAL:
        return _bind_decimal(key)
    if column_type is ColumnType.DATE:
        return _bind_date(key)
    convert = _CONVERTERS[column_type]
    final = _PASS_THROUGH.get(column_type, type(None))

    def convert_column(value: Any) -> Any:
        if value is None or type(value) is final:
            return value
        try:
            return convert(value)
        except InvalidValue as exc:
            raise InvalidValue(exc.message, key) from None

    return convert_column


def _bind_decimal(key: str) -> Converter:
    """DECIMAL: plain positional strings -> ``DecimalText`` after one regex match."""
    plain = _PLAIN_DECIMAL_RE.match
    text = DecimalText

    def convert_decimal(value: Any) -> Any:
        if type(value) is str and plain(value) is not None:
            return text(value)
        if value is None:
            return None
        try:
            return _to_decimal(value)
        except InvalidValue as exc:
            raise InvalidValue(exc.message, key) from None

    return convert_decimal


def _bind_date(key: str) -> Converter:
    """DATE: each distinct ISO string is parsed once (a :class:`BoundedCache`)."""
    days: BoundedCache[Any, _dt.date | None] = BoundedCache(_to_date, _DATE_CACHE_SIZE)

    def convert_date(value: Any) -> Any:
        try:
            if type(value) is str:
                return days[value]
            return _to_date(value)
        except InvalidValue as exc:
            raise InvalidValue(exc.message, key) from None

    return convert_date


def make_converters(columns: Sequence[Column]) -> list[Converter]:
    """Build one converter per column, in column order, for converting many rows.

    Each converter takes a JSON value and returns the typed value as :func:`coerce`
    does for the column's type, with a fast path for values already of the target
    type; an :class:`InvalidValue` it raises carries the column key. One difference:
    a DECIMAL string in plain positional form becomes a :class:`DecimalText` (equal
    to the ``Decimal`` that :func:`coerce` returns, and written identically).

    Typical use (the caller adds the row number to errors)::

        converters = make_converters(columns)
        typed = {c.key: conv(row.get(c.key)) for c, conv in zip(columns, converters)}

    Args:
        columns: the export's columns.

    Returns:
        A list of callables ``value -> typed value``, one per column.
    """
    return [_bind(ColumnType(column.type), column.key) for column in columns]
