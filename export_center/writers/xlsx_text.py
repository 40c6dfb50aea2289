"""The text rules of XLSX cells: what a string becomes inside ``<is><t>…</t></is>``.

Used by the XLSX writer (``writers.xlsx``) for STRING cells, for values written as
text (long numbers, dates before 1900, repeated wall times) and for the header row.
Rules (DESIGN.md "Files", CASES.md):

* Characters XML 1.0 cannot carry become U+FFFD (E08), counted by kind in the
  writer's stats: control characters ``\\x00-\\x08``, ``\\x0b``, ``\\x0c``,
  ``\\x0e-\\x1f`` (``replaced_control_chars``), the non-characters U+FFFE and U+FFFF
  (``replaced_noncharacters``) and lone surrogates (``replaced_surrogates``), and in
  total (``replaced_chars``); the header row counts too. TAB, LF and CR are kept (CR
  written as ``&#13;`` so XML parsers do not turn it into LF), and so are DEL and the
  C1 controls (``\\x7f-\\x9f``), which XML 1.0 allows.
* Text longer than 32,767 UTF-16 code units is cut to at most 32,767 units without
  splitting a surrogate pair, counted in ``truncated_cells`` (E10).
* XML escaping of ``& < >`` (and CR, above).
* Literal ``_xHHHH_`` sequences are written as ``_x005F_xHHHH_`` because Excel decodes
  ``_xHHHH_`` escapes in cell text (ECMA-376 ST_Xstring). openpyxl does not decode
  them in inline strings, so it reads such text back with the ``_x005F_`` prefix.
* Quote prefix (E07): text starting with ``= + - @`` or their full-width forms
  ``＝ ＋ － ＠`` gets the ``quotePrefix`` style, so Excel never re-evaluates it on
  edit (the cell is never a ``<f>`` formula anyway).
* Whitespace: text that starts or ends with a space character (``str.isspace``) gets
  ``xml:space="preserve"``, as Excel and openpyxl write it.

The writer's fast path checks a whole column at once with :data:`SPECIAL_RE`,
:data:`SAFE_CHARS` and :data:`PLAIN_FIRST_EXCLUDED` and writes plain text as is; the
other texts go through :func:`excel_text`, :func:`escape_text` and
:func:`clean_text_cell`.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import escape as _xml_escape

from export_center.writers.base import WriterStats
from export_center.writers.xlsx_parts import STYLE_QUOTED

__all__ = [
    "ILLEGAL_RE",
    "MAX_CELL_UTF16_UNITS",
    "PLAIN_FIRST_EXCLUDED",
    "SAFE_CHARS",
    "SPACES",
    "SPECIAL_RE",
    "clean_text_cell",
    "count_replaced",
    "escape_text",
    "excel_text",
]

MAX_CELL_UTF16_UNITS = 32_767
"""Longest cell text Excel accepts, in UTF-16 code units (E10)."""

SAFE_CHARS = MAX_CELL_UTF16_UNITS // 2
"""A str of at most this many code points is at most 32,766 UTF-16 units long."""

_QUOTE_START = frozenset("=+-@\uff1d\uff0b\uff0d\uff20")
"""First characters that get the ``quotePrefix`` style (E07)."""

SPACES = frozenset(chr(code) for code in range(0x3001) if chr(code).isspace())
"""Whitespace characters (``str.isspace``); all of them are below U+3001."""

PLAIN_FIRST_EXCLUDED = _QUOTE_START | SPACES
"""A text whose first character is none of these and whose last character is not a
space needs neither ``quotePrefix`` nor ``xml:space="preserve"``."""

ILLEGAL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 cannot carry; replaced with U+FFFD (E08)."""

