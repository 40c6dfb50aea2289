"""Streaming CSV writer for Excel users.

Rules (DESIGN.md "Files", CASES.md):

* By default UTF-8 with exactly one BOM at the start of the file, however many
  batches (E01); ``utf-8`` (no BOM) and ``gb18030`` on request (``CsvOptions``, see
  :class:`CsvWriter`).
* RFC 4180 quoting exactly as the ``csv`` module's ``QUOTE_MINIMAL`` (a field with the
  delimiter, a quote, CR or LF is quoted, quotes doubled; a row made of one empty
  field is written ``""``) and CRLF row ends by default (LF on request), so embedded
  LF, bare CR, quotes and delimiters stay inside their cell (E02). The delimiter is
  ``,`` by default, or ``;``, TAB, ``|``.
* A header row of column titles (formula-guarded like STRING cells), unless the
  options leave it out.
* Formula guard on STRING cells only (E06): a value whose first character is
  ``= + - @``, TAB, CR, LF or a full-width ``＝ ＋ － ＠``, or which starts with
  blanks (any Unicode space, NBSP, zero-width space) followed by one of those, gets a
  ``'`` prefix. Typed numbers such as ``Decimal("-5.00")`` are never prefixed, and
  text like ``a,=1+1`` is left alone because quoting keeps it in one cell.
* Leading zeros are kept as they are (E03 policy: no ``="000123"`` tricks, which would
  clash with E06; users who want Excel types use XLSX).
* Control characters and the non-characters U+FFFE/U+FFFF are written verbatim (E08
  policy); only lone surrogates, which UTF-8 cannot encode, become U+FFFD (counted
  in ``replaced_surrogates`` and in the total ``replaced_chars``).
* Values: int -> digits (exact, E04), Decimal -> positional notation (never ``1E-8``),
  bool -> ``true``/``false``, date -> ``YYYY-MM-DD``, datetime -> wall time in the
  export time zone ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (E13), None -> empty cell. NaN or
  Infinity, which ``export_center.values`` rejects, are written empty and counted (E15).
* DST fall-back: a wall time that occurs twice in the export time zone (the repeated
  hour when the UTC offset falls back, e.g. 2024-11-03 01:00-01:59:59 in
  America/New_York) is written with its UTC offset, so the two moments stay apart:
  ``2024-11-03 01:30:00-04:00`` (first) and ``2024-11-03 01:30:00-05:00`` (second).
  Every other datetime has no offset, as above; the XLSX writer writes the same text.
  A spring-forward gap cannot occur: an aware moment always has a wall time that
  exists. Naive datetimes are written as given (``export_center.values`` makes every
  DATETIME aware). Detection: ``writers.base.wall_clock``; zones with a fixed offset
  such as UTC skip it.
* No truncation: CSV cells have no length limit (E10 applies to XLSX only).

Speed: a batch is rendered column by column; a column whose values are all of its
type's common Python type (``str``, ``int``, ``DecimalText``, ``date``) is checked and
converted with C-level operations only (one ``join`` to find quoting needs, one
``map(str, ...)``), and rows are assembled with ``delimiter.join`` over ``zip``. The
batch is encoded once and written with one call. A DATETIME column calls one
function per ``datetime`` (its text never needs quoting). Everything else goes through
one per-value path that holds all the rules.
"""

from __future__ import annotations

import codecs
import datetime as _dt
import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, BinaryIO

from export_center.columns import Column, ColumnType
from export_center.filespec import DELIMITERS, ENCODINGS, LINE_ENDINGS, CsvOptions
from export_center.values import DecimalColumn, DecimalText
from export_center.writers.base import StreamingWriter, WriterStats, date_cache

__all__ = ["BOM", "CsvWriter", "check_csv_options", "needs_formula_guard"]

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

_QUOTE_RE = re.compile('[,"\r\n]')
"""Characters that make ``QUOTE_MINIMAL`` quote a field: delimiter, quote, CR, LF."""

