"""CSV options (issue 23 item 3): encoding, delimiter, header row and line ending, read
back with Python's ``csv`` module for every combination, GB18030 against Python's codec,
and sharded parts equal to the single writer for every combination."""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.filespec import DELIMITERS, ENCODINGS, LINE_ENDINGS, CsvOptions
from export_center.writers import (
    CsvPartWriter,
    CsvWriter,
    WriterStats,
    assemble_csv,
    csv_head,
    csv_stats,
    formats,
    open_writer,
)
from export_center.writers.csv import BOM

COLUMNS = [
    Column("id", "Id", ColumnType.INTEGER),
    Column("name", "名称", ColumnType.STRING),
    Column("amount", "Amount", ColumnType.DECIMAL),
    Column("day", "Day", ColumnType.DATE),
    Column("at", "At", ColumnType.DATETIME),
    Column("ok", "Ok", ColumnType.BOOLEAN),
]
#: Text that needs quoting under some delimiter, line breaks, formulas and Chinese.
NAMES = [
    "plain",
    "a,b",
    "a;b",
    "a\tb",
    "a|b",
    'say "hi"',
    "two\nlines",
    "bare\rcr",
    "crlf\r\nin",
    "=1+1",
    "+1",
    "\t=cmd",
    "张三",
    "",
    None,
]
ROWS = [
    {
        "id": i,
        "name": name,
        "amount": Decimal(f"{i}.{i:02d}"),
        "day": dt.date(2024, 3, 1 + i),
        "at": dt.datetime(2024, 3, 1, i, 0, 0, tzinfo=dt.UTC),
        "ok": i % 2 == 0,
    }
    for i, name in enumerate(NAMES)
]
COMBINATIONS = list(itertools.product(ENCODINGS, DELIMITERS, (True, False), LINE_ENDINGS))


def _write(options: CsvOptions, rows: list[dict[str, Any]] = ROWS, **kw: Any) -> bytes:
    out = io.BytesIO()
    writer = open_writer("csv", out, COLUMNS, csv=options, **kw)
    writer.write_rows(rows)
    stats = writer.close()
    assert stats.bytes == len(out.getvalue()) and stats.rows == len(rows)
    return out.getvalue()


def _text(data: bytes, options: CsvOptions) -> str:
    if options.encoding == "utf-8-bom":
        assert data.startswith(BOM) and data.count(BOM) == 1
        return data[len(BOM) :].decode("utf-8")
    assert not data.startswith(BOM)
    return data.decode("gb18030" if options.encoding == "gb18030" else "utf-8")


def _expected_cells(row: dict[str, Any]) -> list[str]:
    name = row["name"]
    if name is None:
        name = ""
    elif name and name[0] in "=+-@\t\r\n":
        name = "'" + name
    return [
        str(row["id"]),
        name,
        str(row["amount"]),
        row["day"].isoformat(),
        row["at"].strftime("%Y-%m-%d %H:%M:%S"),
        "true" if row["ok"] else "false",
    ]


@pytest.mark.parametrize(
    "encoding,delimiter,header,line_ending",
    COMBINATIONS,
    ids=["-".join(map(repr, c)) for c in COMBINATIONS],
)
def test_every_combination_reads_back_with_the_csv_module(
    encoding: str, delimiter: str, header: bool, line_ending: str
) -> None:
    options = CsvOptions(encoding, delimiter, header, line_ending)
    data = _write(options)
    text = _text(data, options)
    records = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    expected = [_expected_cells(row) for row in ROWS]
    if header:
        expected.insert(0, [c.title for c in COLUMNS])
    assert records == expected
    # Records end with the chosen terminator; line breaks inside quoted cells stay as
    # the value has them ("two\nlines", "bare\rcr", "crlf\r\nin").
    end = options.newline
    assert text.endswith(end)
    assert text.count(end) == len(expected) + (1 if end == "\r\n" else 2)
    if end == "\n":
        assert text.count("\r\n") == 1  # only the one inside "crlf\r\nin"
    # A field is quoted exactly when it holds the delimiter, a quote, CR or LF.
    for cell in ("a,b", "a;b", "a\tb", "a|b"):
        quoted = f'"{cell}"' in text
        assert quoted == (delimiter in cell), (cell, delimiter)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_bytes_are_the_codecs_bytes_of_the_text(encoding: str) -> None:
    options = CsvOptions(encoding=encoding)
    data = _write(options)
    utf8 = _write(CsvOptions())  # the default: BOM + UTF-8
    text = utf8[len(BOM) :].decode("utf-8")
    codec = "gb18030" if encoding == "gb18030" else "utf-8"
    head = BOM if encoding == "utf-8-bom" else b""
    assert data == head + text.encode(codec)


