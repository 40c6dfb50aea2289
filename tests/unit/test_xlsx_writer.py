"""Streaming XLSX writer (export_center.writers.xlsx): CASES E03-E15 read back with
openpyxl (``load_workbook(read_only=False)``) and by grepping the sheet XML."""

from __future__ import annotations

import datetime as dt
import gc
import io
import json
import re
import struct
import zipfile
from decimal import Decimal
from typing import Any

import pytest

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.values import coerce
from export_center.writers import ExportWriter, XlsxWriter, open_writer
from export_center.writers.xlsx import column_letter
from tests.unit.writer_helpers import (
    cols,
    frozen_package_time,
    sheet_xml,
    utf16_units,
    workbook,
    write_xlsx,
)

XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ROW_RE = re.compile(rb'<row r="(\d+)"')


def test_writer_satisfies_the_protocol() -> None:
    writer = open_writer("XLSX", io.BytesIO(), cols("a"))
    assert isinstance(writer, XlsxWriter)
    assert isinstance(writer, ExportWriter)
    assert writer.extension == "xlsx"
    assert writer.content_type == XLSX_TYPE
    writer.close()


def test_e03_numeric_looking_strings_stay_text() -> None:
    # CASES E03: schema order_no:string, phone:string, qty:integer.
    columns = cols("order_no", "phone", ("qty", ColumnType.INTEGER))
    data, _ = write_xlsx(columns, [[{"order_no": "000123", "phone": "0730907665", "qty": 7}]])
    ws = workbook(data).active
    assert (ws["A2"].value, ws["A2"].data_type) == ("000123", "s")
    assert (ws["B2"].value, ws["B2"].data_type) == ("0730907665", "s")
    assert (ws["C2"].value, ws["C2"].data_type) == (7, "n")
    xml = sheet_xml(data)["xl/worksheets/sheet1.xml"]
    assert b'<c r="A2" t="inlineStr"><is><t>000123</t></is></c>' in xml
    assert b'<c r="C2"><v>7</v></c>' in xml


def test_e04_more_than_15_digits_become_text() -> None:
    # CASES E04: raw provider JSON with unquoted integers, all declared INTEGER.
    raw = json.loads('{"order_id":9912140633506421,"big":568883383628111872,"n":999999999999999}')
    columns = cols(
        ("order_id", ColumnType.INTEGER), ("big", ColumnType.INTEGER), ("n", ColumnType.INTEGER)
    )
    row = {c.key: coerce(raw[c.key], c.type) for c in columns}
    data, _ = write_xlsx(columns, [[row]])
    ws = workbook(data).active
    assert (ws["A2"].value, ws["A2"].data_type) == ("9912140633506421", "s")
    assert (ws["B2"].value, ws["B2"].data_type) == ("568883383628111872", "s")
    assert (ws["C2"].value, ws["C2"].data_type) == (999999999999999, "n")
    xml = sheet_xml(data)["xl/worksheets/sheet1.xml"]
    assert b"<v>9912140633506420</v>" not in xml
    assert b"E+" not in xml and b"e+" not in xml


def test_e04_decimals_with_more_than_15_significant_digits_become_text() -> None:
    columns = cols(("a", ColumnType.DECIMAL), ("b", ColumnType.DECIMAL), ("c", ColumnType.DECIMAL))
    row = {
        "a": Decimal("1234567890123.4567"),  # 17 significant digits
        "b": Decimal("12345678901234.50"),  # 15 significant digits (trailing zero)
        "c": Decimal("-0.0000000001234567890123456"),  # 16 significant digits
    }
    data, _ = write_xlsx(columns, [[row]])
    ws = workbook(data).active
    assert (ws["A2"].value, ws["A2"].data_type) == ("1234567890123.4567", "s")
    assert ws["B2"].data_type == "n"
    assert ws["B2"].value == pytest.approx(12345678901234.5, rel=1e-15)
    assert ws["B2"].number_format == "#,##0.00"
    assert (ws["C2"].value, ws["C2"].data_type) == ("-0.0000000001234567890123456", "s")


E07_TEXTS = [
    "=1+1",
    "=cmd|' /C calc'!A0",
    '=HYPERLINK("http://example.invalid/x","click")',
    "@SUM(1,1)",
]


