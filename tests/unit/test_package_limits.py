"""The package's limits and counts: at most ``MAX_PARTS`` parts, a split XLSX export's
sheets counted per part, and gzip/ZIP entries that real readers open (ISA-L's deflate)."""

from __future__ import annotations

import gzip
import io
import zipfile

import pytest

from export_center.errors import PermanentExportError
from export_center.filespec import MAX_PARTS
from tests.support.package_rows import make_rows, package, spec


def test_a_split_of_more_parts_than_the_most_fails_naming_the_options() -> None:
    rows = make_rows(MAX_PARTS + 1)
    with pytest.raises(PermanentExportError) as caught:
        package("csv", spec(rows=1), rows)
    assert caught.value.code == "TOO_MANY_PARTS"
    assert "maxRowsPerFile" in caught.value.message
    data, pack = package("csv", spec(rows=1), rows[:MAX_PARTS])  # the most is fine
    assert len(pack.files) == MAX_PARTS
    assert len(zipfile.ZipFile(io.BytesIO(data)).namelist()) == MAX_PARTS + 1


def test_a_split_xlsx_export_counts_the_sheets_of_a_part_not_their_sum() -> None:
    _, pack = package("xlsx", spec(rows=100), make_rows(350))
    assert len(pack.files) == 4
    stats = pack.close()
    assert stats.sheets == 1 and stats.rows == 350


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_gzip_and_zip_entries_open_with_pythons_readers(fmt: str) -> None:
    rows = make_rows(3_000)
    plain, _ = package(fmt, spec(), rows)
    gzipped, _ = package(fmt, spec("gzip"), rows)
    assert gzip.decompress(gzipped) == plain
    assert gzipped[4:8] == b"\0\0\0\0"  # mtime 0: the bytes depend on the rows only
    zipped, _ = package(fmt, spec("zip"), rows)
    archive = zipfile.ZipFile(io.BytesIO(zipped))
    assert archive.testzip() is None
    assert archive.read(f"orders.{fmt}") == plain
