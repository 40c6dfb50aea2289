"""The package: every format x compression x split, read back with real readers."""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import json
import zipfile

import openpyxl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_center.columns import Column
from export_center.errors import FileTooLarge
from export_center.packaging.package import open_package
from export_center.packaging.streams import CountingSink
from export_center.packaging.verify import differences, read_zip_manifest
from export_center.writers.csv import CsvWriter
from export_center.writers.formats import FORMATS
from tests.support.package_rows import COLUMNS, ZIP_TIME, columns_of, make_rows, package, spec
from tests.unit.writer_helpers import frozen_package_time

ROWS = make_rows(2_345)
SHANGHAI = dt.timezone(dt.timedelta(hours=8))
FORMAT_NAMES = [name for name in ("csv", "xlsx", "jsonl", "parquet") if name in FORMATS]
CASES = [
    (fmt, compression, split)
    for fmt in FORMAT_NAMES
    for compression in ("none", "gzip", "zip")
    for split in (None, ("rows", 1_000), ("bytes", 20_000))
    if not (compression == "gzip" and (fmt in ("xlsx", "parquet") or split))
]


def _spec(compression, split):
    if split is None:
        return spec(compression)
    return (
        spec(compression, rows=split[1]) if split[0] == "rows" else spec(compression, size=split[1])
    )


def _read_rows(fmt: str, data: bytes) -> list[list[object]]:
    """The data rows with a real reader, header skipped (every sheet for XLSX)."""
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
        assert rows[0] == [c.title for c in COLUMNS]
        return rows[1:]
    if fmt == "xlsx":
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
        out = []
        for sheet in book.worksheets:
            rows = list(sheet.iter_rows(values_only=True))
            assert list(rows[0]) == [c.title for c in COLUMNS]
            out.extend(list(r) for r in rows[1:])
        return out
    if fmt == "jsonl":
        return [list(json.loads(line).values()) for line in data.decode().splitlines()]
    import pyarrow.parquet as pq

    return [list(r.values()) for r in pq.read_table(io.BytesIO(data)).to_pylist()]


@pytest.mark.parametrize(("fmt", "compression", "split"), CASES)
def test_every_combination_reads_back_and_verifies(fmt, compression, split):
    data, pack = package(fmt, _spec(compression, split), ROWS, batches=[1, 999, 17])
    ext = FORMATS[fmt].extension
    files = pack.files
    assert sum(f.rows for f in files) == len(ROWS) == pack.totals.rows
    if compression == "none" and split is None:
        assert pack.archive is None and pack.delivered_name == f"orders.{ext}"
        assert pack.content_type == FORMATS[fmt].content_type
        bodies = [data]
    elif compression == "gzip":
        assert pack.archive is None and pack.extension == f"{ext}.gz"
        assert pack.content_type == "application/gzip"
        assert data[:2] == b"\x1f\x8b" and data[4:8] == b"\0\0\0\0"  # mtime 0
        assert data[3] & 0x08 == 0  # no file name in the header
        bodies = [gzip.decompress(data)]
    else:
        assert pack.extension == "zip" and pack.content_type == "application/zip"
        assert pack.archive is not None and pack.archive.bytes == len(data)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
            assert names[-1] == "manifest.json"
            assert names[:-1] == [f.name for f in files]
            assert {i.date_time for i in archive.infolist()} == {(2024, 5, 1, 12, 0, 0)}
            bodies = [archive.read(n) for n in names[:-1]]
        if split is None:
            assert names == [f"orders.{ext}", "manifest.json"]
        else:
            assert len(files) > 1
            assert names[0] == f"orders-part-0001.{ext}"
        inner = read_zip_manifest(data)
        assert inner is not None and inner["files"] == [f.as_json() for f in files]
        assert inner["controlTotals"] == pack.totals.as_json()
    read = [_read_rows(fmt, body) for body in bodies]
    assert [len(r) for r in read] == [f.rows for f in files if f.name.endswith(ext)] or (
        compression == "gzip" and [len(r) for r in read] == [len(ROWS)]
    )
    assert [row[0] for part in read for row in part] == [
        (str(r[0]) if fmt == "csv" else r[0]) for r in ROWS
    ]
    flat = [row for part in read for row in part]
    if fmt == "jsonl":  # decimals as strings, dates ISO 8601, datetimes with offset
        assert flat == [
            [
                r[0],
                r[1],
                None if r[2] is None else str(r[2]),
                r[3].isoformat(),
                r[4].astimezone(SHANGHAI).isoformat(),
            ]
            for r in ROWS
        ]
    if fmt == "parquet":  # exactly the provider's values: Decimal, date, the instant
        assert flat == [list(r) for r in ROWS]
        assert all(row[4].utcoffset() == dt.timedelta(hours=8) for row in flat)
    if split is not None and split[0] == "rows":
        assert [f.rows for f in files] == [1000, 1000, 345]
    manifest = {
        "format": fmt,
        "options": {},
        "timeZone": "Asia/Shanghai",
        "columns": [{"key": c.key, "title": c.title, "type": str(c.type)} for c in COLUMNS],
        "totalRows": len(ROWS),
        "files": [f.as_json() for f in files],
        "archive": None if pack.archive is None else pack.archive.as_json(),
        "controlTotals": pack.totals.as_json(),
    }
    name = pack.delivered_name
    assert differences(data, name, manifest) == []


