"""Printing values that come from outside to an operator's terminal.

Task names, user ids, provider error messages and audit reasons are written by users
and by other services. The rule: they are printed as text, exactly, never interpreted.
Rich would read ``[bold]`` or ``[/]`` in a plain string as markup (a closing tag without
an opening one is a ``MarkupError``), ``:smile:`` as an emoji code and ``[link=...]`` as
a hyperlink; a terminal would obey an escape sequence in a provider's message (colours,
a moved cursor, a rewritten title) and a carriage return would overwrite the line
before it. So every value goes through :func:`visible` (control characters and bidi
overrides become visible escapes such as ``\\x1b``; line breaks stay) and into a table
as a :class:`rich.text.Text` (:func:`cell`), which rich prints as it is. Emoji, Chinese
and every other printable character are printed unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import unicodedata
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["cell", "console", "plain", "print_json", "print_table", "visible"]

#: Characters that reorder the text around them on screen (trojan-source style); the
#: other format characters (zero-width joiner of emoji sequences...) are kept.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


_NAMED = {"\t": "\\t", "\r": "\\r"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: Any) -> str:
    """``value`` as text a terminal shows as it is.

    Args:
        value: anything; None is the empty string.

    Returns:
        ``str(value)`` with every control character except the line feed (C0, DEL,
        C1: ``\\x1b``, ``\\r``, ``\\t``...) and every bidi control written as a Python
        escape (``\\x1b``, ``\\u202e``); printable text, emoji and CJK unchanged.
    """
    if value is None:
        return ""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(
        _escape(c) if c != "\n" and (c in _BIDI or unicodedata.category(c) == "Cc") else c
        for c in text
    )


def cell(value: Any) -> Text:
    """A table cell holding ``value`` as plain text (no markup, emoji codes or
    highlighting), control characters made visible by :func:`visible`."""
    return Text(visible(value))


def console() -> Console:
    """The operator commands' console on stdout: as wide as the terminal (or
    ``COLUMNS``), and 200 columns when the output is neither; markup, emoji codes and
    highlighting off."""
    sized = sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(width=None if sized else 200, markup=False, emoji=False, highlight=False)


def print_table(out: Console, title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print ``rows`` under ``columns`` (an empty header row when every column name is
    empty), or ``title: (none)`` when there is no row; every cell is :func:`cell`."""
    if not rows:
        out.print(Text(f"{visible(title)}: (none)"))
        return
    table = Table(title=cell(title), title_justify="left", show_header=any(columns))
    for column in columns:
        table.add_column(cell(column), overflow="fold")
    for row in rows:
        table.add_row(*[cell(v) for v in row])
    out.print(table)


def plain(value: Any) -> Any:
    """JSON-able form of rows, dataclasses, datetimes (ISO 8601, naive ones as UTC) and
    enums (their value)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, Enum):
        return value.value
    return value


def print_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout; pydantic bodies (the admin API's)
    print as that API answers them. JSON escapes control characters itself."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
        value = [v.model_dump(mode="json") for v in value]
    typer.echo(json.dumps(plain(value), ensure_ascii=False, indent=2))
