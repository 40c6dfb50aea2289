"""Parquet writer (export_center.writers.parquet) read back with pyarrow, sharded Parquet
through the format table's part writer and assembler (Arrow IPC parts,
export_center.writers.parquet_parts), and the rows part (export_center.writers.rows)
that split and compressed files of sharded exports are rendered from."""

from __future__ import annotations

import datetime as dt
import io
import random
import re
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge, PermanentExportError
from export_center.values import DecimalColumn, DecimalText
from export_center.writers import (
    ParquetWriter,
    RowsPartWriter,
    WriterStats,
    formats,
    open_writer,
    read_rows_parts,
)
from export_center.writers import parquet as parquet_module

COLUMNS = [
    Column("id", "Id", ColumnType.INTEGER),
    Column("name", "名称", ColumnType.STRING),
    Column("price", "Price", ColumnType.DECIMAL, precision=12, scale=2),
    Column("rate", "Rate", ColumnType.DECIMAL),
    Column("day", "Day", ColumnType.DATE),
    Column("at", "At", ColumnType.DATETIME),
    Column("ok", "Ok", ColumnType.BOOLEAN),
]
ZONE = "Asia/Shanghai"


def _row(i: int) -> list[Any]:
    return [
        i - 2**62 if i % 7 == 0 else i,
        None if i % 11 == 0 else f"name {i} 张三",
        DecimalText(f"{i}.10") if i % 2 else Decimal(f"{i}.1"),
        Decimal(f"0.{i:018d}") if i % 3 else None,
        dt.date(1992, 1, 1) + dt.timedelta(days=i % 3000),
        dt.datetime(2024, 3, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i, microseconds=i),
        i % 2 == 0,
    ]


def _columns(rows: list[list[Any]]) -> list[list[Any]]:
    return [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in COLUMNS]


def _write(rows: list[list[Any]], batch: int = 1000, **kw: Any) -> tuple[bytes, WriterStats]:
    out = io.BytesIO()
    writer = open_writer("parquet", out, COLUMNS, time_zone=ZONE, **kw)
    for start in range(0, len(rows), batch):
        writer.write_columns(_columns(rows[start : start + batch]))
    stats = writer.close()
    return out.getvalue(), stats


ROWS = [_row(i) for i in range(300)]


def test_schema_types_and_exact_values_come_back_from_pyarrow() -> None:
    data, stats = _write(ROWS, batch=70)
    table = pq.read_table(io.BytesIO(data))
    schema = table.schema
    assert schema.names == [c.key for c in COLUMNS]
    assert [f.metadata[b"title"].decode() for f in schema] == [c.title for c in COLUMNS]
    assert schema.field("id").type == pa.int64()
    assert schema.field("name").type == pa.string()
    assert schema.field("price").type == pa.decimal128(12, 2)
    assert schema.field("rate").type == pa.decimal128(38, 18)  # undeclared: the rule
    assert schema.field("day").type == pa.date32()
    assert schema.field("at").type == pa.timestamp("us", tz=ZONE)
    assert schema.field("ok").type == pa.bool_()
    back = table.to_pylist()
    for got, row in zip(back, ROWS, strict=True):
        assert got["id"] == row[0] and got["name"] == row[1]
        assert got["price"] == row[2] and str(got["price"]) == format(Decimal(row[2]), ".2f")
        assert got["rate"] == row[3]
        assert got["day"] == row[4]
        assert got["at"] == row[5] and got["at"].tzinfo == ZoneInfo(ZONE)
        assert got["ok"] is row[6]
    assert stats.rows == len(ROWS) and stats.bytes == len(data) and stats.sheets == 1


def test_row_groups_have_a_fixed_size_and_bytes_depend_only_on_the_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parquet_module, "ROW_GROUP_ROWS", 64)
    files = {_write(ROWS, batch=b)[0] for b in (1, 7, 64, 65, 300)}
    assert len(files) == 1
    meta = pq.ParquetFile(io.BytesIO(files.pop())).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [64] * 4 + [44]