def _csv_row_bytes(row) -> int:
    """The bytes one row takes in a CSV file, from the real writer alone."""
    head, full = CountingSink(), CountingSink()
    CsvWriter(head, COLUMNS, time_zone="Asia/Shanghai").close()
    writer = CsvWriter(full, COLUMNS, time_zone="Asia/Shanghai")
    writer.write_columns(columns_of([row]))
    writer.close()
    return full.count - head.count


def test_csv_byte_split_is_an_exact_cap():
    limit = 20_000
    _, pack = package("csv", spec(size=limit), ROWS, batches=[3, 500, 1])
    files = pack.files
    assert len(files) > 5
    first_rows = [sum(f.rows for f in files[:i]) for i in range(len(files))]
    for index, entry in enumerate(files):
        assert entry.bytes <= limit
        if index + 1 < len(files):  # the next row would have passed the cap
            assert entry.bytes + _csv_row_bytes(ROWS[first_rows[index + 1]]) > limit


def test_a_row_larger_than_a_part_fails():
    rows = make_rows(3)
    rows[1][1] = "x" * 5_000
    with pytest.raises(FileTooLarge, match="row 2 does not fit"):
        package("csv", spec(size=2_000), rows)


def test_max_bytes_caps_the_delivered_file():
    with pytest.raises(FileTooLarge):
        package("csv", spec("zip"), ROWS, max_bytes=10_000)


def test_no_rows_gives_one_complete_file():
    data, pack = package("csv", spec(rows=10), [])
    assert [(f.name, f.rows) for f in pack.files] == [("orders-part-0001.csv", 0)]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert (
            archive.read("orders-part-0001.csv").decode("utf-8-sig") == "Id,Name,Amount,Day,At\r\n"
        )


def test_results_before_close_are_refused():
    pack = open_package(
        io.BytesIO(),
        FORMATS["csv"],
        COLUMNS,
        spec("zip"),
        time_zone="UTC",
        max_bytes=None,
        file_stem="o",
        zip_time=ZIP_TIME,
    )
    with pytest.raises(ValueError):
        _ = pack.files
    pack.abort()
    with pytest.raises(ValueError):
        pack.write_columns(columns_of(make_rows(1)))


def test_no_columns_is_refused():
    with pytest.raises(ValueError):
        open_package(
            io.BytesIO(),
            FORMATS["csv"],
            list[Column](),
            spec(),
            time_zone="UTC",
            max_bytes=None,
            file_stem="o",
            zip_time=ZIP_TIME,
        )


SMALL = make_rows(1_300)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=8),
    case=st.sampled_from(
        [
            ("csv", "gzip", None),
            ("csv", "none", ("bytes", 9_000)),
            ("csv", "zip", ("rows", 500)),
            ("xlsx", "none", ("rows", 600)),
            ("xlsx", "zip", None),
            ("xlsx", "none", ("bytes", 30_000)),
            ("xlsx", "zip", ("bytes", 90_000)),
            ("jsonl", "gzip", None),
            ("jsonl", "zip", ("rows", 700)),
            ("jsonl", "none", ("bytes", 9_000)),
            ("parquet", "none", None),
            ("parquet", "zip", ("rows", 700)),
            ("parquet", "none", ("bytes", 15_000)),
            ("parquet", "zip", ("bytes", 40_000)),
        ]
    ),
)
def test_bytes_depend_on_the_rows_not_the_batches(cuts, case):
    fmt, compression, split = case
    with frozen_package_time():  # an XLSX file says when it was made
        one, first = package(fmt, _spec(compression, split), SMALL)
        other, second = package(fmt, _spec(compression, split), SMALL, batches=cuts)
    assert [f.rows for f in first.files] == [f.rows for f in second.files]
    assert one == other
