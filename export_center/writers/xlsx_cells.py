"""The cells of an XLSX worksheet: one renderer per column, and the rules per value.

The XLSX writer (``writers.xlsx``) renders each chunk of rows column by column with a
:class:`CellRenderer`. A column's renderer is one list comprehension over the
column's values with no call per cell on the common path (values of the column's own
type); any other value goes through one method that holds every rule
(``_any_cell``). Text follows the rules of ``writers.xlsx_text``.

Cell rules (DESIGN.md "Files", CASES.md):

* STRING: inline strings (``t="inlineStr"``); never a ``<f>`` element, so text such
  as ``=cmd|' /C calc'!A0`` stays text (E07). Numeric-looking text keeps its leading
  zeros (E03). An empty string is an empty cell. Characters XML cannot carry (E08),
  the limit of 32,767 UTF-16 units (E10), escaping, ``_xHHHH_``, the quote prefix
  and whitespace: ``writers.xlsx_text``, for every text cell and the header.
* INTEGER: a number when it has at most 15 digits, else text (E04: Excel keeps 15
  significant digits; ``9912140633506421`` becomes text, ``999999999999999`` stays a
  number). ``bool`` is not treated as an integer.
* DECIMAL: each cell is decided on its own (E04). A value Excel holds exactly, at
  most 15 significant digits (``1234567890123.45``, ``-0.000000000000001``,
  ``1000000000000000000``), is a number written as exact positional text
  (``format(d, "f")``, never ``1E-8``) with the number format ``#,##0`` plus one ``0``
  per decimal place of the value's own scale (up to 15 places; General beyond).
  A value with more than 15 significant digits (``12345678901234.56``) is a text cell
  with that positional text, and only that cell: its batch neighbours stay numbers.
  Values come as a ``DecimalColumn`` (validated text), ``DecimalText``, ``Decimal`` or
  None. NaN/Infinity never reach a cell (E15): empty cell, counted in
  ``invalid_numbers``.
* BOOLEAN: ``t="b"`` with 1/0.
* DATE: Excel serial (1900 date system) with ``yyyy-mm-dd``; DATETIME: serial with
  the fraction of the day, truncated to milliseconds (Excel's precision), format
  ``yyyy-mm-dd hh:mm:ss``. Serials follow Excel's 1900 leap-year rule: 1900-01-01 is
  1, 1900-02-28 is 59, serial 60 is the fictitious 1900-02-29 and is never written,
  1900-03-01 is 61 and later days count from 1899-12-30 (up to 2,958,465 for
  9999-12-31), as openpyxl's ``to_excel``/``from_excel`` convert them. Days and
  date-times before 1900-01-01, which Excel cannot show, are ISO text
  (``1899-12-31``, ``1899-12-31 23:59:59``).
* Time zone (E13): an aware datetime is written as its wall time in the export time
  zone; a naive one is written as given. A wall time that occurs twice in that zone,
  i.e. in the repeated hour of a DST fall-back (2024-11-03 01:00-01:59:59 in
  America/New_York, once at -04:00 and once at -05:00), is a text cell with the ISO
  text and the UTC offset, exactly as the CSV writer writes it
  (``2024-11-03 01:30:00-04:00``, ``2024-11-03 01:30:00-05:00``): a serial cannot carry
  the offset, and two equal serials would hide which moment is which. Every other
  value stays a date serial. A spring-forward gap never occurs (an aware moment
  always has a wall time that exists). Detection: ``writers.base.wall_clock``
  (``fold=0`` and ``fold=1`` give different UTC offsets); zones with a fixed offset
  such as UTC skip it.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from export_center.columns import Column, ColumnType
from export_center.values import DecimalColumn, DecimalText
from export_center.writers.base import WallClock, WriterStats, date_cache
from export_center.writers.xlsx_parts import (
    MAX_FORMAT_SCALE,
    SCALE_STYLES,
    STYLE_DATE,
    STYLE_DATETIME,
    STYLE_HEADER,
)
from export_center.writers.xlsx_text import (
    ILLEGAL_RE,
    PLAIN_FIRST_EXCLUDED,
    SAFE_CHARS,
    SPACES,
    SPECIAL_RE,
    clean_text_cell,
    count_replaced,
    escape_text,
    excel_text,
)

__all__ = ["MAX_NUMERIC_DIGITS", "CellRenderer", "ColumnRenderer"]

MAX_NUMERIC_DIGITS = 15
"""Most significant digits Excel keeps in a number; longer values become text (E04)."""

_NUMERIC_LIMIT = 10**MAX_NUMERIC_DIGITS

_EXCEL_EPOCH_ORDINAL = _dt.date(1899, 12, 30).toordinal()
"""Serial 0 as Excel counts from 1900-03-01 on (serial = days since 1899-12-30)."""
_FIRST_EXCEL_DATE = _dt.date(1900, 1, 1)
"""Serial 1, the first day Excel's 1900 date system shows; earlier dates are text."""
_FIRST_EXCEL_ORDINAL = _FIRST_EXCEL_DATE.toordinal()
_FAKE_LEAP_DAY_SERIAL = 60
"""Excel's fictitious 1900-02-29 (1900 is not a leap year; Lotus 1-2-3 compatibility)."""
_MS_PER_DAY = 86_400_000