_QUOTE_RES = {d: re.compile(f'[{re.escape(d)}"\r\n]') for d in DELIMITERS}
"""The quoting test per delimiter (``,`` is :data:`_QUOTE_RE` itself)."""
_QUOTE_RES[","] = _QUOTE_RE

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
"""Lone surrogates: the only code points UTF-8 cannot encode (E08: become U+FFFD)."""

_CODECS = {"utf-8-bom": "utf-8", "utf-8": "utf-8", "gb18030": "gb18030"}
"""The Python codec of each encoding option; only ``utf-8-bom`` writes :data:`BOM`."""

_combine = _dt.datetime.combine


def check_csv_options(options: CsvOptions) -> None:
    """Refuse CSV options outside their enums (the API checks them first).

    Args:
        options: the file's CSV options.

    Raises:
        ValueError: an encoding, delimiter or line ending that is not one of
            ``filespec.ENCODINGS``, ``DELIMITERS`` or ``LINE_ENDINGS``.
    """
    if options.encoding not in ENCODINGS:
        raise ValueError(f"unknown CSV encoding {options.encoding!r}")
    if options.delimiter not in DELIMITERS:
        raise ValueError(f"unknown CSV delimiter {options.delimiter!r}")
    if options.line_ending not in LINE_ENDINGS:
        raise ValueError(f"unknown CSV line ending {options.line_ending!r}")


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


def _quote(text: str, search: Callable[[str], object] = _QUOTE_RE.search) -> str:
    """One field as ``QUOTE_MINIMAL`` writes it (quotes doubled inside quotes).

    ``search`` finds a character that needs quoting (``_QUOTE_RES[delimiter].search``).
    """
    if search(text) is None:
        return text
    return '"' + text.replace('"', '""') + '"'


