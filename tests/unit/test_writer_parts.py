"""Shard parts and their assembly (export_center.writers.parts): the file made from any
split into shards, batches and segments is byte for byte the single writer's."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import random
import re
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpyxl import load_workbook

from export_center.columns import Column, ColumnType
from export_center.errors import FileTooLarge
from export_center.values import DecimalColumn
from export_center.writers import (
    CsvPartWriter,
    CsvWriter,
    WriterStats,
    XlsxFragmentWriter,
    XlsxWriter,
    assemble_csv,
    assemble_xlsx,
    csv_head,
    csv_stats,
    xlsx,
)
from tests.unit.writer_helpers import FORMULA_LIKE, frozen_package_time

ZONE = "America/New_York"
NEW_YORK = ZoneInfo(ZONE)
T = ColumnType
COLUMNS = [
    Column("id", "Id", T.INTEGER),
    Column("s", "Name \x07 =1+1", T.STRING),  # a control character and a formula
    Column("i", "Count", T.INTEGER),
    Column("d", "Amount \udc80", T.DECIMAL),  # a lone surrogate: counted once, in the head
    Column("b", "Flag", T.BOOLEAN),
    Column("day", "Day", T.DATE),
    Column("at", "At", T.DATETIME),
]
ROW_RE = re.compile(rb'<row r="(\d+)"')

Rows = list[dict[str, Any]]
PartWriter = CsvPartWriter | XlsxFragmentWriter

# --- values: the nasty ones of the writer tests ----------------------------------------

texts = st.one_of(
    st.text(
        st.sampled_from("ab =+-@\t\r\n\x00\x07\x16\ufffe\uffff\ud800😀中_x0041&<>\"',"),
        max_size=20,
    ),
    st.sampled_from(["x" * 40_000, "😀" * 20_000, "<row>", "</row>", "", *FORMULA_LIKE, "000123"]),
)
integers = st.integers(min_value=-(10**20), max_value=10**20) | st.sampled_from(
    [0, 999_999_999_999_999, 10**15, 9_912_140_633_506_421]
)
decimals = st.builds(
    lambda digits, places: Decimal(digits).scaleb(-places),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.integers(min_value=0, max_value=18),
) | st.sampled_from(
    [Decimal("-5.00"), Decimal("1E-8"), Decimal("1E+3"), Decimal("NaN"), float("inf")]
)
dates = st.dates(min_value=dt.date(1899, 12, 1), max_value=dt.date(9999, 12, 31))
# The DST fall-back of 2024-11-03 in New York repeats 01:00-01:59 (written with offset).
fall_back = [
    dt.datetime(2024, 11, 3, 5, 30, tzinfo=dt.UTC),
    dt.datetime(2024, 11, 3, 6, 30, tzinfo=dt.UTC),
    dt.datetime(2024, 3, 10, 7, 30, tzinfo=dt.UTC),
]
datetimes = st.datetimes(
    min_value=dt.datetime(1899, 12, 30),
    max_value=dt.datetime(9999, 12, 30),
    timezones=st.sampled_from([dt.UTC, NEW_YORK, ZoneInfo("Asia/Kolkata")]),
) | st.sampled_from(fall_back)
row_values = st.fixed_dictionaries(
    {},
    optional={
        "s": st.none() | texts,
        "i": st.none() | integers,
        "d": st.none() | decimals,
        "b": st.none() | st.booleans(),
        "day": st.none() | dates,
        "at": st.none() | datetimes,
    },
)


def numbered(rows: Sequence[Mapping[str, Any]]) -> Rows:
    """The rows with their position in the ``id`` column (to check the order back)."""
    return [{**row, "id": number} for number, row in enumerate(rows, start=1)]


def cut(total: int, points: Sequence[int]) -> list[tuple[int, int]]:
    """``[0, total)`` cut at ``points`` (any order, repeats allowed) into ranges."""
    bounds = [0, *sorted(p for p in points if 0 < p < total), total]
    return list(zip(bounds, bounds[1:], strict=False))


def segments(data: bytes, points: Sequence[int]) -> Iterator[bytes]:
    """``data`` cut at byte ``points``, empty chunks included, read lazily."""
    bounds = [0, *sorted(points), len(data)]
    for start, stop in zip(bounds, bounds[1:], strict=False):
        yield data[start:stop]


def write_part(
    make: Callable[[io.BytesIO, WriterStats | None], PartWriter],
    batches: Sequence[Rows],
    resume_at: int | None = None,
) -> tuple[bytes, WriterStats]:
    """Write one shard's part; before batch ``resume_at`` the writer stops at a checkpoint
    and a new one resumes from the stats stored as JSON. Returns the part and its stats."""
    written: list[bytes] = []
    out = io.BytesIO()
    writer = make(out, None)
    for index, batch in enumerate(batches):
        if index == resume_at:
            stored = json.dumps(writer.checkpoint().to_dict())
            written.append(out.getvalue())
            out = io.BytesIO()
            writer = make(out, WriterStats.from_dict(json.loads(stored)))
        writer.write_rows(batch)
    stats = writer.close()
    written.append(out.getvalue())
    part = b"".join(written)
    assert stats.bytes == len(part)
    return part, stats


def write_direct(fmt: str, rows: Rows, batch_cuts: Sequence[int], **options: Any) -> Any:
    """The single writer's file and stats, rows written in batches cut at ``batch_cuts``."""
    out = io.BytesIO()
    writer: CsvWriter | XlsxWriter
    if fmt == "csv":
        writer = CsvWriter(out, COLUMNS, time_zone=ZONE)
    else:
        writer = XlsxWriter(out, COLUMNS, time_zone=ZONE, **options)
    for start, stop in cut(len(rows), batch_cuts):
        writer.write_rows(rows[start:stop])
    stats = writer.close()
    return out.getvalue(), stats


