"""Parquet shard parts (export_center.writers.parquet_parts): Arrow IPC record batches per
shard, resumed at checkpoints, assembled into the file a single ParquetWriter writes of
all rows, byte for byte, whatever the shards, segments and batches."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import tracemalloc
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge, PermanentExportError
from export_center.values import DecimalColumn, DecimalText
from export_center.writers import (
    ParquetPartWriter,
    ParquetWriter,
    RowsPartWriter,
    WriterStats,
    assemble_parquet,
    formats,
)
from export_center.writers import parquet as parquet_module

T = ColumnType
ZONE = "America/New_York"
COLUMNS = [
    Column("id", "Id", T.INTEGER),
    Column("s", "名称", T.STRING),
    Column("price", "Price", T.DECIMAL, precision=12, scale=2),
    Column("rate", "Rate", T.DECIMAL),
    Column("ok", "Ok", T.BOOLEAN),
    Column("day", "Day", T.DATE),
    Column("at", "At", T.DATETIME),
]

Batch = list[list[Any]]

# --- values every Parquet type holds (and the ones it replaces and counts) --------------

texts = st.text(st.sampled_from("ab ,\n\"'\x00\ud800\udfff😀中"), max_size=12)
prices = st.builds(
    lambda cents: Decimal(cents).scaleb(-2), st.integers(-(10**10) + 1, 10**10 - 1)
) | st.builds(lambda cents: DecimalText(f"{cents}.5"), st.integers(0, 10**6))
rates = st.builds(
    lambda digits, places: Decimal(digits).scaleb(-places),
    st.integers(-(10**19), 10**19),
    st.integers(0, 18),
) | st.sampled_from([Decimal("NaN"), float("inf"), 3, 2.5])
moments = st.datetimes(
    min_value=dt.datetime(1900, 1, 1),
    max_value=dt.datetime(9999, 12, 30),
    timezones=st.sampled_from([dt.UTC, ZoneInfo(ZONE), ZoneInfo("Asia/Kolkata")]),
)
rows = st.lists(
    st.tuples(
        st.none() | texts,
        st.none() | prices,
        st.none() | rates,
        st.none() | st.booleans(),
        st.none() | st.dates(min_value=dt.date(1, 1, 1)),
        st.none() | moments,
    ),
    max_size=40,
)


def numbered(values: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    """Rows with their position first (the ``id`` column)."""
    return [[number, *row] for number, row in enumerate(values, start=1)]


def columns_of(part_rows: Sequence[Sequence[Any]]) -> Batch:
    return [list(c) for c in zip(*part_rows, strict=True)] if part_rows else [[] for _ in COLUMNS]


def cut(total: int, points: Sequence[int]) -> list[tuple[int, int]]:
    bounds = [0, *sorted(p for p in points if 0 < p < total), total]
    return list(zip(bounds, bounds[1:], strict=False))


def single_file(all_rows: list[list[Any]], batch_points: Sequence[int]) -> tuple[bytes, Any]:
    out = io.BytesIO()
    writer = ParquetWriter(out, COLUMNS, time_zone=ZONE)
    for start, stop in cut(len(all_rows), batch_points):
        writer.write_columns(columns_of(all_rows[start:stop]))
    stats = writer.close()
    return out.getvalue(), stats


def write_part(batches: Sequence[Batch], resume_at: Sequence[int]) -> tuple[list[bytes], Any]:
    """One shard's part as its stored segments: before each batch index in
    ``resume_at`` the writer checkpoints (a segment ends) and a new writer resumes
    from the checkpoint's stats as stored (JSON)."""
    segments: list[bytes] = []
    out = io.BytesIO()
    writer = ParquetPartWriter(out, COLUMNS, time_zone=ZONE)
    for index, batch in enumerate(batches):
        if index in resume_at:
            stored = json.dumps(writer.checkpoint().to_dict())
            segments.append(out.getvalue())
            out = io.BytesIO()
            writer = ParquetPartWriter(
                out, COLUMNS, time_zone=ZONE, resume_from=WriterStats.from_dict(json.loads(stored))
            )
        writer.write_columns(batch)
    stats = writer.close()
    segments.append(out.getvalue())
    assert stats.bytes == sum(map(len, segments))
    return segments, stats


