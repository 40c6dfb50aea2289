"""JSON Lines writer (export_center.writers.jsonl): values read back with ``json.loads``,
the rules of each type, and sharded parts byte-identical to the single writer."""

from __future__ import annotations

import datetime as dt
import io
import json
import random
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.values import DecimalColumn, DecimalText
from export_center.writers import JsonlPartWriter, JsonlWriter, WriterStats, formats, open_writer

COLUMNS = [
    Column("id", "Id", ColumnType.INTEGER),
    Column("name", "名称", ColumnType.STRING, title_zh="名称"),
    Column("price", "Price", ColumnType.DECIMAL),
    Column("day", "Day", ColumnType.DATE),
    Column("at", "At", ColumnType.DATETIME),
    Column("ok", "Ok", ColumnType.BOOLEAN),
]
SHANGHAI = ZoneInfo("Asia/Shanghai")


def _row(i: int) -> list[Any]:
    return [
        i * 10**15,
        f'name "{i}"\n\\ {"张三" if i % 2 else "=1+1"}',
        Decimal(f"{i}.{i % 100:02d}") if i % 3 else DecimalText(f"{i}.40"),
        dt.date(2024, 1, 1) + dt.timedelta(days=i),
        dt.datetime(2024, 3, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i * 3601, microseconds=i),
        i % 2 == 0,
    ]


ROWS = [_row(i) for i in range(40)]


def _columns(rows: list[list[Any]]) -> list[list[Any]]:
    return [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in COLUMNS]


def _write(rows: list[list[Any]], zone: str = "Asia/Shanghai", **kw: Any) -> tuple[bytes, Any]:
    out = io.BytesIO()
    writer = open_writer("jsonl", out, COLUMNS, time_zone=zone, **kw)
    writer.write_columns(_columns(rows))
    stats = writer.close()
    return out.getvalue(), stats


def test_each_row_is_one_object_keyed_by_the_column_keys_with_exact_values() -> None:
    data, stats = _write(ROWS)
    assert not data.startswith(b"\xef\xbb\xbf") and data.endswith(b"\n")
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == len(ROWS) + 1
    for line, row in zip(lines, ROWS, strict=False):
        obj = json.loads(line, parse_int=int)
        assert list(obj) == [c.key for c in COLUMNS]  # keys, in column order, never titles
        assert obj["id"] == row[0] and type(obj["id"]) is int
        assert obj["name"] == row[1]  # no formula guard: data, not a spreadsheet
        assert obj["price"] == format(Decimal(row[2]), "f") and Decimal(obj["price"]) == row[2]
        assert obj["day"] == row[3].isoformat()
        moment = dt.datetime.fromisoformat(obj["at"])
        assert moment == row[4] and moment.utcoffset() == dt.timedelta(hours=8)
        assert obj["ok"] is row[5]
    assert stats.rows == len(ROWS) and stats.sheets == 1 and stats.bytes == len(data)


def test_the_documented_examples() -> None:
    data, _ = _write(
        [
            [
                1,
                "a",
                DecimalText("182210.40"),
                dt.date(2024, 3, 1),
                dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
                True,
            ],
            [None, None, Decimal("1E-8"), None, None, False],
        ]
    )
    assert data.decode() == (
        '{"id":1,"name":"a","price":"182210.40","day":"2024-03-01",'
        '"at":"2024-03-01T08:00:00+08:00","ok":true}\n'
        '{"id":null,"name":null,"price":"0.00000001","day":null,"at":null,"ok":false}\n'
    )


def test_decimal_column_big_integers_nan_and_the_dst_fall_back() -> None:
    columns = [
        Column("n", "N", ColumnType.INTEGER),
        Column("p", "P", ColumnType.DECIMAL),
        Column("t", "T", ColumnType.DATETIME),
    ]
    first = dt.datetime(2024, 11, 3, 5, 30, tzinfo=dt.UTC)  # 01:30-04:00 in New York
    out = io.BytesIO()
    writer = JsonlWriter(out, columns, time_zone="America/New_York")
    writer.write_columns([[2**80, -(2**70)], DecimalColumn(["1.10", "-0.5"]), [first, first]])
    writer.write_columns(
        [[1, 2], [Decimal("NaN"), Decimal("0E-8")], [first + dt.timedelta(hours=1), None]]
    )
    stats = writer.close()
    objects = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [o["n"] for o in objects] == [2**80, -(2**70), 1, 2]
    assert [o["p"] for o in objects] == ["1.10", "-0.5", None, "0.00000000"]
    assert objects[0]["t"] == "2024-11-03T01:30:00-04:00"
    assert objects[2]["t"] == "2024-11-03T01:30:00-05:00"  # the repeated hour keeps apart
    assert stats.invalid_numbers == 1


