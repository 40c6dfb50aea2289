"""Fast paths of the writers (issue #6) write the same bytes as the general rules.

* CSV: the column-wise rendering and ``join`` assembly equal the ``csv`` module's
  ``QUOTE_MINIMAL`` output of the same fields, for any mix of values.
* XLSX: a ``DecimalText`` is written exactly like the equal ``Decimal``; worksheets
  deflated with ISA-L (when installed) read back like zlib's.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import zipfile
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from export_center.values import DecimalText, make_converters
from export_center.writers import open_writer
from export_center.writers import xlsx as xlsx_module
from export_center.writers.csv import needs_formula_guard

COLUMNS = [
    Column("s", "s", ColumnType.STRING),
    Column("i", "i", ColumnType.INTEGER),
    Column("d", "d", ColumnType.DECIMAL),
    Column("day", "day", ColumnType.DATE),
    Column("b", "b", ColumnType.BOOLEAN),
]


def reference_field(value: Any, kind: ColumnType) -> str:
    """The CSV field text by the documented rules (before quoting)."""
    if value is None:
        return ""
    if isinstance(value, DecimalText):
        return str(value)
    if isinstance(value, str):
        text = str(value)
        return "'" + text if kind is ColumnType.STRING and needs_formula_guard(text) else text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.date):
        return value.isoformat()
    raise AssertionError(value)


def reference_csv(columns: list[Column], batches: list[list[dict[str, Any]]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow([reference_field(c.title, ColumnType.STRING) for c in columns])
    for batch in batches:
        for row in batch:
            writer.writerow([reference_field(row.get(c.key), c.type) for c in columns])
    return b"\xef\xbb\xbf" + _replace_surrogates(out.getvalue()).encode("utf-8")


def _replace_surrogates(text: str) -> str:
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def write(fmt: str, columns: list[Column], batches: list[list[dict[str, Any]]]) -> bytes:
    out = io.BytesIO()
    writer = open_writer(fmt, out, columns)
    for batch in batches:
        writer.write_rows(batch)
    writer.close()
    return out.getvalue()


TEXT = st.text(
    alphabet=st.sampled_from(
        list("ab,\"'\r\n =+-@\t ") + ["\u3000", "\u200b", "é", "\ud800", "中"]
    ),
    max_size=6,
)
VALUES = {
    "s": st.one_of(TEXT, st.none(), st.integers(-5, 5), st.booleans()),
    "i": st.one_of(st.integers(-(10**20), 10**20), st.none(), st.booleans()),
    "d": st.one_of(
        st.decimals(
            allow_nan=False, allow_infinity=False, places=2, min_value=-(10**6), max_value=10**6
        ),
        st.decimals(
            allow_nan=False, allow_infinity=False, places=2, min_value=-(10**6), max_value=10**6
        ).map(lambda d: DecimalText(format(d, "f"))),
        st.none(),
    ),
    "day": st.one_of(st.dates(), st.none()),
    "b": st.one_of(st.booleans(), st.none()),
}


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.fixed_dictionaries({}, optional=VALUES), max_size=12),
    st.lists(
        st.fixed_dictionaries({k: v.filter(lambda x: x is not None) for k, v in VALUES.items()}),
        max_size=12,
    ),
)
def test_property_csv_equals_the_csv_module(
    mixed: list[dict[str, Any]], full: list[dict[str, Any]]
) -> None:
    batches = [mixed, full, full[:3] + mixed[:3]]
    assert write("csv", COLUMNS, batches) == reference_csv(COLUMNS, batches)


@pytest.mark.parametrize("values", [[""], [None], ["", "x"], ["a,b"], [None, "", '"']])
def test_csv_single_column_empty_fields_are_quoted_like_the_csv_module(values: list[Any]) -> None:
    columns = [Column("s", "s", ColumnType.STRING)]
    batches = [[{"s": v} for v in values]]
    assert write("csv", columns, batches) == reference_csv(columns, batches)


def test_csv_homogeneous_orders_like_batch_equals_the_csv_module() -> None:
    columns = [
        Column("k", "Order key", ColumnType.INTEGER),
        Column("p", "Total price", ColumnType.DECIMAL),
        Column("d", "Order date", ColumnType.DATE),
        Column("c", "Comment", ColumnType.STRING),
    ]
    convert = make_converters(columns)
    raw = [
        {
            "k": i,
            "p": f"{i * 7}.{i % 100:02d}",
            "d": f"199{i % 10}-0{1 + i % 9}-1{i % 10}",
            "c": ["plain", "with, comma", 'a "quote"', "-lead", " =x", "\u3000@y"][i % 6],
        }
        for i in range(1, 200)
    ]
    rows = [{c.key: conv(r[c.key]) for c, conv in zip(columns, convert, strict=True)} for r in raw]
    assert type(rows[0]["p"]) is DecimalText
    assert write("csv", columns, [rows[:100], rows[100:]]) == reference_csv(columns, [rows])


def sheet_xml(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read("xl/worksheets/sheet1.xml").decode()


def test_xlsx_decimal_text_is_written_like_decimal() -> None:
    columns = [Column("d", "d", ColumnType.DECIMAL), Column("s", "s", ColumnType.STRING)]
    texts = [
        "182210.40",
        "-5.00",
        "0",
        "0.00000001",
        "12345678901234.5",
        "123456789012345678",
        "1234567890.123456789",
        "99999999999999999999.999999999999999999",
    ]
    as_text = [{"d": DecimalText(t), "s": DecimalText(t)} for t in texts]
    as_decimal = [{"d": Decimal(t), "s": Decimal(t)} for t in texts]
    assert sheet_xml(write("xlsx", columns, [as_text])) == sheet_xml(
        write("xlsx", columns, [as_decimal])
    )
    xml = sheet_xml(write("xlsx", columns, [as_text[:2]]))
    assert '<c r="A2" s="7"><v>182210.40</v></c>' in xml  # scale 2 -> style 5 + 2
    mixed = [
        {"d": DecimalText("1.5")},
        {"d": None},
        {"d": Decimal("2.25")},
        {"d": DecimalText("3")},
    ]
    mixed_xml = sheet_xml(write("xlsx", columns, [mixed]))
    assert (
        '<c r="A2" s="6"><v>1.5</v></c>' in mixed_xml
        and '<c r="A4" s="7"><v>2.25</v></c>' in mixed_xml
    )
    assert '<c r="A5" s="5"><v>3</v></c>' in mixed_xml


def test_xlsx_decimal_text_over_15_digits_is_text() -> None:
    xml = sheet_xml(
        write(
            "xlsx",
            [Column("d", "d", ColumnType.DECIMAL)],
            [[{"d": DecimalText("1234567890.1234567")}]],
        )
    )
    assert '<c r="A2" t="inlineStr"><is><t>1234567890.1234567</t></is></c>' in xml


@pytest.mark.skipif(xlsx_module._isal_zlib is None, reason="isal is not installed")
def test_xlsx_isal_and_zlib_write_the_same_sheet(monkeypatch: pytest.MonkeyPatch) -> None:
    columns = [Column("s", "s", ColumnType.STRING), Column("i", "i", ColumnType.INTEGER)]
    batches = [[{"s": f"text {i} " * (i % 7), "i": i} for i in range(3_000)]]
    fast = write("xlsx", columns, batches)
    monkeypatch.setattr(xlsx_module, "_isal_zlib", None)
    slow = write("xlsx", columns, batches)
    assert sheet_xml(fast) == sheet_xml(slow)
    with zipfile.ZipFile(io.BytesIO(fast)) as archive:
        assert archive.testzip() is None  # CRCs match


def test_dates_past_the_writers_cache_bound_are_written_right() -> None:
    from openpyxl.utils.datetime import to_excel

    from export_center.writers.base import DATE_CACHE_SIZE

    columns = [Column("day", "day", ColumnType.DATE)]
    days = [dt.date(1900, 1, 1) + dt.timedelta(days=n) for n in range(DATE_CACHE_SIZE + 50)]
    days += days[:30] + days[-30:]  # remembered days, then days computed past the bound
    batches = [[{"day": d} for d in days[i : i + 5_000]] for i in range(0, len(days), 5_000)]
    lines = write("csv", columns, batches).decode("utf-8-sig").split("\r\n")
    assert lines == ["day", *(d.isoformat() for d in days), ""]
    serials = re.findall(
        r'<c r="A\d+" s="3"><v>(\d+)</v></c>', sheet_xml(write("xlsx", columns, batches))
    )
    assert serials == [str(int(to_excel(d))) for d in days]