def test_e07_formula_text_stays_text() -> None:
    # CASES E07: openpyxl would write these as <f> formulas.
    data, _ = write_xlsx(cols("text"), [[{"text": t} for t in E07_TEXTS]])
    xml = b"".join(sheet_xml(data).values())
    assert b"<f>" not in xml and b"<f " not in xml
    ws = workbook(data).active
    for row, text in enumerate(E07_TEXTS, start=2):
        cell = ws.cell(row=row, column=1)
        assert cell.value == text
        assert cell.data_type == "s"
        assert cell.quotePrefix  # Excel never re-evaluates it on edit
    for row in range(2, 6):
        assert f'<c r="A{row}" s="2" t="inlineStr">'.encode() in xml


def test_e07_other_leading_characters_get_quote_prefix_too() -> None:
    texts = ["+1+1", "-1+1", "\uff1d1+1", "plain"]
    data, _ = write_xlsx(cols("t"), [[{"t": t} for t in texts]])
    ws = workbook(data).active
    assert [ws.cell(row=r, column=1).quotePrefix for r in range(2, 6)] == [True, True, True, False]
    assert [ws.cell(row=r, column=1).value for r in range(2, 6)] == texts


def test_e08_illegal_control_characters_are_replaced() -> None:
    # CASES E08: one \x16 must not abort the export.
    remarks = ["kr 400\u0016000", "bell\u0007°", "vt\u000bx", "nul\u0000x", "tab\tlf\ncr\r"]
    columns = cols(("id", ColumnType.INTEGER), "remark")
    rows = [{"id": i, "remark": text} for i, text in enumerate(remarks, start=1)]
    data, stats = write_xlsx(columns, [rows])
    ws = workbook(data).active
    assert ws["B2"].value == "kr 400\ufffd000"
    assert ws["B3"].value == "bell\ufffd°"
    assert ws["B4"].value == "vt\ufffdx"
    assert ws["B5"].value == "nul\ufffdx"
    assert ws["B6"].value == "tab\tlf\ncr\r"  # CR kept as &#13;
    assert stats.replaced_chars == 4


def test_e08_non_characters_and_lone_surrogates_are_replaced() -> None:
    texts = ["a\ufffeb", "\uffff", "x\ud800y", "\udc00", "ok\x7f\x85"]
    data, stats = write_xlsx(cols("t"), [[{"t": t} for t in texts]])
    ws = workbook(data).active
    assert [ws.cell(row=r, column=1).value for r in range(2, 7)] == [
        "a\ufffdb",
        "\ufffd",
        "x\ufffdy",
        "\ufffd",
        "ok\x7f\x85",
    ]
    assert stats.replaced_chars == 4


def test_e10_long_text_is_cut_to_32767_utf16_units() -> None:
    # CASES E10: "x"*40000 and 20000 emoji (40000 UTF-16 units).
    columns = cols(("id", ColumnType.INTEGER), "body")
    rows = [{"id": 1, "body": "x" * 40000}, {"id": 2, "body": "😀" * 20000}]
    data, stats = write_xlsx(columns, [rows])
    ws = workbook(data).active
    assert ws["B2"].value == "x" * 32767
    emoji = ws["B3"].value
    assert utf16_units(emoji) <= 32767
    assert emoji == "😀" * 16383  # no half surrogate pair at the end
    assert stats.truncated_cells == 2


def test_e10_text_at_the_limit_is_not_cut() -> None:
    rows = [{"t": "y" * 32767}, {"t": "a" + "😀" * 16383}]
    data, stats = write_xlsx(cols("t"), [rows])
    ws = workbook(data).active
    assert ws["A2"].value == "y" * 32767
    assert ws["A3"].value == "a" + "😀" * 16383
    assert stats.truncated_cells == 0


def test_e12_rows_split_into_sheets_with_repeated_header() -> None:
    # CASES E12 (policy A, split) scaled down: 5 data rows per sheet, 12 rows.
    limit = 5
    columns = cols(("id", ColumnType.INTEGER))
    ids = list(range(1, 13))
    batches = [
        [{"id": i} for i in ids[:3]],
        [{"id": i} for i in ids[3:7]],
        [{"id": i} for i in ids[7:]],
    ]
    data, stats = write_xlsx(columns, batches, sheet_row_limit=limit)
    assert stats.sheets == 3
    assert stats.rows == 12
    xml = sheet_xml(data)
    assert sorted(xml) == [f"xl/worksheets/sheet{i}.xml" for i in (1, 2, 3)]
    for part in xml.values():
        numbers = [int(n) for n in ROW_RE.findall(part)]
        assert numbers == list(range(1, len(numbers) + 1))
        assert max(numbers) <= limit + 1
    wb = workbook(data)
    assert wb.sheetnames == ["Sheet1", "Sheet2", "Sheet3"]
    seen = []
    for ws in wb.worksheets:
        values = [row[0] for row in ws.iter_rows(values_only=True)]
        assert values[0] == "id"  # header repeated on every sheet
        assert len(values) - 1 <= limit
        seen.extend(values[1:])
    assert seen == ids  # contiguous, none twice


