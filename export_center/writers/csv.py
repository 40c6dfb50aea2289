"""Streaming CSV writer for Excel users.

Rules (DESIGN.md "Files", CASES.md):

* UTF-8 with exactly one BOM at the start of the file, however many batches (E01).
* RFC 4180 quoting (``csv`` module, ``QUOTE_MINIMAL``) and CRLF row ends, so embedded
  LF, bare CR, quotes and commas stay inside their cell (E02).
* A header row of column titles (formula-guarded like STRING cells).
* Formula guard on STRING cells only (E06): a value whose first character is
  ``= + - @``, TAB, CR, LF or a full-width ``＝ ＋ － ＠``, or which starts with
  blanks (any Unicode space, NBSP, zero-width space) followed by one of those, gets a
  ``'`` prefix. Typed numbers such as ``Decimal("-5.00")`` are never prefixed, and
  text like ``a,=1+1`` is left alone because quoting keeps it in one cell.
* Leading zeros are kept as they are (E03 policy: no ``="000123"`` tricks, which would
  clash with E06; users who want Excel types use XLSX).
* Control characters are written verbatim (E08 policy); only lone surrogates, which
  UTF-8 cannot encode, become U+FFFD (counted in ``replaced_chars``).
* Values: int -> digits (exact, E04), Decimal -> positional notation (never ``1E-8``),
  bool -> ``true``/``false``, date -> ``YYYY-MM-DD``, datetime -> wall time in the
  export time zone ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (E13), None -> empty cell. NaN or
  Infinity, which ``export_center.values`` rejects, are written empty and counted (E15).
* No truncation: CSV cells have no length limit (E10 applies to XLSX only).
"""

from __future__ import annotations

import codecs
import contextvars
import csv
import dataclasses
import datetime as _dt
import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, BinaryIO
from zoneinfo import ZoneInfo

from export_center.columns import Column, ColumnType
from export_center.writers.base import CountingStream, WriterStats

__all__ = ["BOM", "CsvWriter", "needs_formula_guard"]

BOM = codecs.BOM_UTF8
"""The UTF-8 byte order mark written once at the start of the file (E01)."""

_FORMULA_START = "=+-@\t\r\n\uff1d\uff0b\uff0d\uff20"
"""Characters that make a spreadsheet treat a cell as a formula (OWASP; E06)."""

_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
"""Invisible characters treated as blanks before a formula character."""

_GUARD_FIRST = frozenset(_FORMULA_START + _ZERO_WIDTH) | frozenset(
    chr(code) for code in range(0x3001) if chr(code).isspace()
)
"""First characters after which ``needs_formula_guard`` must look closer."""

_GUARD_RE = re.compile(rf"[\s{_ZERO_WIDTH}]*[{re.escape(_FORMULA_START)}]")
"""Blanks (Unicode ``\\s``: space, NBSP, ideographic space...) then a formula start."""

_REPLACE_ERRORS = "export_center.csv.replace"
_replaced_counter: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "export_center_csv_replaced", default=None
)


def _replace_unencodable(error: UnicodeError) -> tuple[bytes, int]:
    """Codec error handler: lone surrogates -> U+FFFD, counted for the active writer.

    Returns the UTF-8 bytes of U+FFFD (the UTF-8 encoder accepts only ASCII text or
    bytes as a replacement).
    """
    if not isinstance(error, UnicodeEncodeError):
        raise error
    count = error.end - error.start
    counter = _replaced_counter.get()
    if counter is not None:
        counter[0] += count
    return "\ufffd".encode() * count, error.end


codecs.register_error(_REPLACE_ERRORS, _replace_unencodable)


def needs_formula_guard(text: str) -> bool:
    """Tell whether a CSV text cell must get a ``'`` prefix (CASES E06).

    Args:
        text: the cell text.

    Returns:
        True when ``text`` starts with ``= + - @``, TAB, CR, LF or ``＝ ＋ － ＠``,
        possibly after leading blanks (spaces, NBSP, other Unicode spaces, zero-width
        characters).
    """
    if not text:
        return False
    first = text[0]
    if first in _FORMULA_START:
        return True
    if first.isspace() or first in _ZERO_WIDTH:
        return _GUARD_RE.match(text) is not None
    return False


def _guard(text: str) -> str:
    """Prefix a formula-looking text with ``'`` (E06)."""
    return "'" + text if needs_formula_guard(text) else text