#: GB18030's four-byte range: beyond the BMP (U+10000, an emoji, CJK Extension B) and
#: BMP code points GBK lacks (U+E5E5 is two bytes, A3A0), plus U+FFFD itself.
FOUR_BYTE = ["\U00010000", "\U0001f600", "\U00020000", "\U0002a6d6", "\u20ac", "\ue5e5"]


def test_gb18030_holds_all_of_unicode_and_a_lone_surrogate_becomes_ufffd() -> None:
    options = CsvOptions(encoding="gb18030", header=False)
    columns = [Column("t", "T")]
    out = io.BytesIO()
    writer = CsvWriter(out, columns, options=options)
    writer.write_columns([["".join(FOUR_BYTE), "x\ud800y", "\udfff"]])
    stats = writer.close()
    data = out.getvalue()
    expected = "".join(FOUR_BYTE) + "\r\nx\ufffdy\r\n\ufffd\r\n"
    assert data == expected.encode("gb18030")
    assert data.decode("gb18030") == expected
    assert "\U0001f600".encode("gb18030") == b"\x94\x39\xfc\x36"  # four bytes
    assert data.count(b"\x84\x31\xa4\x37") == 2  # U+FFFD in GB18030
    assert stats.replaced_surrogates == stats.replaced_chars == 2
    assert writer.content_type == "text/csv; charset=gb18030"


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_without_header_a_utf8_bom_file_still_starts_with_the_bom(encoding: str) -> None:
    options = CsvOptions(encoding=encoding, header=False)
    assert csv_head(COLUMNS, options=options) == (BOM if encoding == "utf-8-bom" else b"")
    out = io.BytesIO()
    stats = CsvWriter(out, COLUMNS, options=options).close()
    assert out.getvalue() == csv_head(COLUMNS, options=options)
    assert stats.rows == 0 and stats.sheets == 1


@pytest.mark.parametrize("delimiter", DELIMITERS)
def test_formula_guard_holds_for_every_delimiter(delimiter: str) -> None:
    options = CsvOptions(delimiter=delimiter, header=False)
    columns = [Column("a", "A"), Column("b", "B")]
    risky = ["=1+1", "@SUM(1)", "\uff1d1", " =1", f"x{delimiter}=1"]
    out = io.BytesIO()
    writer = CsvWriter(out, columns, options=options)
    writer.write_columns([risky, ["-2", "+3", "ok", "\t", "\r=1"]])
    writer.close()
    text = out.getvalue()[len(BOM) :].decode("utf-8")
    got = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    assert [row[0] for row in got] == ["'=1+1", "'@SUM(1)", "'\uff1d1", "' =1", f"x{delimiter}=1"]
    assert [row[1] for row in got] == ["'-2", "'+3", "ok", "'\t", "'\r=1"]


def test_the_default_is_todays_bytes() -> None:
    assert _write(CsvOptions()) == _write(CsvOptions("utf-8-bom", ",", True, "crlf"))
    out = io.BytesIO()
    writer = CsvWriter(out, COLUMNS)  # no options at all
    writer.write_rows(ROWS)
    writer.close()
    assert out.getvalue() == _write(CsvOptions())
    assert out.getvalue().startswith(BOM + "Id,名称,Amount,Day,At,Ok\r\n".encode())


