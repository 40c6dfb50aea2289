"""The format table's readers (``writers.readers``): each reads its writer's file back
to the cells the file holds and the texts a user sees; a file cut inside a row is
``truncated``; and ``packaging.reading`` recounts through them."""

from __future__ import annotations

import codecs
import datetime as dt
import io
from decimal import Decimal
from typing import Any

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from export_center.columns import Column, ColumnType
from export_center.filespec import CsvOptions
from export_center.packaging.reading import recount, same_instant
from export_center.writers.formats import FORMATS
from export_center.writers.readers import TruncatedFile, UnreadableFile

ZONE = "Asia/Shanghai"
COLUMNS = [
    Column("id", "Id", ColumnType.INTEGER),
    Column("amount", "Amount", ColumnType.DECIMAL, precision=12, scale=2),
    Column("day", "Day", ColumnType.DATE),
    Column("at", "At", ColumnType.DATETIME),
    Column("paid", "Paid", ColumnType.BOOLEAN),
    Column("name", "Name", ColumnType.STRING),
]
AT = dt.datetime(2024, 3, 1, 0, 30, 0, 250_000, tzinfo=dt.UTC)  # 08:30:00.25 in Shanghai
ROWS = [
    [7, Decimal("3.10"), dt.date(2024, 2, 29), AT, True, 'a, "b"\nc'],
    [None, None, None, None, None, None],
]


def _write(name: str, rows: list[list[Any]], columns: list[Column] = COLUMNS, **kw: Any) -> bytes:
    out = io.BytesIO()
    writer = FORMATS[name].open_writer(out, columns, time_zone=ZONE, max_bytes=None, **kw)
    if rows:
        writer.write_columns([list(c) for c in zip(*rows, strict=True)])
    writer.close()
    return out.getvalue()


def _read(name: str, data: bytes, csv: CsvOptions = CsvOptions(), columns=COLUMNS) -> list[Any]:
    return list(FORMATS[name].reader.rows(data, columns, csv))


def _texts(name: str, data: bytes, csv: CsvOptions = CsvOptions()) -> list[list[str]]:
    reader = FORMATS[name].reader
    return [[reader.text(v) for v in row] for row in reader.rows(data, COLUMNS, csv)]


# --- what each reader gives ------------------------------------------------------------


def test_csv_cells_are_the_fields_in_every_encoding_and_delimiter() -> None:
    for options in (
        CsvOptions(),
        CsvOptions(encoding="gb18030", delimiter=";", line_ending="lf"),
        CsvOptions(encoding="utf-8", delimiter="\t", header=False),
    ):
        data = _write("csv", ROWS, csv=options)
        expected = [
            ["7", "3.10", "2024-02-29", "2024-03-01 08:30:00.250000", "true", 'a, "b"\nc'],
            [""] * 6,
        ]
        assert _read("csv", data, options) == expected, options
        assert _texts("csv", data, options) == expected


def test_xlsx_cells_are_typed_by_their_number_formats() -> None:
    data = _write("xlsx", ROWS)
    [first, empty] = _read("xlsx", data)
    assert first == [
        7,
        Decimal("3.10"),  # 3.1 in the file; its format shows two decimals
        dt.date(2024, 2, 29),  # a date format: a date, not midnight
        dt.datetime(2024, 3, 1, 8, 30, 0, 250_000),  # wall time, to the millisecond
        True,
        'a, "b"\nc',
    ]
    assert type(first[1]) is Decimal and str(first[1]) == "3.10"
    assert empty == [None] * 6  # a row of empty cells padded to the columns
    assert _texts("xlsx", data) == [
        ["7", "3.10", "2024-02-29", "2024-03-01 08:30:00.250000", "TRUE", 'a, "b"\nc'],
        [""] * 6,
    ]


