"""The rows part (export_center.writers.rows): a shard's typed rows stored one JSON line per
batch and read back with the exact values, whatever the shards, resumes, chunk cuts and
read batch sizes."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from export_center.values import DecimalColumn, DecimalText
from export_center.writers import RowsPartWriter, WriterStats, read_rows_parts

T = ColumnType
COLUMNS = [
    Column("s", "S", T.STRING),
    Column("i", "I", T.INTEGER),
    Column("d", "D", T.DECIMAL),
    Column("b", "B", T.BOOLEAN),
    Column("day", "Day", T.DATE),
    Column("at", "At", T.DATETIME),
]
SHANGHAI = ZoneInfo("Asia/Shanghai")  # local mean time +08:05:43 before 1901
NEW_YORK = ZoneInfo("America/New_York")

# --- values: each column's own type mostly, and every other kind now and then ----------

texts = st.text(st.sampled_from('ab ,\n"\\[]{}\x00\ud800\udfff😀中'), max_size=8)
decimal_texts = st.builds(
    lambda n, places: DecimalText(format(Decimal(n).scaleb(-places), "f")),
    st.integers(-(10**12), 10**12),
    st.integers(0, 6),
)
decimals = st.sampled_from([Decimal("1.10"), Decimal("0E-8"), Decimal("NaN"), Decimal("-1E+3")])
offsets = st.sampled_from(
    [
        dt.UTC,
        NEW_YORK,
        SHANGHAI,
        dt.timezone(dt.timedelta(hours=5, minutes=30)),
        dt.timezone(dt.timedelta(seconds=-3_599, microseconds=7)),
    ]
)
moments = (
    st.datetimes(
        min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=offsets
    )
    | st.datetimes(min_value=dt.datetime(1880, 1, 1), max_value=dt.datetime(1905, 1, 1)).map(
        lambda naive: naive.replace(tzinfo=SHANGHAI)  # LMT: an offset with seconds
    )
    | st.sampled_from([dt.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK)])
)
naive = st.datetimes(min_value=dt.datetime(1, 1, 1))
dates = st.dates(min_value=dt.date(1, 1, 1))
integers = st.integers(-(2**63), 2**63 - 1)
others = st.one_of(
    texts,
    decimal_texts,
    decimals,
    st.integers(-(2**80), 2**80),
    st.booleans(),
    st.floats(allow_nan=True),
    dates,
    moments,
    naive,
)
OWN = {
    "s": texts,
    "i": integers,
    "d": decimal_texts,
    "b": st.booleans(),
    "day": dates,
    "at": moments | naive,
}


def column_values(key: str, rows: int) -> st.SearchStrategy[list[Any]]:
    """A column of ``rows`` values: all its own type, with None, or with anything."""
    return st.one_of(
        st.lists(OWN[key], min_size=rows, max_size=rows),
        st.lists(st.none() | OWN[key], min_size=rows, max_size=rows),
        st.lists(st.none() | OWN[key] | others, min_size=rows, max_size=rows),
    )


@st.composite
def batches(draw: st.DrawFn) -> list[list[Any]]:
    rows = draw(st.integers(0, 8))
    batch: list[Any] = [draw(column_values(c.key, rows)) for c in COLUMNS]
    if rows and draw(st.booleans()):  # the converter's mark for an all-plain DECIMAL column
        batch[2] = DecimalColumn(draw(st.lists(decimal_texts, min_size=rows, max_size=rows)))
    return batch


def same(value: Any) -> Any:
    """What exact means: the type, a Decimal's text (NaN, exponent), a float's repr, an
    aware datetime's instant and offset (``==`` across zones is False in a fold)."""
    if isinstance(value, Decimal | float):
        return (type(value), repr(value))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return ("aware", value.astimezone(dt.UTC), value.utcoffset())
    return (type(value), value)


def write_part(shard: Sequence[list[list[Any]]], resume_at: set[int]) -> tuple[list[bytes], Any]:
    """One shard's part as its stored segments, the writer resumed from its checkpoint
    (stored as JSON) before each batch index in ``resume_at``."""
    segments: list[bytes] = []
    out = io.BytesIO()
    writer = RowsPartWriter(out, COLUMNS)
    for index, batch in enumerate(shard):
        if index in resume_at:
            stored = json.dumps(writer.checkpoint().to_dict())
            segments.append(out.getvalue())
            out = io.BytesIO()
            writer = RowsPartWriter(
                out, COLUMNS, resume_from=WriterStats.from_dict(json.loads(stored))
            )
        writer.write_columns(batch)
    stats = writer.close()
    segments.append(out.getvalue())
    assert stats.bytes == sum(map(len, segments))
    return segments, stats


def cut(data: bytes, points: Sequence[int]) -> Iterator[bytes]:
    bounds = [0, *sorted(points), len(data)]
    for start, stop in zip(bounds, bounds[1:], strict=False):
        yield data[start:stop]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shards=st.lists(st.lists(batches(), max_size=4), min_size=1, max_size=4),
    batch_rows=st.integers(1, 12),
    data=st.data(),
)
def test_the_rows_come_back_exactly_whatever_the_cuts(
    shards: list[list[list[list[Any]]]], batch_rows: int, data: st.DataObject
) -> None:
    parts = []
    for shard in shards:
        resume_at = data.draw(st.sets(st.integers(0, len(shard))), label="resume")
        segments, stats = write_part(shard, resume_at)
        assert stats.rows == sum(len(batch[0]) for batch in shard)
        whole = b"".join(segments)
        parts.append(cut(whole, data.draw(st.lists(st.integers(0, len(whole)), max_size=5))))
    back = list(read_rows_parts(COLUMNS, parts, batch_rows=batch_rows))
    sent = [batch for shard in shards for batch in shard]
    total = sum(len(batch[0]) for batch in sent)
    sizes = [min(batch_rows, total - start) for start in range(0, total, batch_rows)]
    assert [len(batch[0]) for batch in back] == sizes
    for index, column in enumerate(COLUMNS):
        # The texts of a DecimalColumn are DecimalText values (the column is marked once).
        sent_values = [same(v) for b in sent for v in marked(b[index])]
        got_values = [same(v) for b in back for v in marked(b[index])]
        assert got_values == sent_values, column.key