def chunks(segments: Sequence[bytes], size: int) -> Iterator[bytes]:
    """The segments read back in chunks of ``size`` bytes (ending anywhere), plus empty ones."""
    for segment in segments:
        yield b""
        for start in range(0, len(segment), size):
            yield segment[start : start + size]


# --- byte identity ---------------------------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=rows, data=st.data())
def test_the_assembled_file_is_the_single_writers_whatever_the_cuts(
    values: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    all_rows = numbered(values)
    group = data.draw(st.integers(1, 9), label="row group rows")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_module, "ROW_GROUP_ROWS", group)
        single, single_stats = single_file(
            all_rows, data.draw(st.lists(st.integers(0, len(all_rows)), max_size=5))
        )
        shard_points = data.draw(st.lists(st.integers(0, len(all_rows)), max_size=4))
        parts, stats = [], []
        for start, stop in cut(len(all_rows), shard_points):
            shard = all_rows[start:stop]
            points = data.draw(st.lists(st.integers(0, len(shard)), max_size=4))
            batches = [columns_of(shard[a:b]) for a, b in cut(len(shard), points)]
            resume_at = data.draw(st.sets(st.integers(0, len(batches))), label="resume")
            segments, part_stats = write_part(batches, sorted(resume_at))
            parts.append(chunks(segments, data.draw(st.integers(1, 300), label="chunk")))
            stats.append(part_stats)
        out = io.BytesIO()
        got = formats.FORMATS["parquet"].assemble(
            out,
            COLUMNS,
            parts,
            part_stats=WriterStats.total(stats),
            max_bytes=None,
            time_zone=ZONE,
        )
    assert out.getvalue() == single
    assert got == single_stats
    table = pq.read_table(io.BytesIO(single))
    assert table.column("id").to_pylist() == [row[0] for row in all_rows]


def test_resumed_parts_hold_one_schema_and_the_same_bytes() -> None:
    batches = [
        columns_of(numbered([("a", Decimal("1.50"), None, True, None, None)] * n))
        for n in (3, 0, 5, 2)
    ]
    whole, whole_stats = write_part(batches, [])
    for resume_at in ([0], [1], [2, 3], [0, 1, 2, 3, 4], [4]):
        segments, stats = write_part(batches, resume_at)
        assert b"".join(segments) == b"".join(whole) and stats == whole_stats
    part = b"".join(whole)
    reader = pa.ipc.open_stream(part)  # a plain Arrow IPC stream, no end marker needed
    assert reader.schema.field("at").type == pa.timestamp("us", tz=ZONE)
    assert reader.schema.field("s").metadata == {b"title": "名称".encode()}
    assert [b.num_rows for b in reader] == [3, 5, 2]
    assert whole_stats.rows == 10 and whole_stats.sheets == 0


def test_counts_of_the_parts_are_the_files_counts() -> None:
    values = numbered(
        [
            ("a\ud800b\udfff", None, Decimal("NaN"), None, None, None),
            (None, None, float("-inf"), None, None, None),
            ("ok", None, None, None, None, None),
        ]
    )
    single, single_stats = single_file(values, [])
    assert (single_stats.replaced_surrogates, single_stats.invalid_numbers) == (2, 2)
    first, first_stats = write_part([columns_of(values[:1])], [])
    second, second_stats = write_part([columns_of(values[1:])], [])
    out = io.BytesIO()
    stats = assemble_parquet(
        out,
        COLUMNS,
        [first, second],
        part_stats=first_stats + second_stats,
        time_zone=ZONE,
    )
    assert out.getvalue() == single and stats == single_stats
    assert stats.replaced_chars == 2
    back = pq.read_table(io.BytesIO(single))
    assert back.column("s").to_pylist() == ["a\ufffdb\ufffd", None, "ok"]
    assert back.column("rate").to_pylist() == [None, None, None]


def test_no_rows_and_empty_parts_make_the_empty_file() -> None:
    single, single_stats = single_file([], [])
    empty_part, empty_stats = write_part([], [])
    assert len(b"".join(empty_part)) > 0  # the schema message
    out = io.BytesIO()
    stats = assemble_parquet(
        out, COLUMNS, [empty_part, [], [b""]], part_stats=empty_stats, time_zone=ZONE
    )
    assert (out.getvalue(), stats) == (single, single_stats)
    assert pq.read_table(io.BytesIO(single)).num_rows == 0


