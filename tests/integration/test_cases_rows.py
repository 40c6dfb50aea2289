"""../shared/cases/CASES.md end to end, the shapes of rows: pages without rows, rows
as arrays, declared and undeclared keys, exact JSON numbers and boolean cells."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from tests.support.cases_pipeline import page, run, sheet_xml, xlsx_cells
from tests.support.helpers import read_csv


def empty_pages(count: int, first: int = 0, columns: bool = True) -> list[str]:
    """``count`` pages without rows that say hasMore; page ``i`` sends cursor ``i + 1``."""
    return [
        page(
            [],
            columns=[("id", "INTEGER")] if columns and i == first else None,
            more=True,
            cursor=str(i + 1),
        )
        for i in range(first, first + count)
    ]


def test_empty_pages_that_keep_saying_has_more_end_the_export_at_100(case_stack, cases):
    # Before: 14,000-26,000 calls a minute until the 30-minute deadline, then again per
    # attempt. Now 100 calls, and no other attempt although the type allows three.
    registry = case_stack.runtime.registry
    registry.types["CASES"] = dataclasses.replace(registry.types["CASES"], max_attempts=3)
    cases.pages = empty_pages(150)
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["attempts"] == 1, detail
    assert detail["error"] == {
        "code": "PROVIDER_CONTRACT",
        "message": "fetch: batch 100 (cursor 99): provider broke the contract: 100 empty pages "
        "in a row said hasMore (last nextCursor '100')",
    }
    assert len(cases.requests) == 100
    assert list(case_stack.runtime.storage.list()) == []


@pytest.mark.parametrize("count", [3, 99])
def test_fewer_than_100_empty_pages_in_a_row_are_followed(case_stack, cases, count):
    """Empty pages before rows, between rows and at the end: the export follows them
    (a provider may filter rows after reading them), and every row is written once."""
    cases.pages = [
        *empty_pages(count),  # pages 0 .. count - 1
        page([{"id": 1}, {"id": 2}], more=True, cursor=str(count + 1)),
        *empty_pages(count, first=count + 1, columns=False),
        page([{"id": 3}], more=True, cursor=str(2 * count + 2)),
        page([]),  # the last page: no rows, no hasMore
    ]
    detail, data = run(case_stack, "csv")
    assert detail["state"] == "succeeded", detail
    assert read_csv(data) == [["id"], ["1"], ["2"], ["3"]]
    assert len(cases.requests) == len(cases.pages) == 2 * count + 3


MIXED = [("id", "INTEGER"), ("name", "STRING"), ("amount", "DECIMAL"), ("day", "DATE")]
MIXED_ROWS = [
    {"id": 1, "name": "张三", "amount": "1.50", "day": "2024-02-29"},
    {"id": 2, "name": "=1+1", "amount": None, "day": None},
    {"id": 3, "name": None, "amount": "-0.10", "day": "2024-03-01"},
]


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_array_rows_give_the_file_of_the_same_object_rows(case_stack, cases, fmt):
    """rowFormat "array" (the SDK's format) over three pages, the middle one sent as
    objects: the same bytes as the whole export sent as objects."""
    arrays = [[row[k] for k, _ in MIXED] for row in MIXED_ROWS]

    def pages(as_arrays: bool) -> list[str]:
        form = "array" if as_arrays else None
        return [
            page(
                arrays[:1] if as_arrays else MIXED_ROWS[:1],
                columns=MIXED,
                more=True,
                cursor="1",
                row_format=form,
            ),
            page(MIXED_ROWS[1:2], more=True, cursor="2"),
            page(arrays[2:] if as_arrays else MIXED_ROWS[2:], row_format=form),
        ]

    files = []
    for as_arrays in (True, False):
        cases.pages = pages(as_arrays)
        detail, data = run(case_stack, fmt)
        assert detail["state"] == "succeeded", detail
        files.append(data)
    if fmt == "csv":
        assert files[0] == files[1]
        assert read_csv(files[0])[1:] == [
            ["1", "张三", "1.50", "2024-02-29"],
            ["2", "'=1+1", "", ""],
            ["3", "", "-0.10", "2024-03-01"],
        ]
    else:
        assert sheet_xml(files[0]) == sheet_xml(files[1])
        ws = xlsx_cells(files[0])
        assert [c.value for c in ws[4]] == [3, None, -0.1, dt.datetime(2024, 3, 1)]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            '[[1,"a","1.00","2024-01-01"],[2,"b","2.00"]]',
            "row 2 is an array of 3 values for 4 columns",
        ),
        ('[[1,"a","1.00","2024-01-01"],{"id":2}]', "row 2 is not an array of 4 values"),
        ('[[1,"a","1.00","2024-01-01",5]]', "row 1 is an array of 5 values for 4 columns"),
    ],
)
def test_array_rows_of_the_wrong_width_break_the_contract(case_stack, cases, raw, message):
    cases.pages = [page([], columns=MIXED, raw_rows=raw, row_format="array")]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed", detail
    assert detail["error"]["code"] == "PROVIDER_CONTRACT"
    assert detail["error"]["message"].endswith("provider broke the contract: " + message)
    assert list(case_stack.runtime.storage.list()) == []


def test_an_unknown_row_format_breaks_the_contract(case_stack, cases):
    cases.pages = [page(MIXED_ROWS, columns=MIXED, row_format="columns")]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["error"]["code"] == "PROVIDER_CONTRACT"
    assert 'rowFormat must be "object" or "array", got \'columns\'' in detail["error"]["message"]


def test_declared_columns_in_no_row_fail_naming_them_and_the_keys_sent(case_stack, cases):
    cols = [("order_id", "INTEGER"), ("customer_name", "STRING"), ("amount", "DECIMAL")]
    rows = [{"order_id": 1, "customerName": "Ann", "amt": "1.50"}]
    cases.pages = [page(rows, columns=cols)]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["error"] == {
        "code": "PROVIDER_CONTRACT",
        "message": "render: batch 1: provider broke the contract: columns 'customer_name', "
        "'amount' are in no row of batch 1 (rows carry unknown keys 'customerName', 'amt')",
    }
    assert list(case_stack.runtime.storage.list()) == []


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_undeclared_keys_are_a_warning_and_keys_missing_from_some_rows_empty_cells(
    case_stack, cases, fmt
):
    cols = [("id", "INTEGER"), ("name", "STRING")]
    cases.pages = [
        page(
            [{"id": 1, "name": "Ann", "x": 1}, {"id": 2, "y": 2}],
            columns=cols,
            more=True,
            cursor="1",
        ),
        page([{"id": 3, "name": "Cy", "x": 3}]),
    ]
    detail, data = run(case_stack, fmt)
    assert detail["state"] == "succeeded", detail
    assert detail["warning"] == "rows carried undeclared keys 'x', 'y' (ignored)"
    if fmt == "csv":
        assert read_csv(data) == [["id", "name"], ["1", "Ann"], ["2", ""], ["3", "Cy"]]
    else:
        ws = xlsx_cells(data)
        assert [[c.value for c in r] for r in ws.iter_rows()] == [
            ["id", "name"],
            [1, "Ann"],
            [2, None],
            [3, "Cy"],
        ]


NUMBER_COLUMNS = [("amount", "DECIMAL"), ("qty", "INTEGER"), ("note", "STRING")]
NUMBER_ROWS = (
    '[{"amount":0E-8,"qty":18446744073709551616,"note":18446744073709551616},'
    '{"amount":12345678901234567.89,"qty":1.0,"note":0.10},'
    '{"amount":-0.10,"qty":-0,"note":1.0E+2},'
    '{"amount":18446744073709551616,"qty":7,"note":1e400}]'
)


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_json_numbers_are_written_with_the_exact_digits_sent(case_stack, cases, fmt):
    # orjson reads these as floats: before, 0.0, 12345678901234568, -0.1 and
    # 18446744073709552000, SUCCEEDED without a warning.
    cases.pages = [
        page([], columns=NUMBER_COLUMNS, raw_rows=NUMBER_ROWS, more=True, cursor="1"),
        page([], raw_rows='[{"amount":"5.00","qty":8,"note":"conforming batch"}]'),
    ]
    detail, data = run(case_stack, fmt)
    assert detail["state"] == "succeeded" and detail["warning"] is None, detail
    if fmt == "csv":
        assert read_csv(data)[1:] == [
            ["0.00000000", "18446744073709551616", "18446744073709551616"],
            ["12345678901234567.89", "1", "0.10"],
            ["-0.10", "0", "100"],
            ["18446744073709551616", "7", "1E+400"],
            ["5.00", "8", "conforming batch"],
        ]
        return
    ws = xlsx_cells(data)
    cells = [[c.value for c in r] for r in ws.iter_rows(min_row=2)]
    assert cells == [
        [0, "18446744073709551616", "18446744073709551616"],
        ["12345678901234567.89", 1, "0.10"],  # 19 significant digits: text, never rounded
        [-0.1, 0, "100"],
        ["18446744073709551616", 7, "1E+400"],
        [5, 8, "conforming batch"],
    ]
    assert [ws.cell(row=r, column=1).number_format for r in (2, 4, 6)] == [
        "#,##0.00000000",
        "#,##0.00",
        "#,##0.00",
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"amount":"1","qty":1.5,"note":"x"}', "row 2, column qty: not an integer: 1.5"),
        (
            '{"amount":0.1234567890123456789012345678901234567890,"qty":1,"note":"x"}',
            "row 2, column amount: decimal has 40 digits, more than 38",
        ),
        ('{"amount":1e400,"qty":1,"note":"x"}', "row 2, column amount: decimal exponent out"),
        ('{"amount":"1","qty":1e400,"note":"x"}', "row 2, column qty: integer out of range"),
    ],
)
def test_numbers_that_cannot_be_kept_exactly_fail_naming_row_and_column(
    case_stack, cases, row, message
):
    raw = '[{"amount":"1","qty":1,"note":"x"},' + row + "]"
    cases.pages = [page([], columns=NUMBER_COLUMNS, raw_rows=raw)]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["error"]["code"] == "INVALID_VALUE", detail
    assert detail["error"]["message"].startswith("render: batch 1: " + message)
    assert list(case_stack.runtime.storage.list()) == []


# --- BOOLEAN cells sent as 1/0, and what a STRING column takes ---------------------------

FLAG_COLUMNS = [("id", "INTEGER"), ("paid", "BOOLEAN"), ("note", "STRING")]


def flag_pages(paid: list[str], note: list[str]) -> list[str]:
    """Two pages of raw rows: ``paid`` and ``note`` are JSON texts, one per row."""
    rows = [
        f'{{"id":{i + 1},"paid":{p},"note":{n}}}'
        for i, (p, n) in enumerate(zip(paid, note, strict=True))
    ]
    half = len(rows) // 2
    return [
        page(
            [],
            columns=FLAG_COLUMNS,
            raw_rows="[" + ",".join(rows[:half]) + "]",
            more=True,
            cursor="1",
        ),
        page([], raw_rows="[" + ",".join(rows[half:]) + "]"),
    ]


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_boolean_cells_sent_as_1_and_0_give_the_cells_of_true_and_false(case_stack, cases, fmt):
    # Before: a MySQL TINYINT(1) provider failed the export ("expected a boolean, got 1").
    note = ["true", "false", "1", "null"]  # a STRING column: each scalar as its JSON text
    cases.pages = flag_pages(["true", "false", "null", "true"], note)
    words, words_file = run(case_stack, fmt)
    cases.pages = flag_pages(["1", "0", "null", "1"], note)
    numbers, numbers_file = run(case_stack, fmt)
    assert words["state"] == numbers["state"] == "succeeded", (words, numbers)
    if fmt == "csv":
        expected = [
            ["id", "paid", "note"],
            ["1", "true", "true"],
            ["2", "false", "false"],
            ["3", "", "1"],
            ["4", "true", ""],
        ]
        assert read_csv(words_file) == read_csv(numbers_file) == expected
        assert words_file == numbers_file
        return
    got = [
        [[c.value for c in r] for r in xlsx_cells(f).iter_rows()]
        for f in (words_file, numbers_file)
    ]
    assert (
        got[0]
        == got[1]
        == [
            ["id", "paid", "note"],
            [1, True, "true"],
            [2, False, "false"],
            [3, None, "1"],
            [4, True, None],
        ]
    )
    types = [[c.data_type for c in r] for r in xlsx_cells(numbers_file).iter_rows(min_row=2)]
    assert [t[1] for t in types] == ["b", "b", "n", "b"]  # booleans, an empty cell


@pytest.mark.parametrize(
    ("paid", "note", "message"),
    [
        ("2", '"x"', "row 3, column paid: expected a boolean (true, false, 1 or 0), got 2"),
        ("-1", '"x"', "row 3, column paid: expected a boolean (true, false, 1 or 0), got -1"),
        ('"1"', '"x"', "row 3, column paid: expected a boolean (true, false, 1 or 0), got '1'"),
        (
            "1.0",
            '"x"',
            "row 3, column paid: expected a boolean (true, false, 1 or 0), got 1.0 (a number "
            "written with a fraction or an exponent)",
        ),
        (
            "1e0",
            '"x"',
            "row 3, column paid: expected a boolean (true, false, 1 or 0), got 1 (a number "
            "written with a fraction or an exponent)",
        ),
        ("true", "[1, 2]", "row 3, column note: expected a string, got list: [1, 2]"),
        ("true", '{"a": 1}', "row 3, column note: expected a string, got dict: {'a': 1}"),
    ],
)
def test_other_boolean_cells_and_nested_strings_fail_naming_row_and_column(
    case_stack, cases, paid, note, message
):
    cases.pages = flag_pages(["true", "1", paid, "0"], ['"a"', '"b"', note, '"d"'])
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed", detail
    assert detail["error"]["code"] == "INVALID_VALUE"
    assert detail["error"]["message"] == f"render: batch 2 (cursor 1): {message}"
    assert list(case_stack.runtime.storage.list()) == []
