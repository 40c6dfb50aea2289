"""What the operator commands print: values as text (control characters made visible,
markup never read), help that fits 80 columns without a type for a flag or a cut option
name, and doctor sentences wrapped between words."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from export_center.cli import app
from export_center.doctor import check_lines
from export_center.doctor_check import Check
from export_center.terminal import cell, print_table, visible


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain text", "plain text"),
        ("[bold]b[/] [/] [link=https://evil.example]x[/link] :smile:", None),
        ("九月订单 📦 👩\u200d💻 e\u0301", None),  # CJK, emoji, a ZWJ sequence, a combining mark
        ("two\nlines", "two\nlines"),  # a line break stays one
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("over\rwrite\ttab\x07\x00", "over\\rwrite\\ttab\\x07\\x00"),
        ("del\x7f c1\x85\x9b", "del\\x7f c1\\x85\\x9b"),  # DEL and C1 (NEL, CSI)
        ("a\u202eb\u2066c\u200fd", "a\\u202eb\\u2066c\\u200fd"),  # bidi overrides
        (None, ""),
        (42, "42"),
    ],
)
def test_visible_shows_every_value_and_obeys_none(value, shown):
    assert visible(value) == (value if shown is None else shown)


def test_a_table_prints_markup_as_text():
    out = io.StringIO()
    console = Console(file=out, width=200, markup=False, emoji=False, highlight=False)
    values = ["[bold]b[/]", "x [/] y", "[link=https://e.example]go[/link]", ":smile:", "\x1b[2J"]
    print_table(console, "title [/]", ["a [/]", "b"], [[v, v] for v in values])
    text = out.getvalue()
    assert "title [/]" in text and "a [/]" in text
    for value in values[:4]:
        assert text.count(value) == 2, value
    assert "\x1b" not in text and text.count("\\x1b[2J") == 2
    assert cell("[/]").plain == "[/]"


@pytest.mark.parametrize(
    "args",
    [
        ["token", "--help"],
        ["tasks", "list", "--help"],
        ["tasks", "retry", "--help"],
        ["outbox", "list", "--help"],
        ["dlq", "list", "--help"],
        ["doctor", "--help"],
        ["tasks", "show", "--help"],
        ["dlq", "show", "--help"],
        ["serve", "--help"],
    ],
    ids=" ".join,
)
def test_help_fits_80_columns_without_types_of_flags_or_cut_names(args):
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text and "…" not in text
    if args[0] != "serve":  # the operator commands and token name what each option takes
        options = [line for line in text.splitlines() if line.startswith("  -")]
        typed = [o for o in options if re.search(r"<(?![A-Z|]+>)[^=]*>", o.split("  [")[0])]
        assert options and not typed, typed  # a metavar, or the choices <PLATFORM|MERCHANT>
    assert max(len(line) for line in text.splitlines()) <= 80, text
    if args[0] == "token":
        assert "--download-all / --no-download-all" in text
    if args[:2] == ["tasks", "list"]:
        assert "--name TEXT" in text and "--state STATE" in text


@pytest.mark.parametrize("width", [60, 80, 120])
def test_a_doctor_sentence_wraps_between_words_under_its_column(width):
    message = (
        "no database at /home/someone/.local/share/export-center/export-center.db (the data "
        "directory /home/someone/.local/share/export-center does not exist); nothing was "
        "created. Point EXPORT_CENTER_DATA_DIR at the service's data directory"
    )
    lines = check_lines(Check("database", False, message), width)
    assert lines[0].startswith("FAIL database                 no database at")
    head = len("FAIL database                 ")
    for line in lines:
        assert len(line) <= width or " " not in line[head:], line
    assert all(line[:head].strip() == "" for line in lines[1:])
    assert " ".join(line[head:] for line in lines).split() == message.split()  # no word cut
    assert check_lines(Check("clock", True, "fine"), width) == [
        "ok   clock                    fine"
    ]