def test_the_real_row_group_size_across_shards() -> None:
    size = parquet_module.ROW_GROUP_ROWS
    total = 2 * size + 1_234
    comment = [f"{i:07d} {'xyz' * (i % 50)}" for i in range(total)]

    def batch(start: int, stop: int) -> Batch:
        return [
            list(range(start, stop)),
            comment[start:stop],
            DecimalColumn(f"{i % 100_000}.{i % 100:02d}" for i in range(start, stop)),
            [None] * (stop - start),
            [i % 3 == 0 for i in range(start, stop)],
            [dt.date(1992, 1, 1) + dt.timedelta(days=i % 2_400) for i in range(start, stop)],
            [
                dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i)
                for i in range(start, stop)
            ],
        ]

    out = io.BytesIO()
    writer = ParquetWriter(out, COLUMNS, time_zone=ZONE)
    writer.write_columns(batch(0, total))
    single_stats = writer.close()
    parts, stats = [], []
    for start, stop in cut(total, [7_000, 20_001]):
        points = list(range(start + 5_000, stop, 5_000))
        batches = [batch(a, b) for a, b in zip([start, *points], [*points, stop], strict=True)]
        segments, part_stats = write_part(batches, [1])
        parts.append(chunks(segments, 65_536))
        stats.append(part_stats)
    assembled = io.BytesIO()
    got = assemble_parquet(
        assembled, COLUMNS, parts, part_stats=WriterStats.total(stats), time_zone=ZONE
    )
    assert assembled.getvalue() == out.getvalue() and got == single_stats
    meta = pq.ParquetFile(io.BytesIO(out.getvalue())).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [size, size, 1_234]


# --- errors ----------------------------------------------------------------------------


def _part(n: int = 20) -> tuple[bytes, WriterStats]:
    segments, stats = write_part(
        [columns_of(numbered([("x" * 30, None, None, None, None, None)] * n))], []
    )
    return b"".join(segments), stats


def test_a_value_outside_its_type_fails_the_part_naming_the_parts_row() -> None:
    writer = ParquetPartWriter(io.BytesIO(), COLUMNS, time_zone=ZONE)
    writer.write_columns(columns_of(numbered([(None,) * 6] * 4)))
    bad = numbered([(None,) * 6] * 3)
    bad[1][2] = Decimal("1.234")
    with pytest.raises(PermanentExportError, match=r"row 6, column price: more digits") as caught:
        writer.write_columns(columns_of(bad))
    assert caught.value.code == "VALUE_NOT_REPRESENTABLE"
    with pytest.raises(ValueError, match="failed"):
        writer.checkpoint()


def test_malformed_parts_are_refused_naming_the_shard() -> None:
    part, stats = _part()
    good = io.BytesIO()
    assemble_parquet(good, COLUMNS, [[part]], part_stats=stats, time_zone=ZONE)
    cases: list[tuple[list[list[bytes]], str]] = [
        ([[part], [part[:-5]]], "part of shard 2 ends inside a record batch"),
        ([[part[:3]]], "part of shard 1 is no Arrow IPC stream"),
        ([[part[:40]]], "part of shard 1 is no Arrow IPC stream"),
        ([[b'[1,"x",null]\n']], "part of shard 1 is no Arrow IPC stream"),
        ([[part + b"\xff\xff\xff\xff\x00\x00\x00\x00" + b"more"]], "holds bytes after its end"),
    ]
    for parts, message in cases:
        with pytest.raises(ValueError, match=message):
            assemble_parquet(io.BytesIO(), COLUMNS, parts, part_stats=stats, time_zone=ZONE)
    other_zone = io.BytesIO()
    ParquetPartWriter(other_zone, COLUMNS, time_zone="UTC").close()
    with pytest.raises(ValueError, match="part of shard 2 has another schema"):
        assemble_parquet(
            io.BytesIO(),
            COLUMNS,
            [[part], [other_zone.getvalue()]],
            part_stats=stats,
            time_zone=ZONE,
        )
    with pytest.raises(ValueError, match="the Parquet parts hold 20 rows, their stats 21"):
        assemble_parquet(
            io.BytesIO(),
            COLUMNS,
            [[part]],
            part_stats=dataclasses.replace(stats, rows=21),
            time_zone=ZONE,
        )
    with pytest.raises(ValueError, match="another schema"):
        ParquetWriter(io.BytesIO(), COLUMNS, time_zone="UTC").write_record_batch(
            next(iter(pa.ipc.open_stream(part)))
        )


