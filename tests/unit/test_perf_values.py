"""Fast paths of the converters (issue #6): DecimalText and the DATE cache give the
same values and the same errors as the full conversion."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from export_center.values import DecimalText, InvalidValue, coerce, make_converters


def converter(kind: ColumnType, key: str = "x"):
    return make_converters([Column(key, key, kind)])[0]


@pytest.mark.parametrize(
    "text",
    ["182210.40", "-5.00", "0", "-0", "-0.00", "0.00000001", "12345678901234567890",
     "99999999999999999999.999999999999999999", "1.5"],
)
def test_plain_decimal_strings_become_decimal_text(text: str) -> None:
    value = converter(ColumnType.DECIMAL)(text)
    assert type(value) is DecimalText
    assert str(value) == text == format(Decimal(text), "f")  # positional, as written
    assert value == coerce(text, ColumnType.DECIMAL) and value.to_decimal() == Decimal(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("007.50", Decimal("7.50")), ("+5", Decimal(5)), (".5", Decimal("0.5")),
     ("5.", Decimal(5)), ("1E+3", Decimal("1E+3")), ("-1.5e-3", Decimal("-0.0015")),
     ("123456789012345678901", Decimal("123456789012345678901"))],
)
def test_other_decimal_forms_take_the_full_path(text: str, expected: Decimal) -> None:
    value = converter(ColumnType.DECIMAL)(text)
    assert type(value) is Decimal and value == expected


@pytest.mark.parametrize(
    "bad", ["NaN", "Infinity", "-inf", "1" * 39, "1E+39", "1E-39", "1_0", " 1", "1 ", "٣",
            "0x10", "", "-", "1.2.3", True, [1], {"a": 1}],
)
def test_bad_decimals_are_rejected_with_the_column(bad: object) -> None:
    with pytest.raises(InvalidValue) as caught:
        converter(ColumnType.DECIMAL, "o_totalprice")(bad)
    assert caught.value.column == "o_totalprice"
    with pytest.raises(InvalidValue):
        coerce(bad, ColumnType.DECIMAL)


def test_decimal_text_compares_like_its_value_and_like_its_text() -> None:
    value = DecimalText("1.50")
    assert value == Decimal("1.5") and value == "1.50" and value != "1.5"
    assert value != Decimal("1.51") and not (value != Decimal("1.50"))
    assert DecimalText("2") == 2 and value != 1.5  # floats are not compared as numbers
    assert repr(value) == "DecimalText('1.50')" and isinstance(value, str)
    assert {value: 1}["1.50"] == 1  # hashes like its text


@given(st.decimals(allow_nan=False, allow_infinity=False, places=2,
                   min_value=Decimal("-1e17"), max_value=Decimal("1e17")))
def test_property_fast_path_equals_coerce(number: Decimal) -> None:
    text = format(number, "f")
    value = converter(ColumnType.DECIMAL)(text)
    assert value == coerce(text, ColumnType.DECIMAL)
    assert format(Decimal(str(value)), "f") == format(coerce(text, ColumnType.DECIMAL), "f")


def test_date_cache_returns_the_same_dates_and_rejects_bad_ones_every_time() -> None:
    convert = converter(ColumnType.DATE, "o_orderdate")
    first = convert("1996-01-02")
    assert first == dt.date(1996, 1, 2) and type(first) is dt.date
    assert convert("1996-01-02") is first  # parsed once
    for _ in range(2):
        with pytest.raises(InvalidValue) as caught:
            convert("2024-02-30")
        assert caught.value.column == "o_orderdate"
    assert convert(None) is None and convert(dt.date(2020, 1, 1)) == dt.date(2020, 1, 1)
    with pytest.raises(InvalidValue):
        convert(["1996-01-02"])  # unhashable JSON values are no problem


def test_date_cache_is_bounded() -> None:
    from export_center import values

    convert = converter(ColumnType.DATE)
    start = dt.date(1900, 1, 1)
    days = [(start + dt.timedelta(days=i)).isoformat() for i in range(values._DATE_CACHE_SIZE + 50)]
    assert [convert(d) for d in days] == [dt.date.fromisoformat(d) for d in days]
    cache = convert.__closure__  # the cache is the closure's dict
    sizes = [len(c.cell_contents) for c in cache if isinstance(c.cell_contents, dict)]
    assert sizes == [values._DATE_CACHE_SIZE]
