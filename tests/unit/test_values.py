"""Provider JSON values -> typed Python values (export_center.values)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from export_center.columns import Column, ColumnType
from export_center.values import InvalidValue, coerce, make_converters

UTC = dt.UTC
PLUS8 = dt.timezone(dt.timedelta(hours=8))


@pytest.mark.parametrize("column_type", list(ColumnType))
def test_none_stays_none(column_type: ColumnType) -> None:
    assert coerce(None, column_type) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("abc", "abc"),
        ("", ""),
        ("000123", "000123"),
        (9912140633506421, "9912140633506421"),
        (-5, "-5"),
        (1.5, "1.5"),
        (True, "true"),
        (False, "false"),
    ],
)
def test_string_accepts_text_and_json_scalars(value: object, expected: str) -> None:
    assert coerce(value, ColumnType.STRING) == expected


@pytest.mark.parametrize("value", [{"a": 1}, [1], float("nan")])
def test_string_rejects_objects_and_nan(value: object) -> None:
    with pytest.raises(InvalidValue):
        coerce(value, ColumnType.STRING)


def test_e04_big_integers_stay_exact_from_raw_json() -> None:
    # CASES E04: unquoted 16-18 digit numbers in the provider's JSON.
    raw = '{"order_id":9912140633506421,"big":568883383628111872,"n":999999999999999}'
    row = json.loads(raw)
    assert coerce(row["order_id"], ColumnType.INTEGER) == 9912140633506421
    assert coerce(row["big"], ColumnType.INTEGER) == 568883383628111872
    assert coerce(row["n"], ColumnType.INTEGER) == 999999999999999
    assert coerce("12345678901234567890123", ColumnType.INTEGER) == 12345678901234567890123


@pytest.mark.parametrize(("value", "expected"), [("42", 42), ("-7", -7), ("+3", 3), (4.0, 4)])
def test_integer_accepts_digit_strings_and_integral_floats(value: object, expected: int) -> None:
    assert coerce(value, ColumnType.INTEGER) == expected
    assert type(coerce(value, ColumnType.INTEGER)) is int


@pytest.mark.parametrize(
    "value", ["4.5", "1e3", " 1", "1_000", "", "abc", 4.5, 2.0**60, True, float("inf")]
)
def test_integer_rejects_non_integers(value: object) -> None:
    with pytest.raises(InvalidValue):
        coerce(value, ColumnType.INTEGER)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("182210.40", Decimal("182210.40")),
        ("-5.00", Decimal("-5.00")),
        ("0.00000001", Decimal("0.00000001")),
        ("1E+38", Decimal("1E+38")),
        (".5", Decimal("0.5")),
        (7, Decimal(7)),
        (0.1, Decimal("0.1")),  # via repr, not the binary expansion
        (Decimal("1.10"), Decimal("1.10")),
    ],
)
def test_decimal_accepts_strings_ints_and_finite_floats(value: object, expected: Decimal) -> None:
    result = coerce(value, ColumnType.DECIMAL)
    assert type(result) is Decimal
    assert result == expected
    assert str(result) == str(expected)  # the scale is kept


@pytest.mark.parametrize(
    "value",
    [
        "NaN",
        "nan",
        "Infinity",
        "-Infinity",
        "sNaN",
        float("nan"),
        float("inf"),
        float("-inf"),
        Decimal("NaN"),
        Decimal("Infinity"),
        "1e400",  # CASES E15: json.loads turns 1e400 into inf; as text it is out of range
        "1E+39",
        "1" * 39,
        "0." + "0" * 38 + "1",
        "1 000",
        "1,5",
        "",
        True,
    ],
)
def test_e15_decimal_rejects_non_finite_and_out_of_range(value: object) -> None:
    with pytest.raises(InvalidValue) as caught:
        coerce(value, ColumnType.DECIMAL)
    assert caught.value.message
    assert caught.value.column is None


def test_e15_raw_json_nan_and_infinity_are_rejected() -> None:
    rows = json.loads('[{"v":NaN},{"v":Infinity},{"v":1e400}]')
    for row in rows:
        with pytest.raises(InvalidValue):
            coerce(row["v"], ColumnType.DECIMAL)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        (1, True),  # MySQL TINYINT(1)
        (0, False),
        ("true", True),
        ("false", False),
        ("TRUE", True),
    ],
)
def test_boolean(value: object, expected: bool) -> None:
    assert coerce(value, ColumnType.BOOLEAN) is expected
    assert make_converters([Column("b", "b", ColumnType.BOOLEAN)])[0](value) is expected


FRACTION = " (a number written with a fraction or an exponent)"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (2, "2"),
        (-1, "-1"),
        (10**30, str(10**30)),
        (1.0, "1.0" + FRACTION),
        (0.0, "0.0" + FRACTION),
        (Decimal("1"), "1" + FRACTION),  # JSON 1e0 read exactly
        (Decimal("1.0"), "1.0" + FRACTION),
        (Decimal("0E-8"), "0E-8" + FRACTION),
        ("1", "'1'"),
        ("0", "'0'"),
        ("yes", "'yes'"),
        ("", "''"),
        ("t", "'t'"),
        ([1], "[1]"),
        ({"v": True}, "{'v': True}"),
    ],
)
def test_boolean_rejects_others_naming_the_column(value: object, shown: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        coerce(value, ColumnType.BOOLEAN)
    assert caught.value.message == f"expected a boolean (true, false, 1 or 0), got {shown}"
    with pytest.raises(InvalidValue) as caught:
        make_converters([Column("paid", "Paid", ColumnType.BOOLEAN)])[0](value)
    assert caught.value.column == "paid"


@pytest.mark.parametrize(
    ("value", "text"),
    [(True, "true"), (False, "false"), (1, "1"), (0, "0"), (Decimal("1.0"), "1.0")],
)
def test_a_string_column_writes_any_json_scalar_as_its_json_text(value: object, text: str) -> None:
    assert coerce(value, ColumnType.STRING) == text


@pytest.mark.parametrize("value", [[], [1, 2], ["a"], {}, {"a": 1}])
def test_a_string_column_refuses_arrays_and_objects(value: object) -> None:
    with pytest.raises(InvalidValue) as caught:
        make_converters([Column("tags", "Tags", ColumnType.STRING)])[0](value)
    assert caught.value.column == "tags"
    assert caught.value.message.startswith(f"expected a string, got {type(value).__name__}: ")


def test_date() -> None:
    assert coerce("2024-03-01", ColumnType.DATE) == dt.date(2024, 3, 1)
    assert coerce("1900-03-01", ColumnType.DATE) == dt.date(1900, 3, 1)
    assert coerce(dt.date(2024, 1, 2), ColumnType.DATE) == dt.date(2024, 1, 2)


@pytest.mark.parametrize(
    "value", ["2024-02-30", "20240301", "2024-03-01T00:00:00", "2024-W09-5", 20240301]
)
def test_date_rejects_others(value: object) -> None:
    with pytest.raises(InvalidValue):
        coerce(value, ColumnType.DATE)


def test_e13_datetimes_are_aware_and_naive_means_utc() -> None:
    # CASES E13 inputs: with offset, with Z, and naive (documented as UTC).
    with_offset = coerce("2024-03-01T12:00:00+08:00", ColumnType.DATETIME)
    zulu = coerce("2024-03-01T04:00:00Z", ColumnType.DATETIME)
    naive = coerce("2024-03-01T12:00:00", ColumnType.DATETIME)
    assert with_offset == zulu
    assert with_offset.utcoffset() == dt.timedelta(hours=8)
    assert naive == dt.datetime(2024, 3, 1, 12, tzinfo=UTC)
    assert naive.tzinfo is not None


def test_datetime_keeps_microseconds_and_accepts_python_datetimes() -> None:
    value = coerce("2024-01-31T23:59:59.999600+08:00", ColumnType.DATETIME)
    assert value == dt.datetime(2024, 1, 31, 23, 59, 59, 999600, tzinfo=PLUS8)
    assert coerce(dt.datetime(2024, 1, 1), ColumnType.DATETIME).tzinfo is UTC


@pytest.mark.parametrize(
    "value", ["2024-03-01T25:00:00", "yesterday", "2024-03-01T12:00:00+25:00", 0]
)
def test_datetime_rejects_others(value: object) -> None:
    with pytest.raises(InvalidValue):
        coerce(value, ColumnType.DATETIME)


def test_coerce_accepts_type_names() -> None:
    assert coerce("5", "INTEGER") == 5
    with pytest.raises(ValueError):
        coerce("5", "MONEY")


def test_make_converters_names_the_column_and_keeps_the_message() -> None:
    columns = [
        Column("id", "Id", ColumnType.INTEGER),
        Column("amount", "Amount", ColumnType.DECIMAL),
        Column("name", "Name", ColumnType.STRING),
    ]
    converters = make_converters(columns)
    assert [conv(v) for conv, v in zip(converters, [5, "1.50", "x"], strict=True)] == [
        5,
        Decimal("1.50"),
        "x",
    ]
    with pytest.raises(InvalidValue) as caught:
        converters[1]("NaN")
    assert caught.value.column == "amount"
    assert str(caught.value) == caught.value.message
    assert "NaN" in caught.value.message


def test_make_converters_fast_path_matches_coerce() -> None:
    columns = [Column(t.value.lower(), t.value, t) for t in ColumnType]
    converters = make_converters(columns)
    samples = {
        ColumnType.STRING: [7, "x", True],
        ColumnType.INTEGER: [7, "8", True],
        ColumnType.DECIMAL: ["1.5", 2, "x"],
        ColumnType.BOOLEAN: [True, "false", 1, 0, 2, Decimal("1")],
        ColumnType.DATE: ["2024-01-02", "bad"],
        ColumnType.DATETIME: ["2024-01-02T03:04:05", "bad"],
    }
    for column, convert in zip(columns, converters, strict=True):
        for value in samples[column.type]:
            try:
                expected = coerce(value, column.type)
            except InvalidValue:
                with pytest.raises(InvalidValue):
                    convert(value)
            else:
                assert convert(value) == expected


# --- JSON numbers read exactly (Decimal for fractions and exponents, int at any size) ---


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0E-8", "0.00000000"),
        ("12345678901234567.89", "12345678901234567.89"),
        ("-0.10", "-0.10"),
        ("1.0E+2", "100"),
        ("-0.0", "-0.0"),
        ("0." + "1234567890" * 5, "0." + "1234567890" * 5),  # 50 digits: text keeps them
        ("1E+400", "1E+400"),  # beyond the DECIMAL range: scientific, never 401 digits
        ("1e-400", "1E-400"),
    ],
)
def test_string_column_keeps_the_exact_digits_of_a_number(text: str, expected: str) -> None:
    value = json.loads(text, parse_float=Decimal)
    assert coerce(value, ColumnType.STRING) == expected


def test_string_and_integer_columns_keep_integers_beyond_64_bits() -> None:
    value = json.loads("18446744073709551616")  # 2**64: orjson would give a float
    assert coerce(value, ColumnType.STRING) == "18446744073709551616"
    assert coerce(value, ColumnType.INTEGER) == 2**64
    assert coerce(value, ColumnType.DECIMAL) == Decimal("18446744073709551616")


@pytest.mark.parametrize(
    ("text", "expected"), [("1.0", 1), ("1.0E+2", 100), ("-0.0", 0), ("-0", 0), ("7.000", 7)]
)
def test_integer_accepts_integral_numbers_read_exactly(text: str, expected: int) -> None:
    value = coerce(json.loads(text, parse_float=Decimal), ColumnType.INTEGER)
    assert value == expected and type(value) is int


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.5", "not an integer: 1.5"),
        ("1E-8", "not an integer: 1E-8"),
        ("1e400", "integer out of range (more than 38 digits): 1E+400"),
    ],
)
def test_integer_refuses_fractions_and_huge_exponents(text: str, message: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        coerce(json.loads(text, parse_float=Decimal), ColumnType.INTEGER)
    assert caught.value.message == message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0E-8", "0E-8"), ("12345678901234567.89", "12345678901234567.89"), ("-0.10", "-0.10")],
)
def test_decimal_keeps_the_scale_of_a_number_read_exactly(text: str, expected: str) -> None:
    value = coerce(json.loads(text, parse_float=Decimal), ColumnType.DECIMAL)
    assert str(value) == expected


@pytest.mark.parametrize(
    "text", ["0.123456789012345678901234567890123456789", "1e400", "1E+39", "1e-39"]
)
def test_decimal_refuses_numbers_beyond_38_digits_or_exponent_38(text: str) -> None:
    with pytest.raises(InvalidValue):
        coerce(json.loads(text, parse_float=Decimal), ColumnType.DECIMAL)