def test_an_error_of_the_source_reaches_the_caller_as_it_is() -> None:
    """A storage error or a cancel while a part is read is not a malformed part."""
    part, stats = _part()

    class Cancelled(Exception):
        pass

    def failing(after: int, error: BaseException) -> Iterator[bytes]:
        yield part[:after]
        raise error

    for after, error in ((10, ConnectionResetError("reset")), (len(part), Cancelled("stop"))):
        with pytest.raises(type(error)) as caught:
            assemble_parquet(
                io.BytesIO(), COLUMNS, [failing(after, error)], part_stats=stats, time_zone=ZONE
            )
        assert caught.value is error


def test_every_chunk_of_a_part_is_read() -> None:
    """The finalize checks a part's CRC-32 after its last chunk: the assembler must ask."""
    part, stats = _part()
    read: list[int] = []

    def tracked() -> Iterator[bytes]:
        for start in range(0, len(part), 100):
            read.append(start)
            yield part[start : start + 100]
        read.append(-1)  # exhausted

    assemble_parquet(io.BytesIO(), COLUMNS, [tracked()], part_stats=stats, time_zone=ZONE)
    assert read[-1] == -1 and len(read) == len(range(0, len(part), 100)) + 1


def test_the_size_caps() -> None:
    part, stats = _part()
    file = io.BytesIO()
    assemble_parquet(file, COLUMNS, [[part]], part_stats=stats, time_zone=ZONE)
    size = len(file.getvalue())
    capped = io.BytesIO()
    assemble_parquet(capped, COLUMNS, [[part]], part_stats=stats, max_bytes=size, time_zone=ZONE)
    assert capped.getvalue() == file.getvalue()
    with pytest.raises(FileTooLarge):
        assemble_parquet(
            io.BytesIO(), COLUMNS, [[part]], part_stats=stats, max_bytes=size - 1, time_zone=ZONE
        )
    first = ParquetPartWriter(io.BytesIO(), COLUMNS, time_zone=ZONE)
    first.write_columns(columns_of(numbered([("y" * 100, None, None, None, None, None)])))
    earlier = first.checkpoint()
    resumed = ParquetPartWriter(
        io.BytesIO(), COLUMNS, time_zone=ZONE, max_bytes=earlier.bytes + 50, resume_from=earlier
    )
    with pytest.raises(FileTooLarge):
        resumed.write_columns(columns_of(numbered([("z" * 100, None, None, None, None, None)])))
    with pytest.raises(FileTooLarge):
        ParquetPartWriter(io.BytesIO(), COLUMNS, max_bytes=10)  # not even the schema


def test_the_format_table_opens_the_arrow_part() -> None:
    entry = formats.FORMATS["parquet"]
    out = io.BytesIO()
    writer = entry.open_part(out, COLUMNS, time_zone=ZONE, resume_from=None)
    assert isinstance(writer, ParquetPartWriter) and not isinstance(writer, RowsPartWriter)
    writer.write_columns(columns_of(numbered([("a", None, None, None, None, None)])))
    writer.close()
    assert pa.ipc.open_stream(out.getvalue()).read_all().column("s").to_pylist() == ["a"]


def test_assembly_holds_one_row_group_not_the_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory while a part of 20 row groups is assembled: the Python objects (the bytes
    read from the part, which Arrow's buffers of a read batch are) at their peak, plus
    Arrow's pool at every batch handed over, stay near one row group and one batch."""
    monkeypatch.setattr(parquet_module, "ROW_GROUP_ROWS", 2_000)
    batches = [
        columns_of(numbered([("c" * 200, None, None, None, None, None)] * 500)) for _ in range(80)
    ]
    segments, stats = write_part(batches, [])
    part = b"".join(segments)
    pool: list[int] = []
    real = ParquetWriter.write_record_batch

    def measured(self: ParquetWriter, batch: Any) -> None:
        real(self, batch)
        pool.append(pa.total_allocated_bytes())

    monkeypatch.setattr(ParquetWriter, "write_record_batch", measured)
    pool_before = pa.total_allocated_bytes()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        assemble_parquet(
            io.BytesIO(), COLUMNS, [chunks([part], 65_536)], part_stats=stats, time_zone=ZONE
        )
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    group_bytes = 2_000 * 210  # rows x (200 characters, an id, offsets)
    assert len(pool) == 80
    assert peak + max(pool) - pool_before < 4 * group_bytes < len(part) / 5