class CsvWriter(StreamingWriter):
    """Stream rows into an RFC 4180 CSV file (by default UTF-8 with a BOM, ``,``, CRLF).

    The frame (``write_rows``, ``write_columns``, ``close``, ``abort``, the closed and
    failed states) is :class:`~export_center.writers.base.StreamingWriter`'s; this class
    renders the fields. Its stats have ``sheets=1``, ``bytes`` with the head (without a
    head, ``header=False``: ``sheets=0``), and ``replaced_chars`` equal to
    ``replaced_surrogates`` (lone surrogates are all that CSV replaces).

    Options (``filespec.CsvOptions``), the same rules for every combination:

    * ``encoding``: ``utf-8-bom`` writes :data:`BOM` then UTF-8 (the default, the bytes
      of every earlier release); ``utf-8`` the same without BOM; ``gb18030`` Python's
      ``gb18030`` codec, which covers all of Unicode (four-byte sequences beyond the
      BMP and for the code points GBK lacks). The text is encoded once per batch; a
      lone surrogate, which no encoding holds, becomes U+FFFD (four bytes in GB18030)
      and is counted, as in UTF-8.
    * ``delimiter``: ``,`` ``;`` TAB or ``|``; a field is quoted when it holds the
      delimiter, a quote, CR or LF (quotes doubled), so quoting and the formula guard
      (which looks at the first characters only) hold for every delimiter.
    * ``header``: False leaves out the header row; a ``utf-8-bom`` file still starts
      with the BOM.
    * ``line_ending``: every record ends with CRLF or LF; a line break inside a quoted
      field is written as the value has it.

    Args:
        stream: binary output; it is not closed by ``close()``.
        columns: the export's columns, in file order.
        time_zone: IANA name of the export time zone; aware datetimes are written as
            wall time in this zone (E13), with the UTC offset when that wall time is
            repeated by a DST fall-back.
        max_bytes: file size cap in bytes (None = unlimited); ``write_rows`` raises
            ``errors.FileTooLarge`` as soon as the file would grow past it.
        header: write the BOM and the header row first (True), or rows only (False:
            a shard's part, see ``writers.parts``; the stats then have ``sheets=0``).
        resume_from: with ``header=False`` only, the stats of the part so far: the
            counts continue from them and their ``bytes`` count against ``max_bytes``.
        options: encoding, delimiter, header row and line ending (see above).

    Raises:
        ValueError: no columns, ``resume_from`` with ``header=True``, or an option
            outside its enum (:func:`check_csv_options`).

    Attributes:
        content_type: ``text/csv; charset=utf-8`` (``charset=gb18030`` for GB18030).
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
        header: bool = True,
        resume_from: WriterStats | None = None,
        options: CsvOptions = CsvOptions(),
    ):
        if header and resume_from is not None:
            raise ValueError("a resumed CSV part has no header: pass header=False")
        check_csv_options(options)
        super().__init__(
            stream, columns, time_zone=time_zone, max_bytes=max_bytes, resume_from=resume_from
        )
        self._options = options
        self._codec = _CODECS[options.encoding]
        self._delimiter = options.delimiter
        self._newline = options.newline
        self._quote_search = _QUOTE_RES[options.delimiter].search
        if self._codec != "utf-8":
            self.content_type = f"text/csv; charset={self._codec}"
        self._renderers = [self._renderer(ColumnType(c.type)) for c in self._columns]
        self._single = len(self._columns) == 1
        if header:
            self._stats.sheets = 1
            self._guarded(self._write_header)

    def _write_header(self) -> None:
        """The BOM of a ``utf-8-bom`` file (once, E01) and the row of column titles
        (guarded, E06) unless the options leave it out."""
        head = BOM if self._options.encoding == "utf-8-bom" else b""
        if self._options.header:
            search = self._quote_search
            header = [[_quote(_guard(c.title), search)] for c in self._columns]
            head += self._encode(self._lines(header))
        if head:
            self._counting.write(head)

    # --- value rendering -------------------------------------------------------------

    def _renderer(self, column_type: ColumnType) -> Callable[[list[Any]], list[str]]:
        """Build the function rendering one column of a batch (values -> final fields).

        A field is the cell's text, quoted when needed. Each function first tries the
        column's common case with C-level operations over the whole column; any
        other value (None, another type, a text that needs a guard) sends the column
        through ``_field``, which applies every rule to one value.
        """
        field = self._field
        quote_search = self._quote_search

        if column_type is ColumnType.STRING:
            risky_first = _GUARD_FIRST

            def render_strings(values: list[Any]) -> list[str]:
                try:
                    joined = "".join(values)  # TypeError unless every value is a str
                except TypeError:
                    return [field(v, True) for v in values]
                if not risky_first.isdisjoint("".join([v[:1] for v in values])):
                    values = [
                        _guard(v) if v and v[0] in risky_first and type(v) is not DecimalText else v
                        for v in values
                    ]
                if quote_search(joined) is not None:
                    values = [_quote(v, quote_search) for v in values]
                return values

            return render_strings

        if column_type is ColumnType.INTEGER:

            def render_integers(values: list[Any]) -> list[str]:
                if set(map(type, values)) == {int}:
                    return list(map(str, values))
                return [field(v) for v in values]

            return render_integers

        if column_type is ColumnType.DECIMAL:
            digits = "0123456789"

            def render_decimals(values: list[Any]) -> list[str]:
                if type(values) is DecimalColumn:
                    return values  # validated positional text, nothing to quote
                kinds = set(map(type, values))
                if kinds == {DecimalText}:
                    return values  # validated positional text, nothing to quote
                # str() of a finite Decimal ends with a digit; without "E" it is
                # positional (the exponent form goes through format(d, "f")).
                return [
                    v
                    if type(v) is DecimalText
                    else t
                    if type(v) is Decimal and (t := str(v))[-1] in digits and "E" not in t
                    else field(v)
                    for v in values
                ]

            return render_decimals

        if column_type is ColumnType.DATE:
            text_of = date_cache(_dt.date.isoformat).__getitem__

            def render_dates(values: list[Any]) -> list[str]:
                if set(map(type, values)) == {_dt.date}:
                    return list(map(text_of, values))
                return [field(v) for v in values]

            return render_dates

        if column_type is ColumnType.DATETIME:
            datetime_text = self._datetime_text
            moment = _dt.datetime

            def render_datetimes(values: list[Any]) -> list[str]:
                # ISO date-time text has no comma, quote, CR or LF: never quoted.
                return [datetime_text(v) if type(v) is moment else field(v) for v in values]

            return render_datetimes

        def render_others(values: list[Any]) -> list[str]:
            return [field(v) for v in values]

        return render_others

    def _field(self, value: Any, guard: bool = False) -> str:
        """One value as its final field text (quoted when needed); all rules here."""
        if value is None:
            return ""
        return _quote(self._text(value, guard), self._quote_search)

    def _text(self, value: Any, guard: bool) -> str:
        """Render any typed value by its Python type (slow path, all column types)."""
        if isinstance(value, DecimalText):
            return str(value)  # a typed number: never guarded
        if isinstance(value, str):
            return _guard(str(value)) if guard else str(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(int(value))
        if isinstance(value, Decimal):
            if not value.is_finite():
                self._stats.invalid_numbers += 1
                return ""
            return format(value, "f")
        if isinstance(value, float):
            if not math.isfinite(value):
                self._stats.invalid_numbers += 1
                return ""
            return repr(value)
        if isinstance(value, _dt.datetime):
            return self._datetime_text(value)
        if isinstance(value, _dt.date):
            return value.isoformat()
        text = str(value)
        return _guard(text) if guard else text

    def _datetime_text(self, value: _dt.datetime) -> str:
        """A datetime as export-zone wall time, ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (E13).

        A wall time that occurs twice in the export zone (DST fall-back) gets its UTC
        offset, ``2024-11-03 01:30:00-04:00``; a naive value is written as given.
        """
        if value.tzinfo is None:
            return value.isoformat(" ")
        try:
            local, repeated = self._wall(value)
        except OverflowError:  # beyond year 9999 in the export zone: keep offset
            return value.isoformat(" ")
        if repeated:
            return local.isoformat(" ")
        # The naive wall time; combine() is about twice as fast as replace(tzinfo=None).
        return _combine(local.date(), local.time()).isoformat(" ")

    def _lines(self, columns: list[list[str]]) -> str:
        """Rows of final fields (given column by column) as terminated records."""
        end = self._newline
        if self._single:  # csv writes a row of one empty field as "" (not a blank line)
            return "".join([(f or '""') + end for f in columns[0]])
        return end.join(map(self._delimiter.join, zip(*columns, strict=True))) + end

    def _encode(self, text: str) -> bytes:
        """The bytes of ``text`` in the file's encoding; lone surrogates, which no
        encoding holds, become U+FFFD and are counted (E08)."""
        try:
            return text.encode(self._codec)
        except UnicodeEncodeError:
            text, replaced = _SURROGATE_RE.subn("\ufffd", text)
            self._stats.replaced_surrogates += replaced  # the only kind CSV replaces
            return text.encode(self._codec)

    # --- StreamingWriter hooks ---------------------------------------------------------

    def _write_batch(self, columns: Sequence[Sequence[Any]]) -> None:
        """Render a batch column by column, assemble its lines, write them in one call."""
        fields = [
            render(values if isinstance(values, list) else list(values))
            for render, values in zip(self._renderers, columns, strict=True)
        ]
        self._counting.write(self._encode(self._lines(fields)))
        self._stats.rows += len(columns[0])

    def _finish(self) -> None:
        """Flush the output (CSV has no trailer)."""
        self._counting.flush()