def test_lone_surrogates_become_ufffd_and_are_counted() -> None:
    out = io.BytesIO()
    writer = JsonlWriter(out, [Column("s", "S")])
    writer.write_columns([["a\ud800b", "\udfff\udfff", "ok", None]])
    stats = writer.close()
    values = [json.loads(line)["s"] for line in out.getvalue().splitlines()]
    assert values == ["a\ufffdb", "\ufffd\ufffd", "ok", None]
    assert stats.replaced_surrogates == stats.replaced_chars == 3


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=8))
def test_any_text_comes_back_from_json_loads(texts: list[str | None]) -> None:
    out = io.BytesIO()
    writer = JsonlWriter(out, [Column("s", "S"), Column("k", "K", ColumnType.INTEGER)])
    writer.write_columns([texts, list(range(len(texts)))])
    writer.close()
    lines = out.getvalue().split(b"\n")
    assert lines[-1] == b"" and len(lines) == len(texts) + 1
    clean = [
        t if t is None else "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in t)
        for t in texts
    ]
    assert [json.loads(line)["s"] for line in lines[:-1]] == clean


@pytest.mark.parametrize("seed", range(6))
def test_shards_cut_anywhere_and_resumed_give_the_single_writers_bytes(seed: int) -> None:
    rnd = random.Random(seed)
    rows = ROWS + [[None, "x\ud800", None, None, None, None]]
    single, single_stats = _write(rows)
    cuts = sorted(rnd.sample(range(len(rows) + 1), 3))
    shards = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    entry = formats.FORMATS["jsonl"]
    parts, stats = [], []
    for shard in shards:
        # each shard in two segments, the second from a resumed writer
        half = rnd.randint(0, len(shard))
        first = io.BytesIO()
        part = entry.open_part(first, COLUMNS, time_zone="Asia/Shanghai", resume_from=None)
        part.write_columns(_columns(shard[:half]))
        checkpoint = WriterStats.from_dict(part.checkpoint().to_dict())
        second = io.BytesIO()
        again = JsonlPartWriter(second, COLUMNS, time_zone="Asia/Shanghai", resume_from=checkpoint)
        again.write_columns(_columns(shard[half:]))
        stats.append(again.checkpoint())
        parts.append([first.getvalue(), second.getvalue()])
    part_stats = WriterStats.total(stats)
    out = io.BytesIO()
    assembled = entry.assemble(out, COLUMNS, parts, part_stats=part_stats, max_bytes=None)
    assert out.getvalue() == single
    assert assembled == single_stats and assembled.replaced_surrogates == 1


def test_the_size_cap_is_enforced_while_writing_and_at_assembly() -> None:
    single, _ = _write(ROWS)
    with pytest.raises(FileTooLarge):
        _write(ROWS, max_bytes=len(single) - 1)
    assert _write(ROWS, max_bytes=len(single))[0] == single
    part = io.BytesIO()
    writer = JsonlPartWriter(part, COLUMNS, time_zone="Asia/Shanghai")
    writer.write_columns(_columns(ROWS))
    stats = writer.checkpoint()
    with pytest.raises(FileTooLarge):
        formats.FORMATS["jsonl"].assemble(
            io.BytesIO(), COLUMNS, [[part.getvalue()]], part_stats=stats, max_bytes=len(single) - 1
        )
    with pytest.raises(ValueError, match="the parts hold"):
        formats.FORMATS["jsonl"].assemble(
            io.BytesIO(), COLUMNS, [[part.getvalue()[:-5]]], part_stats=stats, max_bytes=None
        )


def test_a_failed_writer_writes_nothing_more() -> None:
    out = io.BytesIO()
    writer = JsonlWriter(out, COLUMNS, max_bytes=50)
    with pytest.raises(FileTooLarge):
        writer.write_columns(_columns(ROWS))
    assert out.getvalue() == b""  # the batch that crossed the cap was not passed on
    with pytest.raises(ValueError, match="closed or failed"):
        writer.write_columns(_columns(ROWS[:1]))
    with pytest.raises(ValueError):
        writer.close()