def test_xlsx_digits_beyond_the_format_are_kept_and_every_sheet_is_read() -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["Id", "Amount"])
    sheet.append([1, 3.011])  # a user typed a third decimal into a 0.00 cell
    sheet["B2"].number_format = "#,##0.00"
    sheet.append([2])  # the amount left out: a short row
    second = book.create_sheet()
    second.append(["Id", "Amount"])
    second.append([3, 0.5])
    out = io.BytesIO()
    book.save(out)
    columns = COLUMNS[:2]
    assert _read("xlsx", out.getvalue(), columns=columns) == [
        [1, Decimal("3.011")],  # not rounded to what the cell shows
        [2, None],
        [3, Decimal("0.5")],  # General: the float's own digits
    ]
    # The writer's sheets: each sheet's header row left out.
    rows = [[i, Decimal(f"{i}.25")] for i in range(5)]
    data = _write("xlsx", rows, columns, sheet_row_limit=2)
    assert _read("xlsx", data, columns=columns) == rows


def test_jsonl_cells_are_json_values_picked_by_key() -> None:
    data = _write("jsonl", ROWS)
    assert _read("jsonl", data) == [
        [7, "3.10", "2024-02-29", "2024-03-01T08:30:00.250000+08:00", True, 'a, "b"\nc'],
        [None] * 6,
    ]
    assert _texts("jsonl", data) == [
        ["7", "3.10", "2024-02-29", "2024-03-01T08:30:00.250000+08:00", "true", 'a, "b"\nc'],
        [""] * 6,
    ]
    # Another tool's file: keys in another order, a float, a key left out.
    other = b'{"amount":3.10,"id":7}\n'
    assert _read("jsonl", other, columns=COLUMNS[:3]) == [[7, Decimal("3.10"), None]]


def test_jsonl_lines_split_at_lf_only() -> None:
    # A JSON string holds U+2028, U+2029, U+0085 and FS as themselves; str.splitlines()
    # would cut the row there.
    texts = ["line\u2028sep", "para\u2029sep", "next\u0085line", "fs\x1cchar", "vt\x0bchar"]
    columns = [Column("name", "Name", ColumnType.STRING)]
    data = _write("jsonl", [[t] for t in texts], columns)
    assert data.count(b"\n") == len(texts)
    assert _read("jsonl", data, columns=columns) == [[t] for t in texts]
    totals = recount(data, file_format="jsonl", columns=columns, options={}, time_zone=ZONE)
    assert totals.rows == len(texts)


def test_parquet_cells_are_pyarrows_values_in_batches() -> None:
    data = _write("parquet", ROWS)
    assert _read("parquet", data) == [ROWS[0][:3] + [AT, True, ROWS[0][5]], ROWS[1]]
    assert _texts("parquet", data)[0] == [
        "7",
        "3.10",
        "2024-02-29",
        "2024-03-01T08:30:00.250000+08:00",
        "true",
        'a, "b"\nc',
    ]
    columns = [Column("id", "Id", ColumnType.INTEGER)]
    many = _write("parquet", [[i] for i in range(25_000)], columns)
    assert _read("parquet", many, columns=columns) == [[i] for i in range(25_000)]
    with pytest.raises(UnreadableFile, match="no field 'colour' in the file"):
        _read("parquet", many, columns=[Column("colour", "Colour", ColumnType.STRING)])


# --- truncated files ---------------------------------------------------------------------


@pytest.mark.parametrize("line_ending", ["crlf", "lf"])
def test_a_csv_cut_inside_a_row_is_truncated(line_ending: str) -> None:
    options = CsvOptions(line_ending=line_ending)
    data = _write("csv", ROWS + [[8, Decimal("1"), None, None, False, "z"]], csv=options)
    ending = "CRLF" if line_ending == "crlf" else "LF"
    for cut in (len(data) - 1, len(data) - 3):  # in the line ending, in the last field
        with pytest.raises(
            TruncatedFile, match=f"^truncated: the last row does not end with {ending}$"
        ):
            _read("csv", data[:cut], options)
    # Cut right after the LF inside the quoted name: it ends with LF, inside quotes.
    inside = data[: data.index(b"\nc") + 1]
    with pytest.raises(TruncatedFile, match="^truncated: the file ends inside a quoted field$"):
        _read("csv", inside, options)
    # Cut at a row's end: a whole file with fewer rows, not truncated.
    assert len(_read("csv", data[: data.index(b"\n,,", 0) + 1], options)) == 1


