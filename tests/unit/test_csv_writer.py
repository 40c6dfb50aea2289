"""Streaming CSV writer (export_center.writers.csv): CASES E01-E15 for CSV."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pytest

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.values import coerce
from export_center.writers import CsvWriter, ExportWriter, WriterStats, open_writer
from export_center.writers.csv import needs_formula_guard
from tests.unit.writer_helpers import FORMULA_LIKE, cols, write_file

BOM = b"\xef\xbb\xbf"


def write_csv(
    columns: list[Column],
    batches: Sequence[Sequence[Mapping[str, Any]]],
    **options: Any,
) -> tuple[bytes, WriterStats]:
    return write_file("csv", columns, batches, **options)


def records(data: bytes) -> list[list[str]]:
    assert data.startswith(BOM)
    return list(csv.reader(io.StringIO(data[3:].decode("utf-8"), newline="")))


def test_writer_satisfies_the_protocol() -> None:
    writer = open_writer("CSV", io.BytesIO(), cols("a"))
    assert isinstance(writer, CsvWriter)
    assert isinstance(writer, ExportWriter)
    assert writer.extension == "csv"
    assert writer.content_type.startswith("text/csv")


def test_e01_one_bom_for_three_batches() -> None:
    # CASES E01: provider page_size=1, three pages of Chinese text.
    columns = cols(("id", ColumnType.INTEGER), "name", "city")
    pages = [
        [{"id": 1, "name": "张三", "city": "北京"}],
        [{"id": 2, "name": "李四", "city": "上海"}],
        [{"id": 3, "name": "王五", "city": "深圳"}],
    ]
    data, stats = write_csv(columns, pages)
    assert data[0:3] == b"\xef\xbb\xbf"
    assert data.count(b"\xef\xbb\xbf") == 1
    assert data[3:].decode("utf-8") == (
        "id,name,city\r\n1,张三,北京\r\n2,李四,上海\r\n3,王五,深圳\r\n"
    )
    assert stats.rows == 3
    assert stats.sheets == 1
    assert stats.bytes == len(data)


def test_e02_embedded_newline_cr_quote_and_comma() -> None:
    # CASES E02: one row of string columns.
    columns = cols("id", "name", "note", "addr")
    row = {"id": "2", "name": 'O"Brien, Jr.', "note": "line1\nline2", "addr": "a\rb"}
    data, _ = write_csv(columns, [[row]])
    assert data[3:] == b'id,name,note,addr\r\n2,"O""Brien, Jr.","line1\nline2","a\rb"\r\n'
    parsed = records(data)
    assert len(parsed) == 2
    assert parsed[1] == ["2", 'O"Brien, Jr.', "line1\nline2", "a\rb"]


def test_e03_leading_zeros_are_kept_verbatim() -> None:
    # CASES E03 (CSV): no sanitizer quote, no tab, no ="..." trick, no ".0".
    columns = cols("order_no", "phone", ("qty", ColumnType.INTEGER))
    data, _ = write_csv(columns, [[{"order_no": "000123", "phone": "0730907665", "qty": 7}]])
    assert data[3:] == b"order_no,phone,qty\r\n000123,0730907665,7\r\n"


def test_e04_big_integers_are_exact_bytes() -> None:
    # CASES E04 (CSV): raw provider JSON with unquoted 16-18 digit integers.
    import json

    raw = json.loads('{"order_id":9912140633506421,"big":568883383628111872,"n":999999999999999}')
    columns = cols(
        ("order_id", ColumnType.INTEGER), ("big", ColumnType.INTEGER), ("n", ColumnType.INTEGER)
    )
    row = {c.key: coerce(raw[c.key], c.type) for c in columns}
    data, _ = write_csv(columns, [[row]])
    assert data.endswith(b"\r\n9912140633506421,568883383628111872,999999999999999\r\n")
    assert b"E+" not in data and b"e+" not in data and b"420" not in data


E06_REMARKS = FORMULA_LIKE
DANGEROUS_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def test_e06_formula_prefixes_get_a_quote_and_numbers_do_not() -> None:
    # CASES E06: 13 remark rows, plus amount=-5.00 (typed decimal) and remark2="plain".
    columns = cols("remark", ("amount", ColumnType.DECIMAL), "remark2")
    rows = [
        {"remark": text, "amount": Decimal("-5.00"), "remark2": "plain"} for text in E06_REMARKS
    ]
    data, _ = write_csv(columns, [rows])
    parsed = records(data)[1:]
    assert len(parsed) == 13
    for index, (remark, amount, remark2) in enumerate(parsed):
        original = E06_REMARKS[index]
        if index < 11:
            assert remark == "'" + original
        else:
            assert remark == original  # quoted by RFC 4180: stays in one cell
        assert amount == "-5.00"
        assert remark2 == "plain"
    # Grep check: no parsed field begins with a formula character.
    for record in parsed:
        for field in record:
            if field == "-5.00":
                continue
            assert not field.startswith(DANGEROUS_START), field


@pytest.mark.parametrize(
    "text",
    [
        "\u3000=1",
        "\u2003+1",
        "  \t -1",
        "\u200b=1",
        "\uff0b1",
        "\uff0d1",
        "\uff201",
        "\u00a0\u00a0@x",
    ],
)
def test_e06_other_blank_and_full_width_bypasses(text: str) -> None:
    assert needs_formula_guard(text)
    data, _ = write_csv(cols("t"), [[{"t": text}]])
    assert records(data)[1] == ["'" + text]


@pytest.mark.parametrize("text", ["plain", " plain", "a=1", "1-2", "", "   ", "'=already"])
def test_e06_harmless_text_is_untouched(text: str) -> None:
    assert not needs_formula_guard(text)


def test_e06_typed_numbers_are_never_prefixed() -> None:
    columns = cols(("i", ColumnType.INTEGER), ("d", ColumnType.DECIMAL))
    data, _ = write_csv(columns, [[{"i": -5, "d": Decimal("-0.5")}]])
    assert data.endswith(b"\r\n-5,-0.5\r\n")


def test_e08_control_characters_are_kept_verbatim() -> None:
    # CASES E08 (CSV policy): bytes kept verbatim.
    remarks = ["kr 400\u0016000", "bell\u0007°", "vt\u000bx", "nul\u0000x", "tab\tlf\ncr\r"]
    columns = cols(("id", ColumnType.INTEGER), "remark")
    rows = [{"id": i, "remark": text} for i, text in enumerate(remarks, start=1)]
    data, stats = write_csv(columns, [rows])
    parsed = records(data)[1:]
    assert [r[1] for r in parsed] == [
        "kr 400\u0016000",
        "bell\u0007°",
        "vt\u000bx",
        "nul\u0000x",
        "tab\tlf\ncr\r",
    ]
    assert b"kr 400\x16000" in data
    assert stats.replaced_chars == 0


def test_lone_surrogates_become_replacement_characters() -> None:
    data, stats = write_csv(cols("t"), [[{"t": "a\ud800b"}], [{"t": "\udfff"}]])
    assert records(data)[1:] == [["a\ufffdb"], ["\ufffd"]]
    assert stats.replaced_chars == 2


def test_e10_csv_cells_are_not_truncated() -> None:
    columns = cols(("id", ColumnType.INTEGER), "body")
    rows = [{"id": 1, "body": "x" * 40000}, {"id": 2, "body": "😀" * 20000}]
    data, stats = write_csv(columns, [rows])
    parsed = records(data)
    assert parsed[1][1] == "x" * 40000
    assert parsed[2][1] == "😀" * 20000
    assert stats.truncated_cells == 0


def test_e13_datetimes_are_wall_time_in_the_export_zone() -> None:
    # CASES E13: tz=Asia/Shanghai; "+08:00", "Z", naive (UTC by contract).
    values = ["2024-03-01T12:00:00+08:00", "2024-03-01T04:00:00Z", "2024-03-01T12:00:00"]
    columns = cols(("at", ColumnType.DATETIME))
    rows = [{"at": coerce(v, ColumnType.DATETIME)} for v in values]
    data, _ = write_csv(columns, [rows], time_zone="Asia/Shanghai")
    assert [r[0] for r in records(data)[1:]] == [
        "2024-03-01 12:00:00",
        "2024-03-01 12:00:00",
        "2024-03-01 20:00:00",
    ]


def test_e15_nan_and_infinity_never_reach_the_file() -> None:
    # values.coerce rejects them; a writer handed them anyway writes empty cells.
    columns = cols(("id", ColumnType.INTEGER), ("v", ColumnType.DECIMAL))
    rows = [
        {"id": 1, "v": Decimal("NaN")},
        {"id": 2, "v": Decimal("Infinity")},
        {"id": 3, "v": float("inf")},
        {"id": 4, "v": float("nan")},
    ]
    data, stats = write_csv(columns, [rows])
    assert [r[1] for r in records(data)[1:]] == ["", "", "", ""]
    lowered = data.lower()
    assert b"nan" not in lowered and b"inf" not in lowered
    assert stats.invalid_numbers == 4


def test_value_formats() -> None:
    columns = cols(
        "s",
        ("i", ColumnType.INTEGER),
        ("d", ColumnType.DECIMAL),
        ("b", ColumnType.BOOLEAN),
        ("day", ColumnType.DATE),
        ("at", ColumnType.DATETIME),
    )
    rows = [
        {
            "s": "x",
            "i": 12,
            "d": Decimal("0.00000001"),  # str() would give 1E-8
            "b": True,
            "day": dt.date(2024, 3, 1),
            "at": dt.datetime(2024, 3, 1, 1, 2, 3, 4500, tzinfo=dt.UTC),
        },
        {
            "s": None,
            "i": None,
            "d": Decimal("1E+3"),
            "b": False,
            "day": dt.date(1, 1, 1),
            "at": dt.datetime(2024, 3, 1, 1, 2, 3),
        },
        {"ignored": "extra key"},
    ]
    data, stats = write_csv(columns, [rows])
    assert records(data)[1:] == [
        ["x", "12", "0.00000001", "true", "2024-03-01", "2024-03-01 01:02:03.004500"],
        ["", "", "1000", "false", "0001-01-01", "2024-03-01 01:02:03"],
        ["", "", "", "", "", ""],
    ]
    assert stats.rows == 3


def test_header_uses_titles() -> None:
    columns = [Column("o_orderkey", "Order key", ColumnType.INTEGER), Column("c", "=Title")]
    data, _ = write_csv(columns, [[{"o_orderkey": 1, "c": "v"}]])
    assert records(data)[0] == ["Order key", "'=Title"]  # titles are guarded too (E06)


def test_file_size_cap_is_enforced_while_writing() -> None:
    out = io.BytesIO()
    writer = open_writer("csv", out, cols(("id", ColumnType.INTEGER), "text"), max_bytes=100_000)
    batches_written = 0
    with pytest.raises(FileTooLarge) as caught:
        for batch_no in range(1_000):
            writer.write_rows([{"id": i, "text": "some text " * 5} for i in range(100)])
            batches_written = batch_no + 1
    assert batches_written < 1_000  # raised while writing, not at the end
    assert len(out.getvalue()) <= 100_000
    assert "0.0953674 MB" in str(caught.value)  # 100,000 bytes in MiB, as the settings count
    with pytest.raises(ValueError):
        writer.write_rows([{"id": 1}])


def test_close_is_idempotent_and_leaves_the_stream_open() -> None:
    out = io.BytesIO()
    writer = open_writer("csv", out, cols("a"))
    writer.write_rows([{"a": "x"}])
    first = writer.close()
    assert writer.close() == first
    out.write(b"more")  # still open
    with pytest.raises(ValueError):
        writer.write_rows([{"a": "y"}])


def test_unknown_format_and_empty_columns() -> None:
    with pytest.raises(ValueError):
        open_writer("pdf", io.BytesIO(), cols("a"))
    with pytest.raises(ValueError):
        open_writer("csv", io.BytesIO(), [])