def test_the_file_does_not_depend_on_the_batches() -> None:
    # Rows reach the compressor in 1,000-row chunks counted per sheet whatever the
    # batches (ISA-L's deflate output depends on how its input is cut).
    columns = cols("s", ("i", ColumnType.INTEGER))
    rows = [{"s": f"text {i} " * (i % 17), "i": i} for i in range(7_500)]
    cuts = [
        [1_000] * 8,
        [1] * 300 + [2_345, 999, 1_001],
        [7_500],
        [3, 997, 1_000, 1_500, 2_499],
    ]
    files = []
    with frozen_package_time():
        for sizes in cuts:
            starts = [sum(sizes[:k]) for k in range(len(sizes))] + [sum(sizes)]
            batches = [rows[a:b] for a, b in zip(starts, starts[1:], strict=False)]
            batches.append(rows[starts[-1] :])
            files.append(write_xlsx(columns, batches, sheet_row_limit=2_999)[0])
    assert len(set(files)) == 1
    last_sheet = sheet_xml(files[0])["xl/worksheets/sheet3.xml"]
    assert ROW_RE.findall(last_sheet)[-1] == b"1503"  # 7,500 - 2 x 2,999 rows, + header


def test_e12_default_limit_is_excel_maximum() -> None:
    with pytest.raises(ValueError):
        XlsxWriter(io.BytesIO(), cols("a"), sheet_row_limit=1_048_576)
    with pytest.raises(ValueError):
        XlsxWriter(io.BytesIO(), cols("a"), sheet_row_limit=0)


def test_e13_aware_datetimes_become_export_zone_wall_time() -> None:
    # CASES E13: tz=Asia/Shanghai; "+08:00", "Z", naive (UTC by contract).
    values = ["2024-03-01T12:00:00+08:00", "2024-03-01T04:00:00Z", "2024-03-01T12:00:00"]
    columns = cols(("at", ColumnType.DATETIME))
    rows = [{"at": coerce(v, ColumnType.DATETIME)} for v in values]
    data, _ = write_xlsx(columns, [rows], time_zone="Asia/Shanghai")
    ws = workbook(data).active
    for ref in ("A2", "A3"):
        assert ws[ref].value == dt.datetime(2024, 3, 1, 12, 0, 0)
        assert ws[ref].data_type == "d"
        assert ws[ref].is_date
        assert "yyyy" in ws[ref].number_format
    assert ws["A4"].value == dt.datetime(2024, 3, 1, 20, 0, 0)


def test_e15_nan_and_infinity_are_empty_cells() -> None:
    # CASES E15: {"v":NaN}, {"v":Infinity}, {"v":1e400} reach the writer unchecked.
    raw = json.loads('[{"id":1,"v":NaN},{"id":2,"v":Infinity},{"id":3,"v":1e400}]')
    columns = cols(("id", ColumnType.INTEGER), ("v", ColumnType.DECIMAL))
    rows = raw + [{"id": 4, "v": Decimal("NaN")}, {"id": 5, "v": Decimal("-Infinity")}]
    data, stats = write_xlsx(columns, [rows])
    assert stats.invalid_numbers == 5
    xml = sheet_xml(data)["xl/worksheets/sheet1.xml"]
    for value in re.findall(rb"<v>([^<]*)</v>", xml):
        assert b"nan" not in value.lower() and b"inf" not in value.lower()
    ws = workbook(data).active
    assert [ws.cell(row=r, column=2).value for r in range(2, 7)] == [None] * 5