def test_a_csv_without_rows_or_with_a_bad_encoding() -> None:
    assert _read("csv", b"") == []
    assert _read("csv", codecs.BOM_UTF8) == []  # the BOM, no header, no rows
    assert _read("csv", _write("csv", [])) == []  # the header only
    with pytest.raises(UnreadableFile, match="no CSV encoding 'latin-1'"):
        _read("csv", b"a\r\n", CsvOptions(encoding="latin-1"))


def test_a_jsonl_cut_inside_a_row_is_truncated_and_a_stranger_line_unreadable() -> None:
    data = _write("jsonl", ROWS)
    with pytest.raises(TruncatedFile, match="^truncated: the last row does not end with LF$"):
        _read("jsonl", data[:-2])
    assert len(_read("jsonl", data[: data.index(b"\n") + 1])) == 1  # one whole row
    with pytest.raises(UnreadableFile, match="line 2 is not a JSON object"):
        _read("jsonl", b'{"id":1}\n[1]\n')
    with pytest.raises(UnreadableFile, match="line 1 is not JSON"):
        _read("jsonl", b'{"id":\n')
    assert _read("jsonl", b"") == []


def test_recount_says_truncated_for_a_cut_gzip_and_a_cut_row() -> None:
    import gzip

    data = _write("jsonl", ROWS)
    args: dict[str, Any] = {"columns": COLUMNS, "options": {}, "time_zone": ZONE}
    packed = gzip.compress(data, mtime=0)
    assert recount(packed, file_format="jsonl", gzipped=True, **args).rows == 2
    with pytest.raises(TruncatedFile, match="the gzip stream ends before its end"):
        recount(packed[:-9], file_format="jsonl", gzipped=True, **args)
    with pytest.raises(TruncatedFile, match="the last row does not end with LF"):
        recount(data[:-1], file_format="jsonl", **args)
    csv_options = {"encoding": "gb18030", "delimiter": "|", "lineEnding": "lf"}
    cut = _write("csv", ROWS, csv=CsvOptions("gb18030", "|", True, "lf"))[:-1]
    with pytest.raises(TruncatedFile, match="the last row does not end with LF"):
        recount(cut, file_format="csv", columns=COLUMNS, options=csv_options, time_zone=ZONE)


def test_recount_reads_every_format_to_the_same_totals() -> None:
    rows = [[i, Decimal(f"{i}.{i % 100:02d}"), dt.date(2024, 1, 1) + dt.timedelta(days=i),
             AT + dt.timedelta(seconds=i), i % 2 == 0, f"n{i}"] for i in range(50)]  # fmt: skip
    found = {}
    for name in FORMATS:
        data = _write(name, rows)
        totals = recount(data, file_format=name, columns=COLUMNS, options={}, time_zone=ZONE)
        found[name] = totals.as_json()
    assert found["csv"]["rowCount"] == 50
    assert found["csv"]["columns"]["amount"]["sum"] == str(sum(r[1] for r in rows))
    assert found["xlsx"] == found["csv"] == found["jsonl"] == found["parquet"]


def test_same_instant_compares_to_the_formats_step() -> None:
    # The XLSX writer keeps the milliseconds (.250999 -> .250); the reader's float
    # serial gives them back within a fraction of a millisecond, here just below.
    manifest = "2024-03-01T08:30:00.250999+08:00"
    xlsx = "2024-03-01T08:30:00.249999+08:00"
    assert same_instant(manifest, xlsx, step_us=1_000)
    assert not same_instant(manifest, xlsx)
    assert not same_instant(manifest, "2024-03-01T08:30:00.251000+08:00", step_us=1_000)
    assert same_instant("2024-03-01", "2024-03-01", step_us=1_000)
    assert not same_instant("2024-03-01", None)


def test_a_parquet_file_by_another_tool_is_read_by_title() -> None:
    table = pa.table({"Id": [1, 2]})  # a field named by the title, not the key
    out = io.BytesIO()
    pq.write_table(table, out)
    columns = [Column("id", "Id", ColumnType.INTEGER)]
    assert _read("parquet", out.getvalue(), columns=columns) == [[1], [2]]