def csv_part(out: io.BytesIO, resume: WriterStats | None) -> PartWriter:
    return CsvPartWriter(out, COLUMNS, time_zone=ZONE, resume_from=resume)


def xlsx_part(out: io.BytesIO, resume: WriterStats | None) -> PartWriter:
    return XlsxFragmentWriter(out, COLUMNS, time_zone=ZONE, resume_from=resume)


def sharded_parts(
    data: st.DataObject,
    make: Callable[[io.BytesIO, WriterStats | None], PartWriter],
    rows: Rows,
) -> tuple[list[bytes], WriterStats]:
    """Split ``rows`` into 1..6 shards, each written in random batches, maybe resumed."""
    count = data.draw(st.integers(min_value=1, max_value=6), label="shards")
    points = data.draw(st.lists(st.integers(0, len(rows)), max_size=count - 1), label="cuts")
    parts, stats = [], []
    for start, stop in cut(len(rows), points):
        shard = rows[start:stop]
        batch_points = data.draw(st.lists(st.integers(0, len(shard)), max_size=4))
        batches = [shard[a:b] for a, b in cut(len(shard), batch_points)]
        resume_at = data.draw(st.none() | st.integers(0, len(batches)))
        part, part_stats = write_part(make, batches, resume_at)
        parts.append(part)
        stats.append(part_stats)
    return parts, WriterStats.total(stats)


def random_segments(data: st.DataObject, parts: Sequence[bytes]) -> list[Iterator[bytes]]:
    """Each part cut at random bytes (inside rows, inside UTF-8 characters, empty ones)."""
    return [
        segments(part, data.draw(st.lists(st.integers(0, len(part)), max_size=6))) for part in parts
    ]