_DIGITS = "0123456789"

ColumnRenderer = Callable[[Sequence[Any], list[str]], list[str]]
"""``render(values, row_numbers) -> cells``: one column of a chunk as ``<c>`` elements
(``""`` for an empty cell), one per value; ``row_numbers`` are the rows' numbers as
text."""


def _serial_day(ordinal: int) -> int:
    """Excel serial of a day (1900 date system), from its proleptic Gregorian ordinal.

    Excel counts 1900-02-29, a day that never was, as serial 60: 1900-01-01 is 1,
    1900-02-28 is 59 and 1900-03-01 is 61 (days since 1899-12-30 from there on).
    openpyxl's ``utils.datetime.to_excel`` and ``from_excel`` follow the same rule.

    Args:
        ordinal: ``date.toordinal()`` of a day from 1900-01-01 (the caller writes
            earlier days as text).

    Returns:
        The serial: 1..59 up to 1900-02-28, 61.. from 1900-03-01.
    """
    days = ordinal - _EXCEL_EPOCH_ORDINAL
    return days if days > _FAKE_LEAP_DAY_SERIAL else days - 1


def _serial_text(day: _dt.date) -> str:
    """The Excel serial of a day from 1900-01-01 on, as ``<v>`` text (``"45292"``)."""
    return str(_serial_day(day.toordinal()))


def _significant_digits(number_text: str) -> int:
    """Digits from the first to the last non-zero digit ("-0.012300" -> 3, "1000" -> 1)."""
    return len(number_text.lstrip("-+").replace(".", "").strip("0"))


