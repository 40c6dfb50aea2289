"""Parquet row groups at the writer's real size (export_center.writers.parquet): cut by
row count alone, and the file's bytes independent of how the batches arrive, also when
a column chunk spans several data pages (the monkeypatched sizes of
test_parquet_writer.py make one page per chunk)."""

from __future__ import annotations

import datetime as dt
import io
import random
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq

from export_center.columns import Column, ColumnType
from export_center.values import DecimalColumn
from export_center.writers import open_writer
from export_center.writers import parquet as parquet_module

COLUMNS = [
    Column("id", "Id", ColumnType.INTEGER),
    Column("comment", "Comment", ColumnType.STRING),
    Column("status", "Status", ColumnType.STRING),
    Column("price", "Price", ColumnType.DECIMAL, precision=15, scale=2),
    Column("day", "Day", ColumnType.DATE),
]
ROWS = parquet_module.ROW_GROUP_ROWS * 2 + 1_234


_RANDOM = random.Random(23)
_TEXTS = ["".join(_RANDOM.choices("abcdefgh ijk", k=200)) for _ in range(1_000)]


def _columns(start: int, stop: int) -> list[Any]:
    return [
        list(range(start, stop)),
        # ~200 characters a row, each row's own: far more than one 1 MB data page per
        # chunk, and too many distinct values for the dictionary (plain pages follow).
        [None if i % 97 == 0 else f"{i:08d} {_TEXTS[i % 1_000]}" for i in range(start, stop)],
        [("O", "F", "P")[i % 3] for i in range(start, stop)],
        DecimalColumn(f"{i * 7 % 100_000}.{i % 100:02d}" for i in range(start, stop)),
        [dt.date(1992, 1, 1) + dt.timedelta(days=i % 2_400) for i in range(start, stop)],
    ]


def _file(batch_rows: list[int]) -> bytes:
    """The file of ROWS rows written in batches of the given sizes, cycled."""
    out = io.BytesIO()
    writer = open_writer("parquet", out, COLUMNS, time_zone="UTC")
    start, turn = 0, 0
    while start < ROWS:
        stop = min(ROWS, start + batch_rows[turn % len(batch_rows)])
        writer.write_columns(_columns(start, stop))
        start, turn = stop, turn + 1
    writer.close()
    return out.getvalue()


def test_bytes_do_not_depend_on_the_batches_at_the_real_row_group_size() -> None:
    one = _file([ROWS])
    assert _file([5_000]) == one
    assert _file([1, 4_095, 17_000, 333]) == one
    meta = pq.ParquetFile(io.BytesIO(one)).metadata
    size = parquet_module.ROW_GROUP_ROWS
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [size, size, 1_234]
    comment = meta.row_group(0).column(1)
    # The comment chunk is several data pages (more bytes than one 1 MB page holds).
    assert comment.total_uncompressed_size > 2 * 1024 * 1024
    table = pq.read_table(io.BytesIO(one))
    assert table.num_rows == ROWS
    assert table.column("id").to_pylist()[-1] == ROWS - 1
    assert table.column("price").to_pylist()[12_345] == Decimal("86415.45")


def test_the_memory_freed_is_given_back_after_each_row_group() -> None:
    """``release_unused`` after every group written (the last, at close, too), so a
    group's freed buffers do not stay resident beside the next one's."""

    class Pool:
        calls: list[int] = []

        def release_unused(self) -> None:
            self.calls.append(writer._stats.rows)

    out = io.BytesIO()
    writer = open_writer("parquet", out, COLUMNS, time_zone="UTC")
    writer._pool = Pool()  # type: ignore[attr-defined]
    for start in range(0, ROWS, 5_000):
        writer.write_columns(_columns(start, min(ROWS, start + 5_000)))
    writer.close()
    size = parquet_module.ROW_GROUP_ROWS
    assert Pool.calls == [size, 2 * size, ROWS]