def test_a_value_outside_its_type_fails_naming_row_and_column() -> None:
    cases = [
        (0, 2**63, "row 6, column id: outside int64"),
        (2, Decimal("1.234"), "row 6, column price: more digits than DECIMAL(12, 2)"),
        (2, Decimal("12345678901.5"), "row 6, column price: more digits than DECIMAL(12, 2)"),
        (3, Decimal("1E-19"), "row 6, column rate: more digits than DECIMAL(38, 18)"),
    ]
    for index, value, message in cases:
        out = io.BytesIO()
        writer = ParquetWriter(out, COLUMNS, time_zone=ZONE)
        writer.write_columns(_columns(ROWS[:3]))
        bad = ROWS[3:6]
        bad[2] = list(bad[2])
        bad[2][index] = value
        with pytest.raises(PermanentExportError, match=re.escape(message)) as caught:
            writer.write_columns(_columns(bad))
        assert caught.value.code == "VALUE_NOT_REPRESENTABLE"
        with pytest.raises(ValueError):
            writer.close()  # failed: no footer, the caller deletes the output
    # Trailing zeros beyond the scale are no loss: 1.500 is DECIMAL(12, 2)'s 1.50.
    fine, _ = _write([[1, "a", Decimal("1.500"), None, None, None, None]])
    assert pq.read_table(io.BytesIO(fine)).column("price").to_pylist() == [Decimal("1.50")]


def test_lone_surrogates_and_nan_are_replaced_and_counted() -> None:
    rows = [list(r) for r in ROWS[:3]]
    rows[1][1] = "a\ud800\udfff"
    rows[2][3] = Decimal("NaN")
    data, stats = _write(rows)
    table = pq.read_table(io.BytesIO(data))
    assert table.column("name").to_pylist()[1] == "a\ufffd\ufffd"
    assert table.column("rate").to_pylist()[2] is None
    assert stats.replaced_surrogates == 2 and stats.invalid_numbers == 1


def test_the_size_cap_is_enforced_while_writing() -> None:
    data, _ = _write(ROWS)
    assert _write(ROWS, max_bytes=len(data))[0] == data
    with pytest.raises(FileTooLarge):
        _write(ROWS, max_bytes=len(data) - 1)
    with pytest.raises(FileTooLarge):
        ParquetWriter(io.BytesIO(), COLUMNS, max_bytes=2)  # not even the magic


def test_the_format_says_whether_its_extra_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = formats.FORMATS["parquet"]
    assert entry.available and entry.missing_extra is None and entry.extra == "parquet"
    real = formats.importlib.util.find_spec
    monkeypatch.setattr(
        formats.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "pyarrow" else real(name, *a),
    )
    assert not entry.available
    assert entry.missing_extra == (
        "format parquet needs the optional extra 'parquet': pip install -e '.[parquet]'"
    )
    assert entry.missing_extra_zh is not None and "parquet" in entry.missing_extra_zh
    assert formats.FORMATS["csv"].available  # no extra needed


# ------------------------------------------------------------------ sharded Parquet


def _parts(shards: list[list[list[Any]]], rnd: random.Random) -> tuple[list[list[bytes]], Any]:
    """The format's parts, each shard in segments from resumed writers, and their stats."""
    parts, stats = [], []
    for shard in shards:
        segments: list[bytes] = []
        resume = None
        start = 0
        while True:
            stop = min(len(shard), start + rnd.randint(0, 90))
            out = io.BytesIO()
            part = formats.FORMATS["parquet"].open_part(
                out, COLUMNS, time_zone=ZONE, resume_from=resume
            )
            part.write_columns(_columns(shard[start:stop]))
            resume = WriterStats.from_dict(part.checkpoint().to_dict())
            segments.append(out.getvalue())
            start = stop
            if start == len(shard):
                break
        parts.append(segments)
        stats.append(resume)
    return parts, WriterStats.total(s for s in stats if s is not None)