def test_typed_cells_and_formats() -> None:
    columns = cols(
        ("i", ColumnType.INTEGER),
        ("d", ColumnType.DECIMAL),
        ("b", ColumnType.BOOLEAN),
        ("day", ColumnType.DATE),
        ("at", ColumnType.DATETIME),
        "s",
    )
    rows = [
        {
            "i": -42,
            "d": Decimal("182210.40"),
            "b": True,
            "day": dt.date(1996, 1, 2),
            "at": dt.datetime(2024, 1, 31, 23, 59, 59, 999600),
            "s": "  padded  ",
        },
        {
            "i": None,
            "d": Decimal("0.00000001"),
            "b": False,
            "day": dt.date(1900, 2, 28),  # serial 59 (Excel's fake 1900-02-29 is 60)
            "at": dt.datetime(1899, 12, 31, 0, 0),  # before 1900-01-01: ISO text
            "s": "",
        },
        {"d": Decimal("5"), "unknown": "ignored"},
    ]
    data, stats = write_xlsx(columns, [rows])
    ws = workbook(data).active
    assert ws["A2"].value == -42
    assert ws["B2"].value == pytest.approx(182210.40)
    assert ws["B2"].number_format == "#,##0.00"
    assert ws["C2"].value is True and ws["C2"].data_type == "b"
    assert ws["D2"].value == dt.datetime(1996, 1, 2)
    assert ws["D2"].is_date and ws["D2"].number_format == "yyyy-mm-dd"
    # Milliseconds are Excel's precision: 23:59:59.9996 is truncated, not rounded
    # into the next day (compare CASES E20).
    assert ws["E2"].value == dt.datetime(2024, 1, 31, 23, 59, 59, 999000)
    assert ws["E2"].number_format == "yyyy-mm-dd hh:mm:ss"
    assert ws["F2"].value == "  padded  "
    assert ws["A3"].value is None
    assert ws["B3"].value == pytest.approx(1e-8)
    assert ws["B3"].number_format == "#,##0.00000000"
    assert ws["C3"].value is False
    assert (ws["D3"].value, ws["D3"].data_type) == (dt.datetime(1900, 2, 28), "d")
    assert (ws["E3"].value, ws["E3"].data_type) == ("1899-12-31 00:00:00", "s")
    assert ws["F3"].value is None  # empty string: empty cell
    assert ws["B4"].value == 5 and ws["B4"].number_format == "#,##0"
    assert stats.rows == 3


def test_sheet_layout_frozen_header_widths_and_bold_titles() -> None:
    columns = [
        Column("k", "Order key", ColumnType.INTEGER, width=11),
        Column("n", "Name & <co>", ColumnType.STRING, width=400),
        Column("d", "Date", ColumnType.DATE),
        Column("=x", "=Title", ColumnType.STRING),
    ]
    data, _ = write_xlsx(columns, [[{"k": 1, "n": "x", "d": dt.date(2024, 1, 1), "=x": "v"}]])
    wb = workbook(data)
    ws = wb.active
    assert ws.title == "Sheet1"
    assert ws.freeze_panes == "A2"
    assert ws.column_dimensions["A"].width == 11
    assert ws.column_dimensions["B"].width == 255  # capped
    assert ws.column_dimensions["C"].width == 12  # default for dates
    assert [c.value for c in ws[1]] == ["Order key", "Name & <co>", "Date", "=Title"]
    assert all(c.font.b for c in ws[1])
    assert ws["D2"].value == "v"


def test_excel_escape_sequences_are_protected() -> None:
    # Excel decodes _xHHHH_ in cell text; a literal one is written as _x005F_xHHHH_.
    data, _ = write_xlsx(cols("t"), [[{"t": "a_x0041_b"}, {"t": "_x00zz_"}]])
    xml = sheet_xml(data)["xl/worksheets/sheet1.xml"]
    assert b"a_x005F_x0041_b" in xml
    assert b"<t>_x00zz_</t>" in xml


def test_zip_parts_and_no_zip64_by_default() -> None:
    data, _ = write_xlsx(cols("a"), [[{"a": "x"}]])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(archive.namelist())
    assert {
        "[Content_Types].xml",
        "_rels/.rels",
        "docProps/app.xml",
        "docProps/core.xml",
        "xl/workbook.xml",
        "xl/_rels/workbook.xml.rels",
        "xl/styles.xml",
        "xl/worksheets/sheet1.xml",
    } <= names
    # First local file header: version needed 2.0 and no extra field (no ZIP64).
    signature, version, _flags = struct.unpack("<IHH", data[:8])
    assert signature == 0x04034B50
    assert version == 20
    assert struct.unpack("<H", data[28:30])[0] == 0


