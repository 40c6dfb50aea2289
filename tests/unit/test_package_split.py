"""Compressed parts cut by bytes (XLSX, Parquet): each part <= maxBytesPerFile, cut
where the next block would not fit, and the same file its writer makes of those rows."""

from __future__ import annotations

import io
import zipfile

import openpyxl
import pyarrow.parquet as pq
import pytest

from export_center.errors import FileTooLarge
from export_center.packaging.split import BLOCK_ROWS
from export_center.packaging.streams import CountingSink
from export_center.writers.parquet import ROW_GROUP_ROWS, ParquetWriter
from export_center.writers.xlsx import XlsxWriter
from tests.support.package_rows import COLUMNS, columns_of, make_rows, package, spec
from tests.unit.writer_helpers import frozen_package_time

ZONE = "Asia/Shanghai"
ROWS = make_rows(9_000)


def _alone(fmt: str, rows) -> bytes:
    """The file the format's writer makes of ``rows`` alone (XLSX with size checks)."""
    out = io.BytesIO()
    if fmt == "xlsx":
        writer: XlsxWriter | ParquetWriter = XlsxWriter(
            out, COLUMNS, time_zone=ZONE, size_checks=True
        )
    else:
        writer = ParquetWriter(out, COLUMNS, time_zone=ZONE)
    if rows:
        writer.write_columns(columns_of(rows))
    writer.close()
    return out.getvalue()


def _parts(data: bytes) -> list[bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [archive.read(n) for n in archive.namelist() if n != "manifest.json"]


def _row_count(fmt: str, body: bytes) -> int:
    if fmt == "parquet":
        return pq.read_table(io.BytesIO(body)).num_rows
    book = openpyxl.load_workbook(io.BytesIO(body), read_only=True)
    try:
        assert len(book.worksheets) == 1  # a byte-split XLSX part is one sheet
        return sum(1 for _ in book.worksheets[0].iter_rows(min_row=2))
    finally:
        book.close()


@pytest.mark.parametrize(
    ("fmt", "limit"),
    [
        ("xlsx", 20_000),  # less than a block: the most rows that fit
        ("xlsx", 100_000),
        ("xlsx", 250_000),
        ("parquet", 20_000),
        ("parquet", 80_000),
        ("parquet", 200_000),
    ],
)
def test_each_part_fits_and_the_next_block_would_not(fmt, limit):
    with frozen_package_time():
        data, pack = package(fmt, spec("zip", size=limit), ROWS, batches=[1, 1_499, 333])
        bodies = _parts(data)
        files = pack.files
        assert len(files) > 1 and sum(f.rows for f in files) == len(ROWS)
        start = 0
        for index, (entry, body) in enumerate(zip(files, bodies, strict=True)):
            rows = ROWS[start : start + entry.rows]
            assert entry.bytes == len(body) <= limit
            assert _row_count(fmt, body) == entry.rows
            assert body == _alone(fmt, rows)  # the writer's own file of those rows
            if index + 1 < len(files):
                small = entry.rows < BLOCK_ROWS
                assert small or entry.rows % BLOCK_ROWS == 0
                more = 1 if small else BLOCK_ROWS  # the next row, or the next block
                bigger = ROWS[start : start + entry.rows + more]
                assert len(_alone(fmt, bigger)) > limit
            start += entry.rows


def test_parquet_parts_of_several_row_groups_stay_within_the_cap():
    rows = make_rows(150_000)
    limit = 3_000_000  # about 92,000 rows: several row groups per part
    data, pack = package("parquet", spec("zip", size=limit), rows, batches=[40_000, 7])
    files = pack.files
    assert len(files) == 2 and files[0].rows > ROW_GROUP_ROWS
    first = _parts(data)[0]
    assert files[0].bytes == len(first) <= limit
    groups = pq.ParquetFile(io.BytesIO(first)).metadata.num_row_groups
    assert groups == -(-files[0].rows // ROW_GROUP_ROWS) > 1
    assert files[0].rows % BLOCK_ROWS == 0
    # the bound after a written group errs by at most a few hundred bytes
    assert len(_alone("parquet", rows[: files[0].rows + BLOCK_ROWS])) > limit - 1_024


@pytest.mark.parametrize("fmt", ["xlsx", "parquet"])
def test_the_size_told_is_the_size_written(fmt):
    rows = make_rows(700)
    with frozen_package_time():
        size = len(_alone(fmt, rows))
        for limit, taken in ((size, 700), (size - 1, None)):
            out = CountingSink()
            if fmt == "xlsx":
                writer: XlsxWriter | ParquetWriter = XlsxWriter(
                    out, COLUMNS, time_zone=ZONE, size_checks=True
                )
            else:
                writer = ParquetWriter(out, COLUMNS, time_zone=ZONE)
            back = writer.write_within(columns_of(rows), limit, step=BLOCK_ROWS)
            back = back or writer.fit_within(limit, step=BLOCK_ROWS)
            writer.close()
            kept = 700 - (len(back[0]) if back else 0)
            if taken is None:
                assert 0 < kept < 700 and out.count <= limit
            else:
                assert back is None and out.count == size


@pytest.mark.parametrize("fmt", ["xlsx", "parquet"])
def test_a_row_that_fits_in_no_part_fails(fmt):
    rows = make_rows(3)
    rows[1][1] = "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(30_000))
    with pytest.raises(FileTooLarge, match="row 2 does not fit"):
        package(fmt, spec("zip", size=8_000), rows)


def test_given_back_rows_keep_their_values():
    """Rows a Parquet part gives back are written by the next part unchanged."""
    data, pack = package("parquet", spec(size=60_000), ROWS[:5_000], batches=[2_500])
    read = [pq.read_table(io.BytesIO(body)).to_pylist() for body in _parts(data)]
    assert len(read) == len(pack.files) > 2
    assert [list(r.values()) for part in read for r in part] == [list(r) for r in ROWS[:5_000]]


def test_a_writer_with_size_checks_writes_the_same_workbook():
    rows = make_rows(2_500)
    with frozen_package_time():
        plain, checked = io.BytesIO(), io.BytesIO()
        for out, checks in ((plain, False), (checked, True)):
            writer = XlsxWriter(out, COLUMNS, time_zone=ZONE, compresslevel=6, size_checks=checks)
            writer.write_columns(columns_of(rows))
            writer.close()
    assert plain.getvalue() == checked.getvalue()  # zlib both, level 6: the same bytes
