"""Characters replaced with U+FFFD (CASES E08), counted by kind, and the task warning.

XLSX replaces what XML 1.0 cannot carry: C0 control characters other than TAB, LF and
CR, the non-characters U+FFFE and U+FFFF, and lone surrogates. CSV keeps control
characters and non-characters and replaces only lone surrogates (UTF-8 cannot encode
them). ``WriterStats`` counts each kind and keeps ``replaced_chars`` as the total; the
pipeline's warning names the kinds.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from openpyxl import load_workbook

from export_center.attempt.context import change_warning as _warning
from export_center.columns import Column, ColumnType
from export_center.writers import WriterStats
from tests.unit.writer_helpers import cols, write_columns_file, write_file

# (text, control characters, non-characters, lone surrogates) XLSX replaces in it
TEXTS: list[tuple[str, int, int, int]] = [
    ("kr 400\x16000", 1, 0, 0),
    ("\x00\x01\x08\x0b\x0c\x0e\x1f", 7, 0, 0),
    ("a\ufffeb", 0, 1, 0),
    ("\uffff\uffff", 0, 2, 0),
    ("x\ud800y", 0, 0, 1),
    ("\udfff", 0, 0, 1),
    ("\udc00\ud83d", 0, 0, 2),  # a low then a high surrogate: no pair
    ("\x07\ufffe\ud800\x1b\uffff\udbff", 2, 2, 2),
    # neighbours that stay: TAB LF CR, DEL, C1, U+FFFD, U+FFFD-adjacent and other
    # non-characters XML allows, a real surrogate pair (an emoji)
    ("tab\tlf\ncr\r", 0, 0, 0),
    ("\x7f\x80\x85\x9f", 0, 0, 0),
    ("\ufffd\ufffc\ufdd0\ufdef", 0, 0, 0),
    ("\U0001fffe\U0010ffff😀", 0, 0, 0),
]
XLSX_ILLEGAL = frozenset(
    [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
    + ["\ufffe", "\uffff"]
    + [chr(c) for c in range(0xD800, 0xE000)]
)


def xlsx_expected(text: str) -> str:
    return "".join("\ufffd" if ch in XLSX_ILLEGAL else ch for ch in text)


def csv_expected(text: str) -> str:
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def kinds(stats: WriterStats) -> tuple[int, int, int, int]:
    return (
        stats.replaced_control_chars,
        stats.replaced_noncharacters,
        stats.replaced_surrogates,
        stats.replaced_chars,
    )


@pytest.mark.parametrize(("text", "controls", "nonchars", "surrogates"), TEXTS)
def test_xlsx_counts_each_kind(text: str, controls: int, nonchars: int, surrogates: int) -> None:
    data, stats = write_file("xlsx", cols("t"), [[{"t": text}]])
    cell = load_workbook(io.BytesIO(data)).active["A2"]
    assert (cell.value, cell.data_type) == (xlsx_expected(text), "s")
    assert kinds(stats) == (controls, nonchars, surrogates, controls + nonchars + surrogates)


@pytest.mark.parametrize(("text", "controls", "nonchars", "surrogates"), TEXTS)
def test_csv_replaces_only_lone_surrogates(
    text: str, controls: int, nonchars: int, surrogates: int
) -> None:
    data, stats = write_file("csv", cols("t"), [[{"t": text}]])
    records = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert records[1] == [csv_expected(text)]
    assert kinds(stats) == (0, 0, surrogates, surrogates)


def test_counts_add_up_over_cells_batches_columns_and_the_header() -> None:
    columns = [
        Column("t", "title\x01\ud800", ColumnType.STRING),
        Column("i", "i", ColumnType.INTEGER),
    ]
    batches: list[list[list[Any]]] = [
        [[t for t, *_ in TEXTS], [None] * len(TEXTS)],
        [["\x02", "\ufffe"], ["\x03\uffff\udfff", None]],  # text in an INTEGER column too
    ]
    controls = sum(c for _, c, _, _ in TEXTS) + 1 + 1 + 1
    nonchars = sum(n for _, _, n, _ in TEXTS) + 1 + 1
    surrogates = sum(s for _, _, _, s in TEXTS) + 1 + 1
    data, stats = write_columns_file("xlsx", columns, batches)
    assert kinds(stats) == (controls, nonchars, surrogates, controls + nonchars + surrogates)
    ws = load_workbook(io.BytesIO(data)).active
    assert ws["A1"].value == "title\ufffd\ufffd"
    assert ws.cell(row=len(TEXTS) + 2, column=2).value == "\ufffd\ufffd\ufffd"
    assert _warning(stats) == (
        f"{controls} control character(s), {nonchars} non-character(s) (U+FFFE/U+FFFF) "
        f"and {surrogates} lone surrogate(s) replaced with U+FFFD"
    )
    data, stats = write_columns_file("csv", columns, batches)
    assert kinds(stats) == (0, 0, surrogates, surrogates)
    assert _warning(stats) == f"{surrogates} lone surrogate(s) replaced with U+FFFD"


def test_e08_four_control_characters_in_the_warning() -> None:
    # CASES E08: the XLSX export succeeds and says what was replaced.
    remarks = ["kr 400\u0016000", "bell\u0007°", "vt\u000bx", "nul\u0000x", "tab\tlf\ncr\r"]
    _, stats = write_file("xlsx", cols("remark"), [[{"remark": r} for r in remarks]])
    assert kinds(stats) == (4, 0, 0, 4)
    assert _warning(stats) == "4 control character(s) replaced with U+FFFD"


@pytest.mark.parametrize(
    ("counts", "sentence"),
    [
        ((3, 1, 2), "3 control character(s), 1 non-character(s) (U+FFFE/U+FFFF) and "
         "2 lone surrogate(s) replaced with U+FFFD"),
        ((4, 0, 0), "4 control character(s) replaced with U+FFFD"),
        ((0, 2, 0), "2 non-character(s) (U+FFFE/U+FFFF) replaced with U+FFFD"),
        ((0, 0, 1), "1 lone surrogate(s) replaced with U+FFFD"),
        ((1, 0, 1), "1 control character(s) and 1 lone surrogate(s) replaced with U+FFFD"),
        ((0, 5, 6), "5 non-character(s) (U+FFFE/U+FFFF) and 6 lone surrogate(s) replaced "
         "with U+FFFD"),
        ((1234, 0, 0), "1,234 control character(s) replaced with U+FFFD"),
    ],
)  # fmt: skip
def test_warning_names_each_kind(counts: tuple[int, int, int], sentence: str) -> None:
    controls, nonchars, surrogates = counts
    stats = WriterStats(
        rows=1,
        sheets=1,
        replaced_chars=sum(counts),
        replaced_control_chars=controls,
        replaced_noncharacters=nonchars,
        replaced_surrogates=surrogates,
    )
    assert _warning(stats) == sentence


def test_warning_with_other_changes_and_without_the_split() -> None:
    stats = WriterStats(
        rows=5, sheets=2, truncated_cells=2, replaced_chars=3, replaced_control_chars=3
    )
    assert _warning(stats) == (
        "2 cell(s) cut to Excel's 32,767-character limit; "
        "3 control character(s) replaced with U+FFFD; "
        "rows split over 2 sheets (1,048,575 rows per sheet)"
    )
    assert _warning(WriterStats(rows=1, sheets=1, replaced_chars=5)) == (
        "5 character(s) replaced with U+FFFD"  # a total without the kinds
    )
    assert _warning(WriterStats(rows=1, sheets=1)) is None
