"""Provider answers parsed without the network (export_center.provider_client): exact
numbers, cursors, Retry-After, BOOLEAN cells sent as 1/0. The same answers over real HTTP are in
tests/integration/test_provider_answers.py."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from typing import Any

import openpyxl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from export_center.attempt.batches import BatchConverter, InexactNumber
from export_center.columns import Column, ColumnType
from export_center.errors import ProviderContractError, ProviderRejected
from export_center.provider_client import Batch, ProviderClient, retry_after_seconds
from export_center.writers import open_writer
from tests.unit.writer_helpers import frozen_package_time

COLUMNS = [
    Column("amount", "amount", ColumnType.DECIMAL),
    Column("qty", "qty", ColumnType.INTEGER),
    Column("note", "note", ColumnType.STRING),
]
ROWS = (
    '[{"amount":0E-8,"qty":18446744073709551616,"note":18446744073709551616},'
    '{"amount":12345678901234567.89,"qty":1.0,"note":0.10},'
    '{"amount":-0.10,"qty":-0,"note":1.0E+2},'
    '{"amount":18446744073709551616,"qty":7,"note":"text"}]'
)


def answer(rows: str = ROWS, **fields: Any) -> bytes:
    head = '{"schemaHash":"h","snapshotToken":"s","hasMore":false,'
    extra = "".join(f'"{k}":{v},' for k, v in fields.items())
    return (head + extra + '"rows":' + rows + "}").encode()


def parse(raw: bytes, limit: int = 100) -> Batch:
    return ProviderClient(token="t")._parse(raw, limit)


def typed_columns(batch: Batch) -> list[list[Any]]:
    """What the pipeline does: the fast rows, or the exact rows when a float shows."""
    converter = BatchConverter(COLUMNS)
    try:
        return converter.columns_of(batch.rows, batch.arrays)
    except InexactNumber:
        return converter.columns_of(batch.exact_rows(), batch.arrays)


def test_orjson_rounds_these_numbers_and_the_exact_rows_do_not() -> None:
    batch = parse(answer())
    assert batch.rows[0]["qty"] == 1.8446744073709552e19  # what was written before
    assert batch.raw is not None
    exact = batch.exact_rows()
    assert exact[0] == {
        "amount": Decimal("0E-8"),
        "qty": 18446744073709551616,
        "note": 18446744073709551616,
    }
    assert str(exact[1]["amount"]) == "12345678901234567.89" and str(exact[2]["amount"]) == "-0.10"
    assert exact[2]["qty"] == 0 and type(exact[2]["qty"]) is int


def test_exact_values_reach_the_csv_file() -> None:
    out = io.BytesIO()
    writer = open_writer("csv", out, COLUMNS)
    writer.write_columns(typed_columns(parse(answer())))
    writer.close()
    records = list(csv.reader(io.StringIO(out.getvalue().decode("utf-8-sig"), newline="")))
    assert records[1:] == [
        ["0.00000000", "18446744073709551616", "18446744073709551616"],
        ["12345678901234567.89", "1", "0.10"],
        ["-0.10", "0", "100"],
        ["18446744073709551616", "7", "text"],
    ]


def test_exact_values_reach_the_xlsx_file() -> None:
    out = io.BytesIO()
    writer = open_writer("xlsx", out, COLUMNS)
    writer.write_columns(typed_columns(parse(answer())))
    writer.close()
    sheet = openpyxl.load_workbook(io.BytesIO(out.getvalue())).worksheets[0]
    amount = [sheet.cell(row=r, column=1) for r in range(2, 6)]
    assert (amount[0].value, amount[0].number_format) == (0, "#,##0.00000000")
    assert amount[1].value == "12345678901234567.89"  # 19 digits: text, never rounded
    assert (amount[2].value, amount[2].number_format) == (-0.1, "#,##0.00")
    assert amount[3].value == "18446744073709551616"
    assert [sheet.cell(row=r, column=2).value for r in range(2, 6)] == [
        "18446744073709551616",  # more than 15 digits: text
        1,
        0,
        7,
    ]
    assert [sheet.cell(row=r, column=3).value for r in range(2, 6)] == [
        "18446744073709551616",
        "0.10",
        "100",
        "text",
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"amount":"1","qty":1.5,"note":"x"}', "row 1, column qty: not an integer: 1.5"),
        (
            '{"amount":0.1234567890123456789012345678901234567890,"qty":1,"note":"x"}',
            "row 1, column amount: decimal has 40 digits, more than 38",
        ),
        ('{"amount":1e400,"qty":1,"note":"x"}', "row 1, column amount: decimal exponent out"),
        ('{"amount":"1","qty":1e400,"note":"x"}', "row 1, column qty: integer out of range"),
    ],
)
def test_numbers_that_do_not_fit_are_refused_naming_row_and_column(
    value: str, message: str
) -> None:
    from export_center.attempt.batches import InvalidRow

    with pytest.raises(InvalidRow) as caught:
        typed_columns(parse(answer("[" + value + "]")))
    got = f"row {caught.value.index + 1}, column {caught.value.column}: {caught.value.message}"
    assert got.startswith(message), got


def test_conforming_answers_keep_the_fast_path() -> None:
    batch = parse(answer('[{"amount":"1.50","qty":3,"note":"x"}]'))
    assert typed_columns(batch) == [["1.50"], [3], ["x"]]  # no InexactNumber, no re-decoding


def test_an_answer_orjson_refuses_is_read_exactly_at_once() -> None:
    batch = parse(answer('[{"amount":NaN,"qty":1,"note":1e400}]'))
    assert batch.raw is None  # already exact: nothing to decode again
    assert batch.rows[0]["note"] == Decimal("1E+400") and batch.exact_rows() is batch.rows


ARRAY_ROWS = (
    "[[0E-8,18446744073709551616,18446744073709551616],"
    "[12345678901234567.89,1.0,0.10],"
    "[-0.10,-0,1.0E+2],"
    '[18446744073709551616,7,"text"]]'
)


def test_array_rows_give_the_columns_of_the_same_object_rows() -> None:
    """``rowFormat: "array"``: the same exact values as the object rows, read in the
    order of the columns (the exact decoding included)."""
    arrays = parse(answer(ARRAY_ROWS, rowFormat='"array"'))
    objects = parse(answer(ROWS))
    assert arrays.arrays and not objects.arrays
    assert typed_columns(arrays) == typed_columns(objects)
    assert parse(answer(ROWS, rowFormat='"object"')).arrays is False
    assert parse(answer(ROWS, rowFormat="null")).arrays is False  # null: the default


@pytest.mark.parametrize("value", ['"arrays"', '"ARRAY"', "1", "true", '["array"]', "{}"])
def test_an_unknown_row_format_breaks_the_contract(value: str) -> None:
    with pytest.raises(ProviderContractError, match='rowFormat must be "object" or "array"'):
        parse(answer("[]", rowFormat=value))


@pytest.mark.parametrize(("cursor", "expected"), [('"abc"', "abc"), ("120400", "120400")])
def test_next_cursor_strings_and_integers(cursor: str, expected: str) -> None:
    assert parse(answer("[]", nextCursor=cursor)).next_cursor == expected


@pytest.mark.parametrize("cursor", ["12345678901234567.89", "true", "[1, 2]", '{"a": 1}'])
def test_next_cursor_of_another_type_breaks_the_contract(cursor: str) -> None:
    with pytest.raises(ProviderContractError, match="nextCursor must be a string"):
        parse(answer("[]", nextCursor=cursor))


NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("1", 1.0),
        (" 30 ", 30.0),
        ("0", 0.0),
        ("Fri, 02 Jan 2026 03:04:15 GMT", 10.0),  # HTTP-date, 10 s ahead
        ("Fri, 02 Jan 2026 03:00:00 GMT", 0.0),  # in the past: at once
        ("soon", None),
        ("-5", None),
        ("1.5", None),
        (None, None),
    ],
)
def test_retry_after_seconds_or_http_date(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header, NOW) == seconds


def test_a_redirect_names_a_printable_shortened_location() -> None:
    from export_center.provider_status import Answer, raise_if_permanent

    location = "http://elsewhere.example/\x01" + "a" * 300
    with pytest.raises(ProviderRejected) as caught:
        raise_if_permanent(Answer(307, b"", location, None), "T")
    assert caught.value.code == "PROVIDER_REDIRECTED"
    assert caught.value.message == (
        "provider redirected (307) to http://elsewhere.example/?" + "a" * 174 + "..."
    )


# --- BOOLEAN cells sent as 1/0 (MySQL TINYINT(1)) ---------------------------------------

FLAGS = [Column("id", "id", ColumnType.INTEGER), Column("paid", "paid", ColumnType.BOOLEAN)]


def flag_columns(rows: str, **fields: Any) -> list[list[Any]]:
    """The pipeline's conversion of an answer with ``FLAGS`` columns."""
    batch = parse(answer(rows, **fields))
    converter = BatchConverter(FLAGS)
    try:
        return converter.columns_of(batch.rows, batch.arrays)
    except InexactNumber:
        return converter.columns_of(batch.exact_rows(), batch.arrays)