class CsvWriter:
    """Stream rows into a UTF-8 (BOM) RFC 4180 CSV file.

    Args:
        stream: binary output; it is not closed by ``close()``.
        columns: the export's columns, in file order.
        time_zone: IANA name of the export time zone; aware datetimes are written as
            wall time in this zone (E13).
        max_bytes: file size cap in bytes (None = unlimited); ``write_rows`` raises
            ``errors.FileTooLarge`` as soon as the file would grow past it.

    Attributes:
        content_type: ``text/csv; charset=utf-8``.
        extension: ``csv``.
    """

    content_type = "text/csv; charset=utf-8"
    extension = "csv"

    def __init__(
        self,
        stream: BinaryIO,
        columns: Sequence[Column],
        *,
        time_zone: str = "UTC",
        max_bytes: int | None = None,
    ):
        if not columns:
            raise ValueError("an export needs at least one column")
        self._columns = list(columns)
        self._zone = ZoneInfo(time_zone)
        self._stats = WriterStats(sheets=1)
        self._replaced = [0]
        self._invalid = [0]
        self._counting = CountingStream(stream, max_bytes)
        self._text = io.TextIOWrapper(  # type: ignore[type-var]
            self._counting,
            encoding="utf-8",
            errors=_REPLACE_ERRORS,
            newline="",
            write_through=False,
        )
        self._csv = csv.writer(self._text, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
        self._plan = [(c.key, self._renderer(ColumnType(c.type))) for c in self._columns]
        self._closed = False
        self._failed = False
        try:
            self._counting.write(BOM)  # once, before anything else (E01)
            self._csv.writerow([_guard(c.title) for c in self._columns])
        except BaseException:
            self._fail()
            raise

    # --- value rendering -------------------------------------------------------------

    def _renderer(self, column_type: ColumnType) -> Callable[[list[Any]], list[Any]]:
        """Build the function rendering one column of a batch (values -> fields).

        A field is a str, an int or None; ``csv`` writes int with ``str()`` and None as
        an empty field. The common cases are handled inside one list comprehension
        per column; anything else goes through ``_render_other``.
        """
        other = self._render_other
        if column_type is ColumnType.STRING:
            risky_first = _GUARD_FIRST

            def render_strings(values: list[Any]) -> list[Any]:
                return [
                    v
                    if type(v) is str and (not v or v[0] not in risky_first)
                    else other(v, guard=True)
                    for v in values
                ]

            return render_strings
        if column_type is ColumnType.INTEGER:

            def render_integers(values: list[Any]) -> list[Any]:
                return [v if type(v) is int or v is None else other(v) for v in values]

            return render_integers
        if column_type is ColumnType.DECIMAL:
            digits = "0123456789"

            def render_decimals(values: list[Any]) -> list[Any]:
                # str() of a finite Decimal ends with a digit; without "E" it is
                # positional (the exponent form goes through format(d, "f")).
                return [
                    t
                    if type(v) is Decimal and (t := str(v))[-1] in digits and "E" not in t
                    else other(v)
                    for v in values
                ]

            return render_decimals

        def render_others(values: list[Any]) -> list[Any]:
            return [other(v) for v in values]

        return render_others

    def _render_other(self, value: Any, guard: bool = False) -> Any:
        """Render any typed value by its Python type (slow path, all column types)."""
        if value is None:
            return None
        if isinstance(value, str):
            return _guard(str(value)) if guard else str(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return int(value)
        if isinstance(value, Decimal):
            if not value.is_finite():
                self._invalid[0] += 1
                return None
            return format(value, "f")
        if isinstance(value, float):
            if not math.isfinite(value):
                self._invalid[0] += 1
                return None
            return repr(value)
        if isinstance(value, _dt.datetime):
            if value.tzinfo is not None:
                try:
                    value = value.astimezone(self._zone).replace(tzinfo=None)
                except OverflowError:  # beyond year 9999 in the export zone: keep offset
                    return value.isoformat(" ")
            return value.isoformat(" ")
        if isinstance(value, _dt.date):
            return value.isoformat()
        text = str(value)
        return _guard(text) if guard else text

    # --- ExportWriter -----------------------------------------------------------------

    def write_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append one batch of rows (typed values keyed by column key).

        Args:
            rows: the batch; keys that are not columns are ignored, missing keys are
                empty cells.

        Raises:
            FileTooLarge: the file grew past ``max_bytes`` (the writer is then unusable
                and the caller deletes the partial file).
            ValueError: the writer is closed or failed before.
        """
        if self._closed or self._failed:
            raise ValueError("write_rows on a closed or failed CSV writer")
        columns = [render([row.get(key) for row in rows]) for key, render in self._plan]
        lines = list(zip(*columns, strict=True))
        token = _replaced_counter.set(self._replaced)
        try:
            self._csv.writerows(lines)
        except BaseException:
            self._fail()
            raise
        finally:
            _replaced_counter.reset(token)
        self._stats.rows += len(lines)

    def close(self) -> WriterStats:
        """Flush the file and return its stats; the output stream stays open.

        Returns:
            ``WriterStats`` with rows, sheets=1, replaced_chars, invalid_numbers and
            bytes (BOM included).

        Raises:
            FileTooLarge: the last buffered bytes crossed ``max_bytes``.
            ValueError: the writer failed before.
        """
        if self._failed:
            raise ValueError("close on a failed CSV writer")
        if not self._closed:
            token = _replaced_counter.set(self._replaced)
            try:
                self._text.flush()
                self._text.detach()
                self._counting.flush()
            except BaseException:
                self._fail()
                raise
            finally:
                _replaced_counter.reset(token)
            self._closed = True
        stats = self._stats
        stats.replaced_chars = self._replaced[0]
        stats.invalid_numbers = self._invalid[0]
        stats.bytes = self._counting.count
        return dataclasses.replace(stats)

    def abort(self) -> None:
        """Abandon the file after a failure elsewhere: nothing more is written."""
        self._fail()

    def _fail(self) -> None:
        """Stop the writer after an error; later finalizer writes go nowhere."""
        self._failed = True
        self._counting.abandon()
