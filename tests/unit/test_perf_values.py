"""Fast paths of the converters (issue #6): DecimalText and the DATE cache give the
same values and the same errors as the full conversion."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from export_center.values import DecimalText, InvalidValue, coerce, make_converters


def converter(kind: ColumnType, key: str = "x"):
    return make_converters([Column(key, key, kind)])[0]


@pytest.mark.parametrize(
    "text",
    [
        "182210.40",
        "-5.00",
        "0",
        "-0",
        "-0.00",
        "0.00000001",
        "12345678901234567890",
        "99999999999999999999.999999999999999999",
        "1.5",
    ],
)
def test_plain_decimal_strings_become_decimal_text(text: str) -> None:
    value = converter(ColumnType.DECIMAL)(text)
    assert type(value) is DecimalText
    assert str(value) == text == format(Decimal(text), "f")  # positional, as written
    assert value == coerce(text, ColumnType.DECIMAL) and value.to_decimal() == Decimal(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("007.50", Decimal("7.50")),
        ("+5", Decimal(5)),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("1E+3", Decimal("1E+3")),
        ("-1.5e-3", Decimal("-0.0015")),
        ("123456789012345678901", Decimal("123456789012345678901")),
    ],
)
def test_other_decimal_forms_take_the_full_path(text: str, expected: Decimal) -> None:
    value = converter(ColumnType.DECIMAL)(text)
    assert type(value) is Decimal and value == expected


@pytest.mark.parametrize(
    "bad",
    [
        "NaN",
        "Infinity",
        "-inf",
        "1" * 39,
        "1E+39",
        "1E-39",
        "1_0",
        " 1",
        "1 ",
        "٣",
        "0x10",
        "",
        "-",
        "1.2.3",
        True,
        [1],
        {"a": 1},
    ],
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
    assert value != Decimal("1.51") and not (value != Decimal("1.50"))  # noqa: SIM202 - tests __ne__
    assert DecimalText("2") == 2 and value != 1.5  # floats are not compared as numbers
    assert repr(value) == "DecimalText('1.50')" and isinstance(value, str)
    assert {value: 1}["1.50"] == 1  # hashes like its text


@given(
    st.decimals(
        allow_nan=False,
        allow_infinity=False,
        places=2,
        min_value=Decimal("-1e17"),
        max_value=Decimal("1e17"),
    )
)
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


def test_bounded_cache_stops_growing_and_remembers_no_error() -> None:
    from export_center.values import BoundedCache

    calls: list[str] = []

    def parse(text: str) -> dt.date:
        calls.append(text)
        return dt.date.fromisoformat(text)

    cache: BoundedCache[str, dt.date] = BoundedCache(parse, 2)
    days = ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert [cache[d] for d in days + days] == [dt.date.fromisoformat(d) for d in days + days]
    assert list(cache) == days[:2] and calls == days + days[2:]
    with pytest.raises(ValueError):
        cache["2024-02-30"]
    assert "2024-02-30" not in cache


# --- BatchConverter -------------------------------------------------------------------

from typing import Any  # noqa: E402

from hypothesis import settings  # noqa: E402

from export_center.attempt.batches import (  # noqa: E402
    BatchConverter,
    InexactNumber,
    InvalidRow,
    MissingColumns,
)
from export_center.values import DecimalColumn  # noqa: E402

BATCH_COLUMNS = [
    Column("s", "s", ColumnType.STRING),
    Column("i", "i", ColumnType.INTEGER),
    Column("d", "d", ColumnType.DECIMAL),
    Column("day", "day", ColumnType.DATE),
    Column("b", "b", ColumnType.BOOLEAN),
    Column("at", "at", ColumnType.DATETIME),
]
JSON_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.decimals(
        allow_nan=False, allow_infinity=False, places=3, max_value=10**6, min_value=-(10**6)
    ),
    st.text(max_size=4),
    st.sampled_from(
        [
            "1.50",
            "-0.00",
            "007",
            "1E+3",
            "NaN",
            "2024-02-29",
            "2024-02-30",
            "2024-01-02T03:04:05Z",
            "true",
            "12",
            "1\n2",
            "0.5",
        ]
    ),
)
"""JSON values as the exact decoding gives them (numbers are ``int`` or ``Decimal``)."""
KEYS = [c.key for c in BATCH_COLUMNS]


def row_by_row(rows: list[Any]) -> list[dict[str, Any]] | tuple[int, str | None]:
    """The reference: what the pipeline did per row, or (index, column) of the error; a
    declared key in no row of an all-object batch is ``(-1, "missing")``."""
    converters = make_converters(BATCH_COLUMNS)
    objects = bool(rows) and all(isinstance(r, dict) for r in rows)
    if objects and any(all(k not in r for r in rows) for k in KEYS):
        return -1, "missing"
    out = []
    for index, raw in enumerate(rows):
        if not isinstance(raw, dict):
            return index, None
        try:
            out.append(
                {
                    c.key: conv(raw.get(c.key))
                    for c, conv in zip(BATCH_COLUMNS, converters, strict=True)
                }
            )
        except InvalidValue as exc:
            return index, exc.column
    return out


def batch(rows: list[Any]) -> list[dict[str, Any]] | tuple[int, str | None]:
    try:
        return BatchConverter(BATCH_COLUMNS).convert(rows)
    except InvalidRow as exc:
        return exc.index, exc.column
    except MissingColumns:
        return -1, "missing"


def cells(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[row.get(c.key) for c in BATCH_COLUMNS] for row in rows]


# Generation speed is not under test: the CI machine may be busy starting servers.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.fixed_dictionaries({k: JSON_VALUE for k in KEYS}, optional={"x": JSON_VALUE}),
            st.dictionaries(st.sampled_from([*KEYS, "x"]), JSON_VALUE),
            st.just([1]),
        ),
        max_size=8,
    )
)
def test_property_batch_converter_equals_row_by_row(rows: list[Any]) -> None:
    import copy

    expected = row_by_row(copy.deepcopy(rows))
    got = batch(copy.deepcopy(rows))
    if isinstance(expected, tuple):
        assert got == expected
    else:
        assert isinstance(got, list) and cells(got) == cells(expected)
        for g, e in zip(cells(got), cells(expected), strict=True):
            assert [type(v) for v in g] == [type(v) for v in e]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({k: JSON_VALUE for k in KEYS}), max_size=8))
def test_property_array_rows_convert_as_the_objects_they_stand_for(rows: list[Any]) -> None:
    """``rowFormat: "array"``: the same columns, value types and first error (row and
    column) as the same rows sent as objects."""
    import copy

    arrays = [[row[k] for k in KEYS] for row in rows]

    def run(data: list[Any], as_arrays: bool) -> Any:
        try:
            return BatchConverter(BATCH_COLUMNS).columns_of(copy.deepcopy(data), as_arrays)
        except InvalidRow as exc:
            return type(exc).__name__, exc.index, exc.column

    expected, got = run(rows, False), run(arrays, True)
    assert got == expected
    if isinstance(got, list):
        assert [[type(v) for v in c] for c in got] == [[type(v) for v in c] for c in expected]
        assert [type(c) for c in got] == [type(c) for c in expected]


@pytest.mark.parametrize(
    ("rows", "index", "message"),
    [
        ([[1, 2, 3, 4, 5, 6], {"s": "x"}], 1, "not an array of 6 values"),
        ([[1, 2, 3, 4, 5, 6], [1, 2, 3]], 1, "an array of 3 values for 6 columns"),
        ([["a", 1, "1", None, True, None, "extra"]], 0, "an array of 7 values for 6 columns"),
        (["row"], 0, "not an array of 6 values"),
    ],
)
def test_array_rows_of_the_wrong_shape_name_the_row(
    rows: list[Any], index: int, message: str
) -> None:
    with pytest.raises(InvalidRow) as caught:
        BatchConverter(BATCH_COLUMNS).columns_of(rows, arrays=True)
    assert (caught.value.index, caught.value.column, caught.value.message) == (index, None, message)


def test_an_array_row_in_an_object_answer_says_what_is_missing() -> None:
    with pytest.raises(InvalidRow) as caught:
        BatchConverter(BATCH_COLUMNS).columns_of([["x", 1, "1", None, None, None]])
    assert caught.value.message == 'an array, but the answer does not say "rowFormat": "array"'


def test_array_rows_with_a_float_ask_for_an_exact_decoding() -> None:
    with pytest.raises(InexactNumber) as caught:
        BatchConverter(BATCH_COLUMNS).columns_of([["x", 1, 0.1, None, None, None]], arrays=True)
    assert (caught.value.index, caught.value.column) == (0, "d")


def test_batch_converter_columns_of_gives_typed_columns_and_leaves_rows_alone() -> None:
    rows = [
        {"s": "a", "i": 1, "d": "1.50", "day": "2024-01-02", "b": True, "at": None, "extra": 1},
        {"s": None, "i": None, "d": "-0.00", "day": "2024-01-02", "b": None},
    ]
    converter = BatchConverter(BATCH_COLUMNS)
    columns = converter.columns_of(rows)
    assert [len(c) for c in columns] == [2] * len(BATCH_COLUMNS)
    s, i, d, day, b, at = columns
    assert s == ["a", None] and i == [1, None] and b == [True, None] and at == [None, None]
    assert type(d) is DecimalColumn and d == ["1.50", "-0.00"]  # marked, not wrapped
    assert day[0] is day[1] and day[0] == dt.date(2024, 1, 2)
    assert rows[0]["d"] == "1.50" and type(rows[0]["d"]) is str  # rows not changed
    assert converter.convert(rows)[1] == {
        "s": None,
        "i": None,
        "d": Decimal("0"),
        "day": dt.date(2024, 1, 2),
        "b": None,
        "at": None,
    }
    assert converter.convert([]) == [] and converter.columns_of([]) == [[]] * 6


def test_batch_converter_one_column_and_date_cache_bound() -> None:
    from export_center import values

    one = BatchConverter([Column("day", "day", ColumnType.DATE)])
    days = [f"2024-01-{n:02d}" for n in range(1, 29)]
    assert one.columns_of([{"day": t} for t in days]) == [
        [dt.date(2024, 1, n) for n in range(1, 29)]
    ]
    assert one.columns_of([{"day": None}, {}]) == [[None, None]]
    assert len(one._dates) <= values._DATE_CACHE_SIZE
    mixed = BatchConverter([Column("d", "d", ColumnType.DECIMAL)])
    column = mixed.columns_of([{"d": "1.5"}, {"d": None}, {"d": "1E+2"}])[0]
    assert type(column) is list and column == [Decimal("1.5"), None, Decimal("100")]


def full(**values: Any) -> dict[str, Any]:
    """A row with every column of BATCH_COLUMNS (None unless given)."""
    return {key: values.get(key) for key in KEYS}


def test_batch_converter_reports_the_first_bad_row_in_row_order() -> None:
    rows = [full(d="1.5", day="2024-01-01"), full(d="1.5", day="2024-13-01"), full(d="NaN")]
    with pytest.raises(InvalidRow) as caught:
        BatchConverter(BATCH_COLUMNS).convert(rows)
    assert (caught.value.index, caught.value.column) == (1, "day")
    assert "2024-13-01" in caught.value.message
    with pytest.raises(InvalidRow) as caught:
        BatchConverter(BATCH_COLUMNS).convert([{"s": "x"}, "not a row"])
    assert (caught.value.index, caught.value.column) == (1, None)


def test_batch_converter_newline_inside_a_decimal_is_rejected() -> None:
    with pytest.raises(InvalidRow) as caught:
        BatchConverter(BATCH_COLUMNS).convert([full(d="1\n2"), full(d="3")])
    assert (caught.value.index, caught.value.column) == (0, "d")


ORDER_COLUMNS = [
    Column("order_id", "Order", ColumnType.INTEGER),
    Column("customer_name", "Customer", ColumnType.STRING),
    Column("amount", "Amount", ColumnType.DECIMAL),
]


def test_a_declared_column_in_no_row_names_the_column_and_the_unknown_keys() -> None:
    rows = [
        {"order_id": 1, "customerName": "Ann", "amt": "1.50"},
        {"order_id": 2, "customerName": "Bob", "amt": "2.00"},
    ]
    with pytest.raises(MissingColumns) as caught:
        BatchConverter(ORDER_COLUMNS).columns_of(rows)
    assert caught.value.columns == ["customer_name", "amount"]
    assert caught.value.unknown == ["customerName", "amt"]
    assert caught.value.describe(1) == (
        "columns 'customer_name', 'amount' are in no row of batch 1 "
        "(rows carry unknown keys 'customerName', 'amt')"
    )
    only_one = [{"order_id": 1, "customer_name": "Ann"}]
    with pytest.raises(MissingColumns) as caught:
        BatchConverter(ORDER_COLUMNS).columns_of(only_one)
    assert caught.value.describe(3) == "column 'amount' is in no row of batch 3"


def test_a_key_missing_from_some_rows_is_an_empty_cell_and_extra_keys_are_noted_once() -> None:
    converter = BatchConverter(ORDER_COLUMNS)
    first = [
        {"order_id": 1, "customer_name": "Ann", "amount": "1.50", "x": 1},
        {"order_id": 2, "amount": "2.00", "y": 2},
    ]
    assert converter.columns_of(first) == [[1, 2], ["Ann", None], ["1.50", "2.00"]]
    second = [{"order_id": 3, "customer_name": "Cy", "amount": "3", "x": 3, "z": 3}]
    assert converter.columns_of(second) == [[3], ["Cy"], ["3"]]
    assert converter.notes() == ["rows carried undeclared keys 'x', 'y', 'z' (ignored)"]


def test_rows_with_exactly_the_declared_keys_leave_no_note_and_many_keys_are_bounded() -> None:
    converter = BatchConverter(ORDER_COLUMNS)
    converter.columns_of([{"amount": "1", "customer_name": "A", "order_id": 1}])
    assert converter.notes() == []
    converter.columns_of(
        [{"order_id": 1, "customer_name": "A", "amount": "1", **{f"k{i}": i for i in range(30)}}]
    )
    assert converter.notes() == [
        "rows carried undeclared keys 'k0', 'k1', 'k2', 'k3', 'k4' and more (ignored)"
    ]


@pytest.mark.parametrize(
    "rows",
    [
        [full(i=1, d="1.5"), full(i=2, d=0.1)],
        [full(s="x", d="NaN"), full(d=18446744073709551616.0)],  # a bad value first: still
        [full(d=0.1), "not a row"],  # the slow path checks too
    ],
)
def test_a_float_in_a_value_cell_asks_for_an_exact_decoding(rows: list[Any]) -> None:
    with pytest.raises(InexactNumber) as caught:
        BatchConverter(BATCH_COLUMNS).columns_of(rows)
    assert caught.value.column == "d"
    assert "not read exactly" in caught.value.message
    assert isinstance(caught.value, InvalidRow)  # a caller that cannot decode again refuses


def _file_parts(fmt: str, batches: list[Any], columns_form: bool) -> dict[str, bytes]:
    """Write ``batches`` with ``write_columns`` (typed columns) or ``write_rows``."""
    import io
    import zipfile

    from export_center.writers import open_writer

    out = io.BytesIO()
    writer = open_writer(fmt, out, BATCH_COLUMNS, time_zone="Asia/Shanghai")
    for typed in batches:
        if columns_form:
            writer.write_columns(typed)
        else:
            writer.write_rows(typed)
    writer.close()
    if fmt == "csv":
        return {"file.csv": out.getvalue()}
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as archive:  # core.xml has a time
        return {n: archive.read(n) for n in archive.namelist() if n.startswith("xl/")}


VALID_ROW = st.fixed_dictionaries(
    {},
    optional={
        "s": st.one_of(
            st.none(),
            st.text(max_size=6),
            st.integers(),
            st.booleans(),
            st.sampled_from([Decimal("1.50"), Decimal("0E-8"), Decimal("1E+400")]),
        ),
        "i": st.one_of(
            st.none(),
            st.integers(-(10**20), 10**20),
            st.sampled_from(["-12", "7", Decimal("1.0"), Decimal("1.0E+2")]),
        ),
        "d": st.one_of(
            st.none(),
            st.integers(-(10**6), 10**6),
            st.sampled_from(["1.50", "-0.00", "007", "1E+3", "0.5", "12345678901234567.5"]),
            st.sampled_from([Decimal("0E-8"), Decimal("-0.10"), Decimal("12345678901234567.89")]),
        ),
        "day": st.one_of(st.none(), st.sampled_from(["2024-02-29", "1999-12-31", "0001-01-01"])),
        "b": st.one_of(st.none(), st.booleans(), st.sampled_from(["true", "FALSE", 1, 0])),
        "at": st.one_of(
            st.none(), st.sampled_from(["2024-01-02T03:04:05Z", "2024-01-02 03:04", "2024-06-30"])
        ),
    },
)
"""Rows every column accepts (the error paths are the property test above); numbers as
the exact decoding gives them (``int``, ``Decimal``)."""


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(VALID_ROW, min_size=1, max_size=12),
    st.integers(min_value=1, max_value=5),
    st.sampled_from(["csv", "xlsx"]),
)
def test_property_columns_path_writes_the_same_file_as_the_row_by_row_path(
    rows: list[Any], size: int, fmt: str
) -> None:
    """The pipeline's path (columns_of -> write_columns) gives byte-identical parts to
    the reference (make_converters per row -> write_rows), batch by batch."""
    import copy

    rows = [dict(r) for r in rows]
    for start in range(0, len(rows), size):  # every key in some row of each batch
        rows[start] = {key: rows[start].get(key) for key in KEYS}
    reference = row_by_row(copy.deepcopy(rows))
    assume(isinstance(reference, list))
    chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
    converter = BatchConverter(BATCH_COLUMNS)
    columns = [converter.columns_of(copy.deepcopy(chunk)) for chunk in chunks]
    expected = [reference[i : i + size] for i in range(0, len(reference), size)]
    assert _file_parts(fmt, columns, True) == _file_parts(fmt, expected, False)


def test_decimal_column_reaches_both_writers_as_numbers() -> None:
    rows = [full(d="1.50"), full(d="-0.00"), full(d="1234567890.5")]
    typed = BatchConverter(BATCH_COLUMNS).columns_of(rows)
    assert type(typed[2]) is DecimalColumn
    csv_text = _file_parts("csv", [typed], True)["file.csv"].decode("utf-8-sig")
    assert csv_text.splitlines()[1:] == [",,1.50,,,", ",,-0.00,,,", ",,1234567890.5,,,"]
    sheet = _file_parts("xlsx", [typed], True)["xl/worksheets/sheet1.xml"].decode()
    data = sheet.split('<row r="2">', 1)[1]  # after the header row
    assert '<c r="C2" s="7"><v>1.50</v></c>' in data and "inlineStr" not in data


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_write_columns_refuses_a_batch_of_the_wrong_shape(fmt: str) -> None:
    import io

    from export_center.writers import open_writer

    writer = open_writer(fmt, io.BytesIO(), BATCH_COLUMNS)
    six_empty: list[list[Any]] = [[] for _ in BATCH_COLUMNS]
    writer.write_columns(six_empty)  # an empty batch is fine
    with pytest.raises(ValueError, match="expected 6 columns, got 5"):
        writer.write_columns(six_empty[:5])
    with pytest.raises(ValueError, match="differ in length"):
        writer.write_columns([["a"], [1], [None], [None], [None], []])
    writer.write_columns([["a"], [1], [None], [None], [True], [None]])
    assert writer.close().rows == 1
    with pytest.raises(ValueError, match="closed"):
        writer.write_columns([["a"], [1], [None], [None], [True], [None]])