@pytest.mark.parametrize("arrays", [False, True], ids=["objects", "arrays"])
def test_boolean_cells_may_be_1_and_0(arrays: bool) -> None:
    values = ["1", "0", "true", "false", "null", '"TRUE"']
    if arrays:
        rows = "[" + ",".join(f"[{i},{v}]" for i, v in enumerate(values)) + "]"
        typed = flag_columns(rows, rowFormat='"array"')
    else:
        rows = "[" + ",".join(f'{{"id":{i},"paid":{v}}}' for i, v in enumerate(values)) + "]"
        typed = flag_columns(rows)
    assert typed[1] == [True, False, True, False, None, True]
    assert [type(v) for v in typed[1]] == [bool, bool, bool, bool, type(None), bool]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("2", "2"),
        ("-1", "-1"),
        ("1.0", "1.0 (a number written with a fraction or an exponent)"),
        ("1e0", "1 (a number written with a fraction or an exponent)"),
        ("0.0", "0.0 (a number written with a fraction or an exponent)"),
        ('"1"', "'1'"),
        ('"0"', "'0'"),
        ('"yes"', "'yes'"),
        ("[1]", "[1]"),
    ],
)
@pytest.mark.parametrize("arrays", [False, True], ids=["objects", "arrays"])
def test_other_boolean_cells_are_refused_naming_row_and_column(
    value: str, got: str, arrays: bool
) -> None:
    from export_center.attempt.batches import InvalidRow

    if arrays:
        rows, fields = f"[[1,true],[2,1],[3,{value}]]", {"rowFormat": '"array"'}
    else:
        rows = f'[{{"id":1,"paid":true}},{{"id":2,"paid":1}},{{"id":3,"paid":{value}}}]'
        fields = {}
    with pytest.raises(InvalidRow) as caught:
        flag_columns(rows, **fields)
    assert (caught.value.index, caught.value.column) == (2, "paid")
    assert caught.value.message == f"expected a boolean (true, false, 1 or 0), got {got}"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.booleans()), min_size=1, max_size=30),
    st.sampled_from(["csv", "xlsx"]),
    st.booleans(),
)
def test_property_1_and_0_give_the_file_of_true_and_false(
    flags: list[bool | None], fmt: str, arrays: bool
) -> None:
    """The same flags sent as JSON true/false and as 1/0: byte-identical files."""

    def file_of(cells: list[str]) -> bytes:
        if arrays:
            rows = "[" + ",".join(f"[{i},{c}]" for i, c in enumerate(cells)) + "]"
            typed = flag_columns(rows, rowFormat='"array"')
        else:
            rows = "[" + ",".join(f'{{"id":{i},"paid":{c}}}' for i, c in enumerate(cells)) + "]"
            typed = flag_columns(rows)
        out = io.BytesIO()
        writer = open_writer(fmt, out, FLAGS)
        writer.write_columns(typed)
        writer.close()
        return out.getvalue()

    def json_of(flag: bool | None, numbers: bool) -> str:
        if flag is None:
            return "null"
        if numbers:
            return "1" if flag else "0"
        return "true" if flag else "false"

    with frozen_package_time():  # an XLSX package records when it was written
        words = file_of([json_of(f, False) for f in flags])
        assert file_of([json_of(f, True) for f in flags]) == words
    if fmt == "csv":
        records = list(csv.reader(io.StringIO(words.decode("utf-8-sig"), newline="")))
        expected = ["" if f is None else ("true" if f else "false") for f in flags]
        assert [r[1] for r in records[1:]] == expected
    else:
        sheet = openpyxl.load_workbook(io.BytesIO(words)).worksheets[0]
        assert [sheet.cell(row=r + 2, column=2).value for r in range(len(flags))] == flags