def test_force_zip64_still_reads_back() -> None:
    out = io.BytesIO()
    writer = XlsxWriter(out, cols(("i", ColumnType.INTEGER)), force_zip64=True)
    writer.write_rows([{"i": n} for n in range(10)])
    writer.close()
    ws = workbook(out.getvalue()).active
    assert [r[0] for r in ws.iter_rows(min_row=2, values_only=True)] == list(range(10))


class ForwardOnly(io.RawIOBase):
    """A sink that cannot seek or tell, like an upload stream."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.buffer += bytes(data)
        return len(data)


def test_non_seekable_stream() -> None:
    sink = ForwardOnly()
    writer = open_writer("xlsx", sink, cols("a"))  # type: ignore[arg-type]
    writer.write_rows([{"a": "x"}])
    stats = writer.close()
    assert stats.bytes == len(sink.buffer)
    assert workbook(bytes(sink.buffer)).active["A2"].value == "x"


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_file_size_cap_is_enforced_while_writing() -> None:
    out = io.BytesIO()
    columns = cols(("id", ColumnType.INTEGER), "text", ("amount", ColumnType.DECIMAL))
    writer = open_writer("xlsx", out, columns, max_bytes=100_000)
    written = 0
    with pytest.raises(FileTooLarge) as caught:
        for batch_no in range(200):
            batch = [
                {
                    "id": batch_no * 1000 + i,
                    "text": f"row {batch_no}-{i} {hash((batch_no, i)):x}",
                    "amount": Decimal(i * 7919 % 100_003).scaleb(-2),
                }
                for i in range(1000)
            ]
            writer.write_rows(batch)
            written += len(batch)
    assert written < 200_000  # raised while writing, not at the end
    assert len(out.getvalue()) <= 100_000
    assert "MB" in str(caught.value)
    with pytest.raises(ValueError):
        writer.write_rows([{"id": 1}])
    with pytest.raises(ValueError):
        writer.close()
    del writer
    gc.collect()  # no "exception ignored" from ZIP finalizers of the failed writer


class NullSink(io.RawIOBase):
    """Counts and drops bytes (keeps the file out of the memory measurement)."""

    def __init__(self) -> None:
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.size += len(data)
        return len(data)


def test_e16_memory_is_bounded_by_one_batch() -> None:
    # CASES E16 scaled down: 20,000 rows in batches of 2,000, made one batch at a time.
    import tracemalloc

    columns = [
        Column("id", "Id", ColumnType.INTEGER),
        Column("name", "Name", ColumnType.STRING),
        Column("amount", "Amount", ColumnType.DECIMAL),
        Column("day", "Day", ColumnType.DATE),
        Column("at", "At", ColumnType.DATETIME),
        Column("note", "Note", ColumnType.STRING),
    ]

    def batch(number: int) -> list[dict[str, Any]]:
        return [
            {
                "id": number * 2_000 + i,
                "name": f"Customer#{number * 2_000 + i:09d}",
                "amount": Decimal(i * 7_919).scaleb(-2),
                "day": dt.date(1996, 1, 2) + dt.timedelta(days=i % 999),
                "at": dt.datetime(2024, 3, 1, 12, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
                "note": "nstructions sleep furiously among " * (1 + i % 3),
            }
            for i in range(2_000)
        ]

    sink = NullSink()
    tracemalloc.start()
    try:
        writer = open_writer("xlsx", sink, columns)  # type: ignore[arg-type]
        for number in range(10):
            writer.write_rows(batch(number))
        stats = writer.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stats.rows == 20_000
    assert sink.size > 1_000_000
    assert peak < 16_000_000  # about one batch of rows plus its XML, not the file


def test_close_is_idempotent_and_stats_count_bytes() -> None:
    out = io.BytesIO()
    writer = open_writer("xlsx", out, cols("a"))
    writer.write_rows([{"a": "x"}, {"a": "y"}])
    stats = writer.close()
    assert writer.close() == stats
    assert stats.bytes == len(out.getvalue())
    assert (stats.rows, stats.sheets) == (2, 1)
    out.write(b"")  # still open
    with pytest.raises(ValueError):
        writer.write_rows([{"a": "z"}])


def test_column_letters() -> None:
    assert [column_letter(i) for i in (1, 26, 27, 52, 53, 702, 703, 16384)] == [
        "A", "Z", "AA", "AZ", "BA", "ZZ", "AAA", "XFD",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        column_letter(16385)


# --- property test: every typed value reads back from openpyxl --------------------