def marked(values: Sequence[Any]) -> list[Any]:
    return list(map(DecimalText, values)) if type(values) is DecimalColumn else list(values)


def test_offsets_with_seconds_and_folds_keep_instant_and_offset() -> None:
    values = [
        dt.datetime(1900, 1, 1, tzinfo=SHANGHAI),  # +08:05:43
        dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(seconds=1, microseconds=7))),
        dt.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK),
        dt.datetime(2024, 11, 3, 1, 30, fold=0, tzinfo=NEW_YORK),
        dt.datetime(999, 1, 1, 0, 0, 0, 5),
    ]
    columns = [Column("at", "At", T.DATETIME)]
    out = io.BytesIO()
    writer = RowsPartWriter(out, columns)
    writer.write_columns([values])
    writer.write_columns([values[2:]])  # whole minutes only: orjson writes the column
    writer.close()
    (back,) = read_rows_parts(columns, [[out.getvalue()]])
    assert [(v.astimezone(dt.UTC), v.utcoffset()) for v in back[0][:4]] == [
        (v.astimezone(dt.UTC), v.utcoffset()) for v in values[:4]
    ]
    assert back[0][0].utcoffset() == dt.timedelta(hours=8, minutes=5, seconds=43)
    assert back[0][4] == values[4] and back[0][4].tzinfo is None
    assert [(v.astimezone(dt.UTC), v.utcoffset()) for v in back[0][5:7]] == [
        (v.astimezone(dt.UTC), v.utcoffset()) for v in values[2:4]
    ]
    assert back[0][5].utcoffset() == dt.timedelta(hours=-5) and back[0][7] == values[4]


def test_one_line_per_batch_and_surrogates_in_any_column() -> None:
    out = io.BytesIO()
    writer = RowsPartWriter(out, COLUMNS)
    batch = [
        ["a\ud800", "b"],
        [1, 2**70],
        DecimalColumn(["1.50", "-0.01"]),
        [True, None],
        [dt.date(2024, 2, 29), "x\udfff"],  # a tagged str with a lone surrogate
        [None, dt.datetime(2024, 3, 1, 8, tzinfo=dt.UTC)],
    ]
    writer.write_columns(batch)
    writer.write_columns([[v] for v in ["c", 3, DecimalText("2"), False, dt.date(1, 1, 1), None]])
    writer.close()
    lines = out.getvalue().split(b"\n")
    assert len(lines) == 3 and lines[-1] == b""
    assert b'{"z":"61eda080"}' in lines[0] and b'{"z":"78edbfbf"}' in lines[0]
    assert lines[1] == b'[["c"],[3],["2"],[false],["0001-01-01"],[null]]'
    (back,) = read_rows_parts(COLUMNS, [[out.getvalue()]])
    assert back[0] == ["a\ud800", "b", "c"] and back[1] == [1, 2**70, 3]
    assert back[2] == ["1.50", "-0.01", "2"] and type(back[2]) is DecimalColumn
    assert back[4] == [dt.date(2024, 2, 29), "x\udfff", dt.date(1, 1, 1)]
    assert back[5][1] == dt.datetime(2024, 3, 1, 8, tzinfo=dt.UTC)


def test_an_all_plain_decimal_column_stays_marked_across_batches() -> None:
    out = io.BytesIO()
    writer = RowsPartWriter(out, COLUMNS)
    for texts in (["1.10", "2"], ["3.5"], ["4", "5", "6"]):
        writer.write_columns(
            [["s"] * len(texts), [1] * len(texts), DecimalColumn(texts)] + [[None] * len(texts)] * 3
        )
    writer.close()
    back = list(read_rows_parts(COLUMNS, [[out.getvalue()]], batch_rows=4))
    assert [type(b[2]) for b in back] == [DecimalColumn, DecimalColumn]
    assert [list(b[2]) for b in back] == [["1.10", "2", "3.5", "4"], ["5", "6"]]


def test_values_that_cannot_be_stored_and_malformed_parts() -> None:
    with pytest.raises(ValueError, match="row 3, column i: a bytes value cannot be stored"):
        writer = RowsPartWriter(io.BytesIO(), COLUMNS)
        writer.write_columns([["a", "b"], [1, 2]] + [[None, None]] * 4)
        writer.write_columns([["c"], [b"raw"]] + [[None]] * 4)
    out = io.BytesIO()
    writer = RowsPartWriter(out, COLUMNS)
    writer.write_columns([["a"], [1], [None], [None], [None], [None]])
    part = out.getvalue()
    with pytest.raises(ValueError, match="the rows part of shard 2 ends inside a batch"):
        list(read_rows_parts(COLUMNS, [[part], [part[:-1]]]))
    for line in (
        b'["a",1,null,null,null,null]\n',
        b'[["a"],[1]]\n',
        b'[["a"],[1,2],[],[],[],[]]\n',
    ):
        with pytest.raises(ValueError, match="a stored batch is not 6 columns of one length"):
            list(read_rows_parts(COLUMNS, [[line]]))
    with pytest.raises(ValueError, match="batch_rows must be >= 1"):
        list(read_rows_parts(COLUMNS, [[part]], batch_rows=0))