class CellRenderer:
    """Render the cells of one XLSX file (every cell rule; see the module docstring).

    Args:
        stats: the writer's running stats; truncated cells, invalid numbers and
            replaced characters are added to it as cells are rendered.
        wall: the export time zone's wall clock (``writers.base.wall_clock``).
    """

    def __init__(self, stats: WriterStats, wall: WallClock):
        self._stats = stats
        self._wall = wall

    def header_row(self, columns: Sequence[Column], letters: Sequence[str]) -> str:
        """Row 1: the column titles, bold (style 1), cleaned like any text (E08, E10).

        Args:
            columns: the export's columns, in file order.
            letters: their column letters (``A``, ``B``, ...).

        Returns:
            The ``<row r="1">`` element; replaced characters and cut titles are counted.
        """
        cells = []
        for column, letter in zip(columns, letters, strict=True):
            text, replaced, truncated = excel_text(column.title)
            if replaced:
                count_replaced(column.title, self._stats)
            self._stats.truncated_cells += truncated
            if text:
                cells.append(clean_text_cell(text, f"{letter}1", escape_text(text), STYLE_HEADER))
        return f'<row r="1">{"".join(cells)}</row>'

    def column_renderer(self, column_type: ColumnType, letter: str) -> ColumnRenderer:
        """Build the function rendering one column's values of a chunk into its cells.

        The fast paths are list comprehensions over values of the column's own type;
        anything else (None aside) goes through ``_any_cell``.
        """
        any_cell = self._any_cell

        if column_type is ColumnType.STRING:
            text_cell = self._text_cell
            clean_cell = clean_text_cell
            special_first = PLAIN_FIRST_EXCLUDED
            spaces = SPACES

            def render_strings(values: Sequence[Any], numbers: list[str]) -> list[str]:
                texts = [v for v in values if type(v) is str]
                joined = "".join(texts)
                if (
                    SPECIAL_RE.search(joined) is not None
                    or "_x" in joined
                    or (len(joined) > SAFE_CHARS and max(map(len, texts)) > SAFE_CHARS)
                ):
                    return [
                        text_cell(v, letter + n) if type(v) is str else any_cell(v, letter + n)
                        for v, n in zip(values, numbers, strict=True)
                    ]
                return [
                    (
                        f'<c r="{letter}{n}" t="inlineStr"><is><t>{v}</t></is></c>'
                        if v[0] not in special_first and v[-1] not in spaces
                        else clean_cell(v, letter + n)
                    )
                    if type(v) is str and v
                    else ("" if v is None or v == "" else any_cell(v, letter + n))
                    for v, n in zip(values, numbers, strict=True)
                ]

            return render_strings

        if column_type is ColumnType.INTEGER:
            limit = _NUMERIC_LIMIT

            def render_integers(values: Sequence[Any], numbers: list[str]) -> list[str]:
                return [
                    f'<c r="{letter}{n}"><v>{v}</v></c>'
                    if type(v) is int and -limit < v < limit
                    else ("" if v is None else any_cell(v, letter + n))
                    for v, n in zip(values, numbers, strict=True)
                ]

            return render_integers

        if column_type is ColumnType.DATE:
            first_date = _FIRST_EXCEL_DATE
            style = STYLE_DATE
            serial = date_cache(_serial_text).__getitem__

            def render_dates(values: Sequence[Any], numbers: list[str]) -> list[str]:
                return [
                    f'<c r="{letter}{n}" s="{style}"><v>{serial(v)}</v></c>'
                    if type(v) is _dt.date and v >= first_date
                    else ("" if v is None else any_cell(v, letter + n))
                    for v, n in zip(values, numbers, strict=True)
                ]

            return render_dates

        if column_type is ColumnType.BOOLEAN:

            def render_booleans(values: Sequence[Any], numbers: list[str]) -> list[str]:
                return [
                    (
                        f'<c r="{letter}{n}" t="b"><v>1</v></c>'
                        if v
                        else f'<c r="{letter}{n}" t="b"><v>0</v></c>'
                    )
                    if type(v) is bool
                    else ("" if v is None else any_cell(v, letter + n))
                    for v, n in zip(values, numbers, strict=True)
                ]

            return render_booleans

        if column_type is ColumnType.DECIMAL:
            scale_styles = SCALE_STYLES
            short = MAX_NUMERIC_DIGITS
            digits = _DIGITS
            decimal_text = DecimalText
            decimal_text_cell = self._decimal_text_cell

            def render_decimals(values: Sequence[Any], numbers: list[str]) -> list[str]:
                # The plain str values of a DecimalColumn are validated positional text,
                # like DecimalText; a plain str anywhere else is not a number.
                plain = str if type(values) is DecimalColumn else decimal_text
                texts: list[str] = values  # type: ignore[assignment]  # checked next
                validated = plain is str or set(map(type, values)) == {decimal_text}
                if validated and max(map(len, texts)) <= short:
                    # Validated positional text of at most 15 characters: at most 15
                    # digits; the scale is the length after the dot.
                    return [
                        f'<c r="{letter}{n}" s="{scale_styles[len(t.partition(".")[2])]}">'
                        f"<v>{t}</v></c>"
                        for t, n in zip(texts, numbers, strict=True)
                    ]
                # Each cell on its own (E04). Validated text or str(v) of a finite
                # Decimal (it ends with a digit, "NaN" and "Infinity" do not; without
                # "E" it is positional) of at most 15 characters has at most 15 digits
                # and is a number here. Longer text is a number or text by its
                # significant digits (_decimal_text_cell); None is an empty cell; any
                # other value goes through _any_cell.
                return [
                    f'<c r="{letter}{n}" s="{scale_styles[len(t.partition(".")[2])]}">'
                    f"<v>{t}</v></c>"
                    if ((type(v) is plain or type(v) is decimal_text) and len(t := v) <= short)
                    or (
                        type(v) is Decimal
                        and len(t := str(v)) <= short
                        and t[-1] in digits
                        and "E" not in t
                    )
                    else (
                        ""
                        if v is None
                        else decimal_text_cell(v, letter + n)
                        if type(v) is plain
                        else any_cell(v, letter + n)
                    )
                    for v, n in zip(values, numbers, strict=True)
                ]

            return render_decimals

        if column_type is ColumnType.DATETIME:
            datetime_cell = self._datetime_cell
            moment = _dt.datetime

            def render_datetimes(values: Sequence[Any], numbers: list[str]) -> list[str]:
                return [
                    datetime_cell(v, letter + n)
                    if type(v) is moment
                    else ("" if v is None else any_cell(v, letter + n))
                    for v, n in zip(values, numbers, strict=True)
                ]

            return render_datetimes

        def render_any(values: Sequence[Any], numbers: list[str]) -> list[str]:
            return [
                "" if v is None else any_cell(v, letter + n)
                for v, n in zip(values, numbers, strict=True)
            ]

        return render_any

    def _text_cell(self, text: str, ref: str) -> str:
        """One inline-string cell, with replacement, truncation and escaping."""
        if not text:
            return ""
        if len(text) > SAFE_CHARS or ILLEGAL_RE.search(text) is not None:
            safe, replaced, truncated = excel_text(text)
            if replaced:
                count_replaced(text, self._stats)
            self._stats.truncated_cells += truncated
            text = safe
        return clean_text_cell(text, ref, escape_text(text))

    def _any_cell(self, value: Any, ref: str) -> str:
        """Render any typed value by its Python type (all cell rules in one place)."""
        if value is None:
            return ""
        if isinstance(value, DecimalText):
            return self._decimal_text_cell(str(value), ref)
        if isinstance(value, str):
            return self._text_cell(str(value), ref)
        if isinstance(value, bool):
            return f'<c r="{ref}" t="b"><v>{1 if value else 0}</v></c>'
        if isinstance(value, int):
            value = int(value)
            if -_NUMERIC_LIMIT < value < _NUMERIC_LIMIT:
                return f'<c r="{ref}"><v>{value}</v></c>'
            return self._text_cell(str(value), ref)  # E04: more than 15 digits
        if isinstance(value, Decimal):
            return self._decimal_cell(value, ref)
        if isinstance(value, float):
            if not math.isfinite(value):
                self._stats.invalid_numbers += 1  # E15
                return ""
            return f'<c r="{ref}"><v>{value!r}</v></c>'
        if isinstance(value, _dt.datetime):
            return self._datetime_cell(value, ref)
        if isinstance(value, _dt.date):
            if value >= _FIRST_EXCEL_DATE:
                serial = _serial_day(value.toordinal())
                return f'<c r="{ref}" s="{STYLE_DATE}"><v>{serial}</v></c>'
            return self._text_cell(value.isoformat(), ref)
        return self._text_cell(str(value), ref)

    def _decimal_cell(self, value: Decimal, ref: str) -> str:
        """A DECIMAL cell: exact number with a scale-based format, or text (E04, E15)."""
        if not value.is_finite():
            self._stats.invalid_numbers += 1  # E15: never NaN/Infinity in <v>
            return ""
        text = str(value)
        if "E" in text:
            text = format(value, "f")
        return self._decimal_text_cell(text, ref)

    def _decimal_text_cell(self, text: str, ref: str) -> str:
        """A DECIMAL cell from exact positional text (``DecimalText`` or formatted)."""
        if len(text) > MAX_NUMERIC_DIGITS and _significant_digits(text) > MAX_NUMERIC_DIGITS:
            return self._text_cell(text, ref)
        scale = len(text.partition(".")[2])
        style = SCALE_STYLES[scale] if scale <= MAX_FORMAT_SCALE else 0  # 0: General
        return f'<c r="{ref}" s="{style}"><v>{text}</v></c>'

    def _datetime_cell(self, value: _dt.datetime, ref: str) -> str:
        """A DATETIME cell: export-zone wall time as a serial, ms precision (E13).

        An aware value whose wall time occurs twice in the export zone (the repeated
        hour of a DST fall-back) is a text cell with its UTC offset instead,
        ``2024-11-03 01:30:00-04:00``: a serial cannot carry the offset that tells the
        two occurrences apart. Any other value before 1900-01-01 is ISO text without
        offset.
        """
        if value.tzinfo is not None:
            try:
                value, repeated = self._wall(value)
            except OverflowError:  # e.g. 9999-12-31T23:00Z in a zone east of UTC
                return self._text_cell(value.isoformat(" "), ref)
            if repeated:
                return self._text_cell(value.isoformat(" "), ref)
        ordinal = value.toordinal()
        if ordinal < _FIRST_EXCEL_ORDINAL:  # before 1900-01-01: Excel cannot show it
            return self._text_cell(value.replace(tzinfo=None).isoformat(" "), ref)
        millis = (
            value.hour * 3600 + value.minute * 60 + value.second
        ) * 1000 + value.microsecond // 1000
        serial = _serial_day(ordinal) + millis / _MS_PER_DAY
        return f'<c r="{ref}" s="{STYLE_DATETIME}"><v>{serial!r}</v></c>'
