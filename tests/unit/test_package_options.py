"""The package with the file's CSV options, and its failure paths (no I/O)."""

from __future__ import annotations

import csv
import gc
import io
import sys
import zipfile

import pytest

from export_center.errors import FileTooLarge
from export_center.filespec import CsvOptions
from export_center.packaging.package import open_package
from export_center.packaging.streams import CountingSink
from export_center.packaging.verify import differences
from export_center.writers.csv import CsvWriter
from export_center.writers.formats import FORMATS
from tests.support.package_rows import (
    COLUMNS,
    ZIP_TIME,
    columns_of,
    make_rows,
    manifest_of,
    package,
    spec,
)

GB = CsvOptions(encoding="gb18030", delimiter=";", header=False, line_ending="lf")


def _rows(count: int) -> list[list[object]]:
    """Rows whose text holds the delimiter, a four-byte GB18030 character and CJK."""
    rows = make_rows(count)
    for row in rows:
        row[1] = f"{row[1]};𠀀 {row[0]}"  # U+20000: four bytes in GB18030
    return rows


ROWS = _rows(1_234)


def _parts(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(n, archive.read(n)) for n in archive.namelist() if n != "manifest.json"]


def _read(body: bytes) -> list[list[str]]:
    """A part read with the options' codec and delimiter, records ending in LF only."""
    assert b"\r\n" not in body.replace(b'\r\n"', b"")  # records end in LF
    text = body.decode("gb18030")
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=";", strict=True))


@pytest.mark.parametrize(("rows", "size"), [(500, None), (None, 30_000)])
def test_csv_options_apply_to_every_part_of_a_split_zip(rows, size):
    file_spec = spec("zip", rows=rows, size=size, csv=GB)
    data, pack = package("csv", file_spec, ROWS, batches=[7, 600, 1])
    parts = _parts(data)
    assert len(parts) >= 3 and [n for n, _ in parts] == [f.name for f in pack.files]
    read = [_read(body) for _, body in parts]
    assert [len(r) for r in read] == [f.rows for f in pack.files]  # no header row
    flat = [record for part in read for record in part]
    assert [int(r[0]) for r in flat] == [row[0] for row in ROWS]
    assert [r[1] for r in flat] == [
        ("'" if str(row[1]).startswith("=") else "") + str(row[1]) for row in ROWS
    ]
    four = "𠀀".encode("gb18030")
    assert len(four) == 4 and all(four in body for _, body in parts)
    assert not any(body.startswith(b"\xef\xbb\xbf") for _, body in parts)  # no BOM
    assert differences(data, pack.delivered_name, manifest_of("csv", pack, file_spec)) == []


def _row_bytes(row, options: CsvOptions) -> int:
    sink = CountingSink()
    writer = CsvWriter(sink, COLUMNS, time_zone="Asia/Shanghai", options=options)
    writer.write_columns(columns_of([row]))
    writer.close()
    return sink.count  # no header, no BOM: the row alone


def test_the_byte_cap_measures_rows_in_the_file_encoding():
    limit = 8_000
    _, pack = package("csv", spec("zip", size=limit, csv=GB), ROWS, batches=[3, 250])
    files = pack.files
    first = 0
    for index, entry in enumerate(files):
        assert entry.bytes <= limit
        first += entry.rows
        if index + 1 < len(files):  # the next row, in GB18030 with ';', did not fit
            assert entry.bytes + _row_bytes(ROWS[first], GB) > limit


def test_a_changed_gb18030_cell_is_caught():
    file_spec = spec("zip", rows=400, csv=GB)
    data, pack = package("csv", file_spec, ROWS)
    parts = _parts(data)
    name, body = parts[1]
    changed = body.replace(b"\n401;", b"\n409;", 1)  # the id of one row
    assert changed != body
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for part_name, part in parts:
            archive.writestr(part_name, changed if part_name == name else part)
        with zipfile.ZipFile(io.BytesIO(data)) as original:
            archive.writestr("manifest.json", original.read("manifest.json"))
    lines = differences(out.getvalue(), "orders.zip", manifest_of("csv", pack, file_spec))
    assert any(line.startswith(f"{name}: sha256 expected") for line in lines)
    assert "control total id.sum: expected" in "\n".join(lines)


def _unraisable(monkeypatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda hook: seen.append(repr(hook.exc_value)))
    return seen


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_abort_closes_the_open_zip_entry(fmt, monkeypatch):
    seen = _unraisable(monkeypatch)
    out = io.BytesIO()
    pack = open_package(
        out,
        FORMATS[fmt],
        COLUMNS,
        spec("zip", rows=100),
        time_zone="UTC",
        max_bytes=None,
        file_stem="o",
        zip_time=ZIP_TIME,
    )
    pack.write_columns(columns_of(make_rows(150)))  # part 2 is open
    pack.abort()
    del pack
    gc.collect()
    assert seen == []
    with pytest.raises(zipfile.BadZipFile):  # nothing usable was delivered
        zipfile.ZipFile(io.BytesIO(out.getvalue())).testzip()


def test_a_capped_zip_fails_without_a_finalizer_error(monkeypatch):
    seen = _unraisable(monkeypatch)
    with pytest.raises(FileTooLarge):
        package("csv", spec("zip"), make_rows(2_000), max_bytes=10_000)
    gc.collect()
    assert seen == []