@pytest.mark.parametrize("seed", range(5))
def test_sharded_parquet_equals_the_single_writer_whatever_the_cuts(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet_module, "ROW_GROUP_ROWS", 50)
    rnd = random.Random(seed)
    single, single_stats = _write(ROWS, batch=rnd.randint(1, 120))
    cuts = sorted(rnd.sample(range(len(ROWS) + 1), rnd.randint(0, 4)))
    bounds = [0, *cuts, len(ROWS)]
    shards = [ROWS[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    parts, part_stats = _parts(shards, rnd)
    assert part_stats.rows == len(ROWS)
    out = io.BytesIO()
    entry = formats.FORMATS["parquet"]
    # Split the stored bytes into chunks that end anywhere, even inside a message.
    chunked = [
        [blob[i : i + 37] for blob in segments for i in range(0, len(blob), 37)]
        for segments in parts
    ]
    stats = entry.assemble(
        out, COLUMNS, chunked, part_stats=part_stats, max_bytes=None, time_zone=ZONE
    )
    assert out.getvalue() == single
    assert stats == single_stats
    with pytest.raises(FileTooLarge):
        entry.assemble(
            io.BytesIO(), COLUMNS, parts, part_stats=part_stats, max_bytes=len(single) - 1,
            time_zone=ZONE,
        )  # fmt: skip


# ------------------------------------------------------------------ the rows part


def _same(value: Any) -> Any:
    """What equality of two stored values means: a Decimal's text (NaN, exponent), an
    aware datetime's instant (PEP 495: ``==`` across zones is False in a fold)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return ("instant", value.astimezone(dt.UTC))
    return value


def test_the_rows_part_gives_back_the_exact_values() -> None:
    columns = [
        Column("s", "S"),
        Column("i", "I", ColumnType.INTEGER),
        Column("d", "D", ColumnType.DECIMAL),
        Column("day", "Day", ColumnType.DATE),
        Column("t", "T", ColumnType.DATETIME),
        Column("b", "B", ColumnType.BOOLEAN),
    ]
    new_york = ZoneInfo("America/New_York")
    second = dt.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=new_york)
    values = [
        ["x\ud800", DecimalText("1.5"), None, '张三\n"q"', 7],
        [2**80, -(2**63), 2**63 - 1, None, True],
        [Decimal("1.10"), DecimalText("2.50"), Decimal("0E-8"), Decimal("NaN"), 3.5],
        [dt.date(2024, 2, 29), None, dt.date(1, 1, 1), dt.datetime(2024, 1, 1, 12), "day"],
        [second, dt.datetime(2024, 3, 1, 8, tzinfo=dt.UTC), None, dt.datetime(2024, 3, 1), 1],
        [True, False, None, 0, "true"],
    ]
    out = io.BytesIO()
    writer = RowsPartWriter(out, columns)
    writer.write_columns(values)
    writer.write_columns(
        [
            DecimalColumn(["1.10"]) if c.type == "DECIMAL" else v[:1]
            for c, v in zip(columns, values, strict=True)
        ]
    )
    writer.close()
    (back,) = read_rows_parts(columns, [[out.getvalue()]])
    for got, sent in zip(back, values, strict=True):
        assert list(map(_same, got[:5])) == list(map(_same, sent))
        assert [type(v) for v in got[:5]] == [type(v) for v in sent]
    assert str(back[2][0]) == "1.10" and str(back[2][2]) == "0E-8" and back[2][3].is_nan()
    assert back[4][0].utcoffset() == dt.timedelta(hours=-5)  # the instant of fold=1
    assert back[4][0].astimezone(dt.UTC) == second.astimezone(dt.UTC)
    assert back[4][3].tzinfo is None
    assert type(back[2][5]) is DecimalText
    batches = list(read_rows_parts(columns, [[out.getvalue()]], batch_rows=2))
    assert [len(b[0]) for b in batches] == [2, 2, 2]
    with pytest.raises(ValueError, match="row 1, column s"):
        RowsPartWriter(io.BytesIO(), columns).write_columns(
            [[b"raw"], [1], [None], [None], [None], [None]]
        )
    with pytest.raises(ValueError, match="ends inside a batch"):
        list(read_rows_parts(columns, [[out.getvalue()[:-1]]]))