# --- byte identity, property tests -----------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(row_values, max_size=30), data=st.data())
def test_csv_head_and_parts_are_the_csv_writers_file(
    values: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = numbered(values)
    direct, direct_stats = write_direct("csv", rows, data.draw(st.lists(st.integers(0, 30))))
    parts, part_stats = sharded_parts(data, csv_part, rows)
    assert csv_head(COLUMNS) + b"".join(parts) == direct
    out = io.BytesIO()
    stats = assemble_csv(out, COLUMNS, random_segments(data, parts), part_stats=part_stats)
    assert out.getvalue() == direct
    assert stats == direct_stats == csv_stats(COLUMNS, part_stats)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(row_values, max_size=30), data=st.data())
def test_assembled_xlsx_is_the_xlsx_writers_file(
    values: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = numbered(values)
    limit = data.draw(st.sampled_from([1, 4, 7, xlsx.EXCEL_MAX_ROWS - 1]), label="limit")
    with frozen_package_time():
        direct, direct_stats = write_direct(
            "xlsx", rows, data.draw(st.lists(st.integers(0, 30))), sheet_row_limit=limit
        )
        parts, part_stats = sharded_parts(data, xlsx_part, rows)
        out = io.BytesIO()
        stats = assemble_xlsx(
            out,
            COLUMNS,
            random_segments(data, parts),
            part_stats=part_stats,
            sheet_row_limit=limit,
        )
    assert out.getvalue() == direct
    assert stats == direct_stats


# --- byte identity across 1,000-row chunks, sheets and compressors ---------------------


def many_rows(count: int) -> Rows:
    return [
        {
            "id": n,
            "s": f"customer {n} " * (n % 13) + ("中" if n % 7 == 0 else ""),
            "i": n * 7_919 if n % 5 else None,
            "d": Decimal(n).scaleb(-(n % 4)),
            "b": n % 3 == 0,
            "day": dt.date(2024, 1, 1) + dt.timedelta(days=n % 400),
            "at": fall_back[n % 3] + dt.timedelta(minutes=n % 120),
        }
        for n in range(1, count + 1)
    ]


def as_columns(rows: Rows) -> list[Sequence[Any]]:
    """Column-major (the pipeline's form), DECIMAL as a validated ``DecimalColumn``."""
    columns: list[Sequence[Any]] = [[row.get(c.key) for row in rows] for c in COLUMNS]
    columns[3] = DecimalColumn(format(v, "f") for v in columns[3])
    return columns


@pytest.mark.parametrize("compresslevel", [1, 6])
def test_large_split_across_chunks_and_sheets_is_identical(compresslevel: int) -> None:
    # 5,500 rows, 2,345 rows per sheet: sheets and shards both cut 1,000-row chunks.
    rows = many_rows(5_500)
    options = {"sheet_row_limit": 2_345, "compresslevel": compresslevel}
    rng = random.Random(compresslevel)
    with frozen_package_time():
        out = io.BytesIO()
        writer = XlsxWriter(out, COLUMNS, time_zone=ZONE, **options)
        for start in range(0, len(rows), 1_000):  # the pipeline's batches
            writer.write_columns(as_columns(rows[start : start + 1_000]))
        direct_stats = writer.close()
        direct = out.getvalue()
        parts, stats = [], []
        for start, stop in cut(len(rows), [1, 999, 1_000, 3_333]):
            part_out = io.BytesIO()
            fragment = XlsxFragmentWriter(part_out, COLUMNS, time_zone=ZONE)
            for a, b in cut(stop - start, [rng.randrange(stop - start) for _ in range(3)]):
                fragment.write_columns(as_columns(rows[start + a : start + b]))
            stats.append(fragment.close())
            parts.append(part_out.getvalue())
        chunks = [
            segments(p, [rng.randrange(len(p)) for _ in range(len(p) // 20_000)]) for p in parts
        ]
        assembled = io.BytesIO()
        assembled_stats = assemble_xlsx(
            assembled, COLUMNS, chunks, part_stats=WriterStats.total(stats), **options
        )
    assert assembled.getvalue() == direct
    assert assembled_stats == direct_stats
    assert (assembled_stats.rows, assembled_stats.sheets) == (5_500, 3)


def test_soft_sheet_size_limit_splits_at_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # The 1.5 GB rule scaled down to 50 kB: a sheet ends at the chunk boundary past it.
    monkeypatch.setattr(xlsx, "_SHEET_XML_SOFT_LIMIT", 50_000)
    rows = many_rows(3_500)
    with frozen_package_time():
        direct, direct_stats = write_direct("xlsx", rows, [10, 1_234, 2_000])
        parts, stats = [], []
        for start, stop in cut(len(rows), [500, 2_222]):
            part, part_stats = write_part(xlsx_part, [rows[start:stop]])
            parts.append(part)
            stats.append(part_stats)
        out = io.BytesIO()
        assembled_stats = assemble_xlsx(
            out, COLUMNS, [[p] for p in parts], part_stats=WriterStats.total(stats)
        )
    assert out.getvalue() == direct
    assert assembled_stats == direct_stats
    with zipfile.ZipFile(io.BytesIO(direct)) as archive:
        last_rows = [
            ROW_RE.findall(archive.read(f"xl/worksheets/sheet{i}.xml"))[-1] for i in (1, 2, 3)
        ]
    assert last_rows == [b"1001", b"1001", b"1001"]  # header + one chunk each, then 500
    assert direct_stats.sheets == 4


# --- reading the files back ------------------------------------------------------------


def test_sheet_split_reads_back_cell_by_cell_with_openpyxl() -> None:
    rows = many_rows(23)
    with frozen_package_time():
        direct, _ = write_direct("xlsx", rows, [], sheet_row_limit=5)
        parts, stats = [], []
        for start, stop in cut(len(rows), [3, 4, 17]):
            part, part_stats = write_part(xlsx_part, [rows[start:stop]])
            parts.append(part)
            stats.append(part_stats)
        out = io.BytesIO()
        assembled_stats = assemble_xlsx(
            out,
            COLUMNS,
            [segments(p, [len(p) // 3, len(p) // 2]) for p in parts],
            part_stats=WriterStats.total(stats),
            sheet_row_limit=5,
        )
    assert assembled_stats.sheets == 5
    assembled = load_workbook(io.BytesIO(out.getvalue()))
    reference = load_workbook(io.BytesIO(direct))
    assert assembled.sheetnames == reference.sheetnames == [f"Sheet{i}" for i in range(1, 6)]
    ids = []
    for ws, ref in zip(assembled.worksheets, reference.worksheets, strict=True):
        values = list(ws.iter_rows(values_only=True))
        assert values == list(ref.iter_rows(values_only=True))
        assert values[0] == (
            "Id",
            "Name \ufffd =1+1",
            "Count",
            "Amount \ufffd",
            "Flag",
            "Day",
            "At",
        )
        assert 2 <= len(values) <= 6
        ids.extend(row[0] for row in values[1:])
        for row in values[1:]:
            expected = rows[row[0] - 1]
            assert row[2] == expected["i"]
            assert row[5] == dt.datetime.combine(expected["day"], dt.time())
    assert ids == list(range(1, 24))


def test_csv_parts_read_back_with_the_csv_module() -> None:
    rows = [
        {"id": 1, "s": 'comma, "quote"\r\nnew line', "i": 10**20, "d": Decimal("-5.00")},
        {"id": 2, "s": "=1+1", "b": True, "day": dt.date(2024, 2, 29)},
        {"id": 3, "at": fall_back[0]},
        {"id": 4, "s": "lone \ud800 surrogate"},
    ]
    parts, stats = [], []
    for start, stop in cut(len(rows), [1, 3]):
        part, part_stats = write_part(csv_part, [rows[start:stop]])
        parts.append(part)
        stats.append(part_stats)
    out = io.BytesIO()
    file_stats = assemble_csv(
        out, COLUMNS, [[p] for p in parts], part_stats=WriterStats.total(stats)
    )
    data = out.getvalue()
    assert data.startswith(b"\xef\xbb\xbf") and data.count(b"\xef\xbb\xbf") == 1
    records = list(csv.reader(io.StringIO(data[3:].decode("utf-8"), newline="")))
    assert records == [
        ["Id", "Name \x07 =1+1", "Count", "Amount \ufffd", "Flag", "Day", "At"],
        ["1", 'comma, "quote"\r\nnew line', "100000000000000000000", "-5.00", "", "", ""],
        ["2", "'=1+1", "", "", "true", "2024-02-29", ""],
        ["3", "", "", "", "", "", "2024-11-03 01:30:00-04:00"],
        ["4", "lone \ufffd surrogate", "", "", "", "", ""],
    ]
    assert (file_stats.rows, file_stats.sheets, file_stats.bytes) == (4, 1, len(data))
    assert file_stats.replaced_surrogates == file_stats.replaced_chars == 2  # header + row 4


def test_a_cut_at_any_byte_of_a_fragment_is_the_same_file() -> None:
    # Every place a segment can end: inside "<row>", "</row>", a mark, a UTF-8 character.
    rows = [{"id": 1, "s": "中文 <row>"}, {"id": 2, "s": "😀"}, {"id": 3}]
    part, stats = write_part(xlsx_part, [rows])
    with frozen_package_time():
        direct, _ = write_direct("xlsx", rows, [])
        splits = [[[part[:at], part[at:]]] for at in range(len(part) + 1)]
        splits.append([[part[at : at + 1] for at in range(len(part))]])
        splits.append([[part[:at]] for at in (0, 0)] + [[part]])  # empty shards around
        for fragments in splits:
            out = io.BytesIO()
            assemble_xlsx(out, COLUMNS, fragments, part_stats=stats)
            assert out.getvalue() == direct


def test_fragment_rows_carry_no_row_numbers() -> None:
    out = io.BytesIO()
    writer = XlsxFragmentWriter(out, COLUMNS[:3])
    writer.write_rows([{"id": 7, "s": "a<row>b"}, {}])
    stats = writer.close()
    assert out.getvalue() == (
        b'<row><c r="A\x00"><v>7</v></c>'
        b'<c r="B\x00" t="inlineStr"><is><t>a&lt;row&gt;b</t></is></c></row><row></row>'
    )
    assert (stats.rows, stats.sheets, stats.bytes) == (2, 0, len(out.getvalue()))


def test_no_rows_and_empty_parts_make_the_empty_file() -> None:
    with frozen_package_time():
        direct, direct_stats = write_direct("xlsx", [], [])
        out = io.BytesIO()
        stats = assemble_xlsx(out, COLUMNS, [[], [b""], []], part_stats=WriterStats())
    assert out.getvalue() == direct
    assert stats == direct_stats
    csv_out = io.BytesIO()
    assert (
        assemble_csv(csv_out, COLUMNS, [], part_stats=WriterStats())
        == write_direct("csv", [], [])[1]
    )
    assert csv_out.getvalue() == csv_head(COLUMNS) == write_direct("csv", [], [])[0]


# --- stats -----------------------------------------------------------------------------


def test_resumed_part_continues_the_counts_and_the_bytes() -> None:
    rows = [
        {"id": 1, "s": "\x07\ud800"},
        {"id": 2, "d": Decimal("NaN")},
        {"id": 3, "s": "x" * 40_000},
    ]
    for make in (csv_part, xlsx_part):
        whole, whole_stats = write_part(make, [rows[:1], rows[1:2], rows[2:]])
        for resume_at in (0, 1, 2, 3):
            resumed, resumed_stats = write_part(make, [rows[:1], rows[1:2], rows[2:]], resume_at)
            assert (resumed, resumed_stats) == (whole, whole_stats)
    _, xlsx_stats = write_part(xlsx_part, [rows])
    assert (xlsx_stats.replaced_control_chars, xlsx_stats.replaced_surrogates) == (1, 1)
    assert (xlsx_stats.invalid_numbers, xlsx_stats.truncated_cells) == (1, 1)
    assert xlsx_stats.replaced_chars == 2


# --- the size cap ----------------------------------------------------------------------


def test_size_cap_holds_for_the_assembled_files() -> None:
    rows = many_rows(2_000)
    with frozen_package_time():
        direct, _ = write_direct("xlsx", rows, [])
        part, stats = write_part(xlsx_part, [rows])
        with pytest.raises(FileTooLarge):
            assemble_xlsx(
                io.BytesIO(), COLUMNS, [[part]], part_stats=stats, max_bytes=len(direct) - 1
            )
        out = io.BytesIO()
        assemble_xlsx(out, COLUMNS, [[part]], part_stats=stats, max_bytes=len(direct))
    assert out.getvalue() == direct
    csv_file, _ = write_direct("csv", rows, [])
    csv_part_bytes, csv_part_stats = write_part(csv_part, [rows])
    assert csv_stats(COLUMNS, csv_part_stats, max_bytes=len(csv_file)).bytes == len(csv_file)
    with pytest.raises(FileTooLarge):
        csv_stats(COLUMNS, csv_part_stats, max_bytes=len(csv_file) - 1)
    with pytest.raises(FileTooLarge):
        assemble_csv(
            io.BytesIO(),
            COLUMNS,
            [[csv_part_bytes]],
            part_stats=csv_part_stats,
            max_bytes=len(csv_file) - 1,
        )


def test_resumed_part_cap_counts_the_earlier_segments() -> None:
    first = CsvPartWriter(io.BytesIO(), COLUMNS)
    first.write_rows([{"s": "x" * 100}])
    earlier = first.checkpoint()
    resumed = CsvPartWriter(
        io.BytesIO(), COLUMNS, max_bytes=earlier.bytes + 50, resume_from=earlier
    )
    with pytest.raises(FileTooLarge):
        resumed.write_rows([{"s": "y" * 100}])


# --- malformed fragments ---------------------------------------------------------------


def test_malformed_fragments_are_refused() -> None:
    part, stats = write_part(xlsx_part, [many_rows(3)])
    cases = [
        ([[part[:-3]]], stats),  # ends inside a row
        ([[part[:-3]], [part[-3:]]], stats),  # a row across two shards
        ([[b'<row r="2"></row>']], WriterStats(rows=1)),  # a worksheet's row, not a fragment
        ([[part]], dataclasses.replace(stats, rows=4)),  # stats of other rows
    ]
    for fragments, part_stats in cases:
        with pytest.raises(ValueError):
            assemble_xlsx(io.BytesIO(), COLUMNS, fragments, part_stats=part_stats)


# --- memory ----------------------------------------------------------------------------


class NullSink(io.RawIOBase):
    """Counts and drops bytes (keeps the file out of the memory measurement)."""

    def __init__(self) -> None:
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.size += len(data)
        return len(data)


def test_assembler_memory_is_one_segment_not_the_part() -> None:
    part, stats = write_part(xlsx_part, [many_rows(60_000)])
    segment = 256 * 1024
    view = memoryview(part)

    def read_segments() -> Iterator[bytes]:  # as from storage: one segment at a time
        for start in range(0, len(part), segment):
            yield bytes(view[start : start + segment])

    sink = NullSink()
    tracemalloc.start()
    try:
        result = assemble_xlsx(sink, COLUMNS, [read_segments()], part_stats=stats)  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.rows == 60_000 and sink.size == result.bytes
    assert len(part) > 20_000_000
    # Two segments (the next one is read before the last is dropped) and about three
    # copies of one 1,000-row chunk of numbered rows (350 kB here): 1.7 MB, not 21 MB.
    assert peak < 3_000_000