_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_NONCHARACTER_RE = re.compile("[\ufffe\uffff]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
"""The three kinds of ``ILLEGAL_RE``: control characters, non-characters U+FFFE and
U+FFFF, lone surrogates."""

SPECIAL_RE = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Anything that needs escaping or replacing; text without it is written as is."""

_EXCEL_ESCAPE_RE = re.compile("_(?=x[0-9A-Fa-f]{4}_)")
"""The ``_`` of a literal ``_xHHHH_`` that Excel would otherwise decode."""

_XML_ENTITIES = {"\r": "&#13;"}

_QUOTED_ATTRIBUTE = f' s="{STYLE_QUOTED}"'


def _truncate_utf16(text: str) -> str:
    """Cut text to at most 32,767 UTF-16 units, never inside a surrogate pair (E10)."""
    units = text.encode("utf-16-le", "surrogatepass")
    if len(units) <= 2 * MAX_CELL_UTF16_UNITS:
        return text
    cut = units[: 2 * MAX_CELL_UTF16_UNITS]
    if 0xD8 <= cut[-1] <= 0xDB:  # last unit is a high surrogate: drop the half pair
        cut = cut[:-2]
    return cut.decode("utf-16-le", "surrogatepass")


def excel_text(text: str) -> tuple[str, int, bool]:
    """Make text safe for a cell: replace illegal characters, cut to Excel's limit.

    Args:
        text: any Python string.

    Returns:
        ``(safe_text, replaced, truncated)``: the text with XML-illegal characters
        replaced by U+FFFD (E08) and cut to 32,767 UTF-16 units (E10), the number of
        replaced characters, and whether it was cut. Not yet XML-escaped.
    """
    replaced = 0
    if ILLEGAL_RE.search(text) is not None:
        text, replaced = ILLEGAL_RE.subn("\ufffd", text)
    truncated = False
    if len(text) > SAFE_CHARS:
        cut = _truncate_utf16(text)
        truncated = cut is not text
        text = cut
    return text, replaced, truncated


def count_replaced(original: str, stats: WriterStats) -> None:
    """Count by kind the characters ``excel_text`` replaces in ``original`` (E08).

    Args:
        original: a text before ``excel_text``.
        stats: the writer's running stats; ``replaced_control_chars``,
            ``replaced_noncharacters`` and ``replaced_surrogates`` grow by the
            characters of each kind (together exactly those of ``ILLEGAL_RE``).
    """
    stats.replaced_control_chars += len(_CONTROL_RE.findall(original))
    stats.replaced_noncharacters += len(_NONCHARACTER_RE.findall(original))
    stats.replaced_surrogates += len(_SURROGATE_RE.findall(original))


def escape_text(text: str) -> str:
    """XML-escape element text (``& < >``, CR) and protect literal ``_xHHHH_``."""
    text = _xml_escape(text, _XML_ENTITIES)
    if "_x" in text:
        text = _EXCEL_ESCAPE_RE.sub("_x005F_", text)
    return text


def clean_text_cell(text: str, ref: str, escaped: str | None = None, style: int = 0) -> str:
    """An inline-string cell for a non-empty text without illegal characters.

    Adds ``xml:space="preserve"`` when the text starts or ends with whitespace, as
    Excel and openpyxl do, and a style: ``style`` when given, else ``quotePrefix``
    (``s="2"``) when the text starts like a formula (E07), else none.

    Args:
        text: the cell text, not escaped (decides style and space handling).
        ref: the cell reference (``C12``).
        escaped: the XML-escaped text, or None when ``text`` needs no escaping.
        style: a style index for the cell (the header's), or 0 for the rule above.

    Returns:
        The ``<c>`` element.
    """
    if style:
        attr = f' s="{style}"'
    elif text[0] in _QUOTE_START:
        attr = _QUOTED_ATTRIBUTE
    else:
        attr = ""
    space = ' xml:space="preserve"' if text[0] in SPACES or text[-1] in SPACES else ""
    body = text if escaped is None else escaped
    return f'<c r="{ref}"{attr} t="inlineStr"><is><t{space}>{body}</t></is></c>'