@pytest.mark.parametrize(
    "options",
    [
        CsvOptions(encoding="latin-1"),
        CsvOptions(delimiter=":"),
        CsvOptions(line_ending="cr"),
    ],
)
def test_an_option_outside_its_enum_is_refused(options: CsvOptions) -> None:
    with pytest.raises(ValueError, match="unknown CSV"):
        CsvWriter(io.BytesIO(), COLUMNS, options=options)


@pytest.mark.parametrize(
    "encoding,delimiter,header,line_ending",
    COMBINATIONS,
    ids=["-".join(map(repr, c)) for c in COMBINATIONS],
)
def test_parts_assemble_into_the_single_writers_file_for_every_combination(
    encoding: str, delimiter: str, header: bool, line_ending: str
) -> None:
    options = CsvOptions(encoding, delimiter, header, line_ending)
    rows = [dict(r, name=(r["name"] or "") + "\ud800") for r in ROWS]  # counts surrogates
    single = io.BytesIO()
    writer = CsvWriter(single, COLUMNS, options=options)
    writer.write_rows(rows)
    single_stats = writer.close()
    parts, stats = [], []
    entry = formats.FORMATS["csv"]
    for piece in (rows[:4], rows[4:9], rows[9:]):
        out = io.BytesIO()
        part = entry.open_part(out, COLUMNS, time_zone="UTC", resume_from=None, csv=options)
        part.write_rows(piece)
        stats.append(part.checkpoint())
        parts.append(out.getvalue())
    part_stats = WriterStats.total(stats)
    assert csv_head(COLUMNS, options=options) + b"".join(parts) == single.getvalue()
    out = io.BytesIO()
    assembled = entry.assemble(
        out, COLUMNS, [[p] for p in parts], part_stats=part_stats, max_bytes=None, csv=options
    )
    assert out.getvalue() == single.getvalue()
    assert assembled == single_stats == csv_stats(COLUMNS, part_stats, options=options)
    assert assembled.replaced_surrogates == len(rows)
    with pytest.raises(FileTooLarge):
        assemble_csv(
            io.BytesIO(),
            COLUMNS,
            [[p] for p in parts],
            part_stats=part_stats,
            max_bytes=len(single.getvalue()) - 1,
            options=options,
        )


def test_a_resumed_part_continues_with_the_options() -> None:
    options = CsvOptions("gb18030", "|", False, "lf")
    first, second = io.BytesIO(), io.BytesIO()
    part = CsvPartWriter(first, COLUMNS, options=options)
    part.write_rows(ROWS[:5])
    checkpoint = WriterStats.from_dict(part.checkpoint().to_dict())
    again = CsvPartWriter(second, COLUMNS, options=options, resume_from=checkpoint)
    again.write_rows(ROWS[5:])
    total = again.checkpoint()
    data = csv_head(COLUMNS, options=options) + first.getvalue() + second.getvalue()
    assert data == _write(options)
    assert total.rows == len(ROWS) and total.bytes == len(first.getvalue() + second.getvalue())


_cells = st.text(alphabet=st.sampled_from(list(',;\t|"\r\nab=+-@ 张\U0001f600\u00a0')), max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(_cells, _cells), min_size=1, max_size=6),
    encoding=st.sampled_from(ENCODINGS),
    delimiter=st.sampled_from(DELIMITERS),
    line_ending=st.sampled_from(LINE_ENDINGS),
)
def test_any_text_comes_back_as_written_but_guarded(
    rows: list[tuple[str, str]], encoding: str, delimiter: str, line_ending: str
) -> None:
    options = CsvOptions(encoding, delimiter, True, line_ending)
    columns = [Column("a", "A"), Column("b", "B")]
    out = io.BytesIO()
    writer = CsvWriter(out, columns, options=options)
    writer.write_columns([[r[0] for r in rows], [r[1] for r in rows]])
    writer.close()
    text = _text(out.getvalue(), options)
    got = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    from export_center.writers.csv import needs_formula_guard

    expected = [["A", "B"]] + [
        ["'" + c if needs_formula_guard(c) else c for c in row] for row in rows
    ]
    assert got == expected
