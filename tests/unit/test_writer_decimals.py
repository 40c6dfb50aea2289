"""DECIMAL cells (CASES E04), decided one by one.

XLSX: a value Excel holds exactly (at most 15 significant digits) is a numeric cell with
the number format of its scale (``#,##0.00`` for ``1.50``; General beyond 15 places);
more than 15 significant digits is a text cell with the exact positional text. This
holds for every cell on its own, whatever the other values of its batch and whatever
form the column comes in (``DecimalColumn``, ``DecimalText``, ``Decimal``, with None).
CSV writes the exact positional text. Files are read back with openpyxl and ``csv``.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pytest
from openpyxl import load_workbook

from export_center.columns import ColumnType
from export_center.values import DecimalColumn, DecimalText
from tests.unit.writer_helpers import cols, write_columns_file, write_file

AMOUNT = cols(("amount", ColumnType.DECIMAL))

PLAIN_TEXTS = [
    # the batch that made all three cells text
    "1.50",
    "-20.00",
    "1234567890123.45",  # 16 characters, 15 significant digits: a number
    # neighbours: 15/16 significant digits, signs, leading "0.", trailing zeros
    "-1234567890123.45",
    "12345678901234.56",  # 16 significant digits: text
    "123456789012345",
    "1234567890123456",
    "-1234567890123456",
    "99999999999999.9",
    "99999999999999.99",
    "0.123456789012345",
    "0.1234567890123456",
    "-0.000000000000001",  # 1 significant digit, 15 places
    "0.0000000000000001",  # 16 places: General format
    "12345678901234.50",  # the trailing zero is not significant: 15 digits
    "1000000000000000000",  # 1 significant digit, 19 characters
    "100.10",
    "0",
    "-0.00",
]
"""Plain positional texts, as the DECIMAL converter keeps them (``DecimalText``)."""

DECIMALS = [
    Decimal("0E-8"),  # str() is "0E-8": written as 0.00000000
    Decimal("-0E-8"),
    Decimal("1E+3"),
    Decimal("1.2E-7"),
    Decimal("-1.5E-14"),
    Decimal("1.23456789012345E+20"),  # 15 significant digits
    Decimal("1.234567890123456E+20"),  # 16 significant digits
    Decimal("7"),
    Decimal("-0.5"),
] + [Decimal(text) for text in PLAIN_TEXTS]
"""``Decimal`` values, some in exponent form (from ``values.coerce``)."""


def significant_digits(text: str) -> int:
    return len(text.lstrip("-").replace(".", "").strip("0"))


def expected_cell(text: str) -> tuple[Any, str, str]:
    """(value, data_type, number_format) openpyxl reads back for positional ``text``."""
    if significant_digits(text) > 15:
        return text, "s", "General"
    scale = len(text.partition(".")[2])
    number_format = "#,##0" + ("." + "0" * scale if scale else "") if scale <= 15 else "General"
    return (float(text) if "." in text else int(text)), "n", number_format


def sheet1(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read("xl/worksheets/sheet1.xml").decode()


def read_column(data: bytes, count: int) -> list[tuple[Any, str, str]]:
    ws = load_workbook(io.BytesIO(data)).active
    cells = [ws.cell(row=row, column=1) for row in range(2, count + 2)]
    return [(c.value, c.data_type, c.number_format) for c in cells]


def check_xlsx(data: bytes, texts: Sequence[str | None]) -> None:
    """Every cell is a number or a text exactly as its own value says (None: empty)."""
    got = read_column(data, len(texts))
    xml = sheet1(data)
    for row, (text, cell) in enumerate(zip(texts, got, strict=True), start=2):
        if text is None:
            assert cell[0] is None, row
            continue
        assert cell == expected_cell(text), (row, text)
        if cell[1] == "n":  # exact digits in the file, not a float's repr
            assert re.search(rf'<c r="A{row}" s="\d+"><v>{re.escape(text)}</v></c>', xml)
        else:
            assert f"<v>{text}</v>" not in xml


def test_e04_one_long_value_does_not_make_its_batch_text() -> None:
    # The reported batch: a DecimalColumn whose longest value has 16 characters.
    batch = DecimalColumn(["1.50", "-20.00", "1234567890123.45"])
    data, _ = write_columns_file("xlsx", AMOUNT, [[batch]])
    assert read_column(data, 3) == [
        (1.5, "n", "#,##0.00"),
        (-20.0, "n", "#,##0.00"),
        (1234567890123.45, "n", "#,##0.00"),
    ]


def test_e04_a_16_digit_value_is_text_and_its_neighbours_stay_numbers() -> None:
    batch = DecimalColumn(["1.50", "12345678901234.56", "-20.00"])
    data, _ = write_columns_file("xlsx", AMOUNT, [[batch]])
    assert read_column(data, 3) == [
        (1.5, "n", "#,##0.00"),
        ("12345678901234.56", "s", "General"),
        (-20.0, "n", "#,##0.00"),
    ]


COLUMN_FORMS: dict[str, Callable[[list[str]], list[Any]]] = {
    "DecimalColumn": DecimalColumn,
    "DecimalText list": lambda texts: [DecimalText(t) for t in texts],
    "Decimal list": lambda texts: [Decimal(t) for t in texts],
    "DecimalText and None": lambda texts: [x for t in texts for x in (DecimalText(t), None)],
    "Decimal, DecimalText and None": lambda texts: [
        x for i, t in enumerate(texts) for x in (Decimal(t) if i % 2 else DecimalText(t), None)
    ],
}


@pytest.mark.parametrize("form", COLUMN_FORMS)
@pytest.mark.parametrize("batch_size", [1, 4, len(PLAIN_TEXTS)])
def test_e04_each_cell_is_decided_on_its_own(form: str, batch_size: int) -> None:
    values = COLUMN_FORMS[form](PLAIN_TEXTS)
    batches = [values[i : i + batch_size] for i in range(0, len(values), batch_size)]
    if form == "DecimalColumn":
        batches = [DecimalColumn(b) for b in batches]
    data, stats = write_columns_file("xlsx", AMOUNT, [[b] for b in batches])
    assert stats.rows == len(values)
    check_xlsx(data, [None if v is None else format(Decimal(v), "f") for v in values])


def test_e04_decimals_in_exponent_form_and_rows() -> None:
    rows = [{"amount": d} for d in DECIMALS] + [{"amount": None}, {}]
    data, _ = write_file("xlsx", AMOUNT, [rows[:5], rows[5:]])
    check_xlsx(data, [format(d, "f") for d in DECIMALS] + [None, None])
    got = read_column(data, 6)
    assert got[0] == (0, "n", "#,##0.00000000")  # Decimal("0E-8")
    assert got[2] == (1000, "n", "#,##0")  # Decimal("1E+3")
    assert got[5] == (123456789012345000000, "n", "#,##0")
    assert read_column(data, 7)[6] == ("123456789012345600000", "s", "General")


def test_e04_number_and_text_by_significant_digits_at_the_boundary() -> None:
    fifteen = ["123456789012345", "1.23456789012345", "0.000123456789012345"]
    sixteen = ["1234567890123456", "1.234567890123456", "0.0001234567890123456"]
    data, _ = write_columns_file("xlsx", AMOUNT, [[DecimalColumn(fifteen + sixteen)]])
    kinds = [cell[1] for cell in read_column(data, 6)]
    assert kinds == ["n", "n", "n", "s", "s", "s"]


@pytest.mark.parametrize("form", COLUMN_FORMS)
def test_csv_writes_the_exact_positional_text(form: str) -> None:
    values = COLUMN_FORMS[form](PLAIN_TEXTS)
    if form == "DecimalColumn":
        values = DecimalColumn(values)
    data, _ = write_columns_file("csv", AMOUNT, [[values]])
    records = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert [r[0] for r in records[1:]] == [
        "" if v is None else format(Decimal(v), "f") for v in values
    ]
    assert b"E" not in data  # never 1.2E+15 or 0E-8


def test_csv_writes_decimals_in_exponent_form_positionally() -> None:
    data, _ = write_file("csv", AMOUNT, [[{"amount": d} for d in DECIMALS]])
    records = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert [r[0] for r in records[1:5]] == ["0.00000000", "-0.00000000", "1000", "0.00000012"]
    assert [r[0] for r in records[1:]] == [format(d, "f") for d in DECIMALS]
