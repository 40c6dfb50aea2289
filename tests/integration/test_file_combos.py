"""Every format, packaging and CSV option, single-stream and sharded, end to end over
real HTTP on SQLite and MariaDB, read back with real readers.

Each export is of ORDERS over four days (``tests.support.combos.RANGE``: 22 orders, four
day shards) with chosen, reordered and renamed columns, and is compared with the plain
CSV export of the same parameters (every column, the defaults) made by the same
producer: the same rows in the same order (a sharded file is in shard order, a single
stream in key order), the chosen columns and titles, each part complete on its own.
Its manifest must describe the bytes served (each file's or ZIP entry's size, SHA-256
and rows, the ZIP's own), hold control totals equal to the rows read (the exact sum of
``o_totalprice``), and carry a valid signature.

``single`` runs ORDERS through the single-stream producer (the registry's shards spec
removed for the test, see ``tests.support.combo_stack``); ``sharded`` in day shards.
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from export_center.errors import ProviderUnavailable
from export_center.filespec import DELIMITERS, ENCODINGS
from export_center.models import ExportAudit
from export_center.packaging.manifest import check_signature
from export_center.testing import FaultInjectingRun
from export_center.writers.formats import FORMATS
from tests.support.combo_stack import (  # noqa: F401 - fixtures
    ComboStack,
    baseline,
    combo,
    producer,
    run_export,
)
from tests.support.combos import (
    BOM,
    CHOSEN,
    CHOSEN_KEYS,
    CHOSEN_TITLES,
    DECLARED,
    DECLARED_KEYS,
    GUARDED_COMMENT,
    RANGE,
    RANGE_ROWS,
    RANGE_SHARDS,
    SEMICOLON_COMMENT,
    Delivered,
    Table,
    canonical,
    csv_text,
    expected_totals,
    project,
    read_table,
    sha256,
    unpack,
    zip_manifest,
)

SPLIT_ROWS = 7
"""Rows per part of a split: 22 rows make parts of 7, 7, 7 and 1 (a part ends inside a
page of 4 rows and inside a day shard)."""
PACKAGINGS: dict[str, dict[str, Any]] = {
    "plain": {},
    "gzip": {"compression": "gzip"},
    "zip": {"compression": "zip"},
    "split": {"split": {"maxRowsPerFile": SPLIT_ROWS}},
}
AUDIT = ExportAudit.__table__
MATRIX = [
    (fmt, packaging)
    for fmt, entry in FORMATS.items()
    for packaging in PACKAGINGS
    if packaging != "gzip" or entry.gzip
]


def part_sizes(rows: int, packaging: str) -> list[int]:
    """Data rows per delivered file: one file, or parts of :data:`SPLIT_ROWS`."""
    if packaging != "split":
        return [rows]
    return [min(SPLIT_ROWS, rows - start) for start in range(0, rows, SPLIT_ROWS)]


def file_names(fmt: str, packaging: str) -> tuple[str, list[str], str]:
    """The download's name, the names of the files it holds, and its content type."""
    entry = FORMATS[fmt]
    ext = entry.extension
    if packaging == "gzip":
        return f"orders.{ext}.gz", [f"orders.{ext}"], "application/gzip"
    if packaging == "zip":
        return "orders.zip", [f"orders.{ext}"], "application/zip"
    if packaging == "split":
        count = len(part_sizes(RANGE_ROWS, packaging))
        parts = [f"orders-part-{n:04d}.{ext}" for n in range(1, count + 1)]
        return "orders.zip", parts, "application/zip"
    return f"orders.{ext}", [f"orders.{ext}"], entry.content_type


def expected_rows(rows: Sequence[Sequence[str]], keys: Sequence[str]) -> list[list[str]]:
    """The plain CSV's rows as values (formula guard off), cut to ``keys``."""
    return project([canonical("csv", DECLARED_KEYS, row) for row in rows], keys)


def check_manifest(
    combo: ComboStack,
    detail: dict[str, Any],
    served: bytes,
    files: Sequence[Delivered],
    tables: Sequence[Table],
    rows: Sequence[Sequence[str]],
    fmt: str,
) -> dict[str, Any]:
    """The task's manifest describes the served bytes and the rows read from them."""
    client = combo.stack.client()
    answer = client.get(f"/api/v1/exports/{detail['taskId']}/manifest")
    assert answer.status_code == 200, answer.text
    manifest = answer.json()
    key = combo.stack.settings.manifest_secret
    assert manifest["signature"]["alg"] == "HMAC-SHA256"
    assert check_signature(manifest, key), manifest["signature"]
    assert (manifest["taskId"], manifest["exportType"]) == (detail["taskId"], "ORDERS")
    assert (manifest["format"], manifest["parameters"]) == (fmt, RANGE)
    assert manifest["columns"] == [
        {"key": k, "title": t, "type": DECLARED[k].type}
        for k, t in zip(CHOSEN_KEYS, CHOSEN_TITLES, strict=True)
    ]
    name = detail["fileName"]
    if name.endswith(".zip"):
        assert manifest["archive"] == {"name": name, "bytes": len(served), "sha256": sha256(served)}
        listed = [
            {"name": f.name, "rows": len(t.rows), "bytes": len(f.data), "sha256": sha256(f.data)}
            for f, t in zip(files, tables, strict=True)
        ]
        inner = zip_manifest(served)  # the ZIP's own manifest.json: signed, same files
        assert check_signature(inner, key)
        assert inner["files"] == listed and inner["archive"] is None
        assert inner["taskId"] == detail["taskId"]
        assert inner["controlTotals"] == manifest["controlTotals"]
    else:
        assert manifest["archive"] is None
        listed = [{"name": name, "rows": len(rows), "bytes": len(served), "sha256": sha256(served)}]
    assert manifest["files"] == listed
    assert manifest["totalRows"] == len(rows) == RANGE_ROWS
    assert manifest["controlTotals"] == expected_totals(CHOSEN_KEYS, rows)
    return manifest


@pytest.mark.parametrize(("fmt", "packaging"), MATRIX, ids=[f"{f}-{p}" for f, p in MATRIX])
def test_each_format_and_packaging_delivers_the_plain_csv_rows_and_a_true_manifest(
    combo: ComboStack, producer: str, fmt: str, packaging: str
) -> None:
    plain = expected_rows(baseline(combo, producer), CHOSEN_KEYS)
    client = combo.stack.client()
    detail, download = run_export(
        client, fmt, RANGE, columns=CHOSEN, options=PACKAGINGS[packaging], taskName="orders"
    )
    name, inside, content_type = file_names(fmt, packaging)
    assert detail["fileName"] == name
    assert download.headers["content-type"] == content_type
    files = unpack(download.content, name)
    assert [f.name for f in files] == inside
    # Each file is complete alone: its reader opens it, with its own header.
    tables = [read_table(fmt, f.data) for f in files]
    for table in tables:
        assert table.head == (CHOSEN_TITLES if fmt in ("csv", "xlsx") else CHOSEN_KEYS)
        if fmt == "parquet":
            assert table.titles == CHOSEN_TITLES
    assert [len(t.rows) for t in tables] == part_sizes(RANGE_ROWS, packaging)
    raw = [row for table in tables for row in table.rows]
    rows = [canonical(fmt, CHOSEN_KEYS, row) for row in raw]
    assert rows == plain
    guarded = ("'" if fmt == "csv" else "") + GUARDED_COMMENT
    assert guarded in [row[CHOSEN_KEYS.index("o_comment")] for row in raw]
    if fmt == "parquet":
        schema = pq.read_schema(io.BytesIO(files[0].data))
        assert schema.field("o_totalprice").type == pa.decimal128(15, 2)
        assert schema.field("o_orderdate").type == pa.date32()
        assert schema.field("o_orderkey").type == pa.int64()
    if fmt == "xlsx":
        assert all(table.sheets == 1 for table in tables)
    check_manifest(combo, detail, download.content, files, tables, rows, fmt)
    # Nothing was changed on the way, so the task carries no warning.
    assert detail["warning"] is None, detail["warning"]


ZH_COLUMNS: list[Any] = [
    {"key": "o_totalprice", "title": "金额𠀀"},  # U+20000: GB18030's four-byte range
    "o_orderkey",
    "o_orderdate",
    "c_name",
    "o_comment",
]
ZH_KEYS = ["o_totalprice", "o_orderkey", "o_orderdate", "c_name", "o_comment"]
ZH_HEAD = ["金额𠀀", "订单号", "下单日期", "客户名称", "备注"]
LAYOUTS = {
    "header-crlf": {"header": True, "lineEnding": "crlf"},
    "no-header-lf": {"header": False, "lineEnding": "lf"},
}
DELIMITER_IDS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def rfc4180(rows: Sequence[Sequence[str]], *, delimiter: str, newline: str, header: bool) -> str:
    """The CSV text of ``rows`` (and :data:`ZH_HEAD`) as RFC 4180 minimal quoting writes
    it (Python's ``csv`` module: a field with the delimiter or a quote is quoted)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator=newline)
    if header:
        writer.writerow(ZH_HEAD)
    writer.writerows(rows)
    return out.getvalue()


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("delimiter", DELIMITERS, ids=[DELIMITER_IDS[d] for d in DELIMITERS])
def test_csv_options_give_the_same_text_in_each_encoding(
    combo: ComboStack, producer: str, delimiter: str, layout: str
) -> None:
    shape = LAYOUTS[layout]
    newline = "\r\n" if shape["lineEnding"] == "crlf" else "\n"
    # The plain CSV's cells as written (formula guard included), in the chosen order.
    cells = project(baseline(combo, producer), ZH_KEYS)
    expected = rfc4180(cells, delimiter=delimiter, newline=newline, header=shape["header"])
    client = combo.stack.client()
    served: dict[str, bytes] = {}
    for encoding in ENCODINGS:
        options = {"encoding": encoding, "delimiter": delimiter, "language": "zh-CN", **shape}
        detail, download = run_export(client, "csv", RANGE, columns=ZH_COLUMNS, options=options)
        charset = "gb18030" if encoding == "gb18030" else "utf-8"
        assert download.headers["content-type"] == f"text/csv; charset={charset}"
        served[encoding] = download.content
    text = csv_text(served["utf-8"], "utf-8")
    assert text == expected
    assert served["utf-8-bom"] == BOM + served["utf-8"]
    assert served["gb18030"] == text.encode("gb18030")  # Python's codec, byte for byte
    if shape["header"]:  # the four-byte sequence of U+20000 is in the file
        assert "𠀀".encode("gb18030") == b"\x95\x32\x82\x36"
        assert b"\x95\x32\x82\x36" in served["gb18030"]
    # What the expected text means, said once more in plain terms.
    records = text.split(newline)
    assert records[-1] == "" and len(records) == RANGE_ROWS + shape["header"] + 1
    assert ("\r" in text) == (newline == "\r\n")
    quoted = f'"{SEMICOLON_COMMENT}"'
    assert (quoted in text) == (delimiter == ";")
    assert f"'{GUARDED_COMMENT}" in text


@pytest.mark.parametrize("packaging", ["gzip", "zip", "split"])
def test_csv_options_hold_in_gzip_in_a_zip_and_in_every_part(
    combo: ComboStack, producer: str, packaging: str
) -> None:
    cells = project(baseline(combo, producer), ZH_KEYS)
    options = {
        "encoding": "gb18030",
        "delimiter": ";",
        "lineEnding": "lf",
        "language": "zh-CN",
        **PACKAGINGS[packaging],
    }
    client = combo.stack.client()
    detail, download = run_export(client, "csv", RANGE, columns=ZH_COLUMNS, options=options)
    name, inside, _type = file_names("csv", packaging)
    files = unpack(download.content, detail["fileName"])
    assert [f.name for f in files] == inside
    start = 0
    for part, size in zip(files, part_sizes(RANGE_ROWS, packaging), strict=True):
        text = rfc4180(cells[start : start + size], delimiter=";", newline="\n", header=True)
        assert part.data == text.encode("gb18030"), part.name  # each part: header + rows
        start += size


class _FailOnce:
    """Fault for ``FaultInjectingRun``: the first attempt fails transiently before its
    ``nth`` page is written; the retry runs clean."""

    def __init__(self, nth: int) -> None:
        self.nth, self.seen, self.lock = nth, 0, threading.Lock()

    def __call__(self, point: str) -> None:
        if point != "render":
            return
        with self.lock:
            self.seen += 1
            if self.seen == self.nth:
                raise ProviderUnavailable("the provider went away (injected)")


IDENTICAL: dict[str, tuple[str, dict[str, Any]]] = {
    "jsonl": ("jsonl", {}),
    "parquet": ("parquet", {}),
    "csv-split": ("csv", PACKAGINGS["split"]),
    "parquet-split": ("parquet", PACKAGINGS["split"]),
}


@pytest.mark.parametrize("case", list(IDENTICAL))
def test_sharded_files_are_the_same_bytes_whatever_the_parallelism_or_a_resume(
    combo: ComboStack, case: str
) -> None:
    fmt, options = IDENTICAL[case]
    stack = combo.stack
    settings, consumer = stack.runtime.settings.task, stack.runtime.consumer
    cap, factory = settings.shard_parallel_cap, consumer.run_factory
    client = stack.client()
    files: dict[str, bytes] = {}
    try:
        for label, parallel in (("4 at once", 4), ("1 at a time", 1)):
            settings.shard_parallel_cap = parallel
            detail, download = run_export(client, fmt, RANGE, columns=CHOSEN, options=options)
            assert detail["shardsTotal"] == RANGE_SHARDS and detail["attempts"] == 1
            files[label] = download.content
        # One at a time, the first attempt fails before its 4th page (the second of the
        # second day's shard): the first shard is done, the second half checkpointed.
        settings.shard_parallel_cap = 1
        consumer.run_factory = FaultInjectingRun.with_fault(_FailOnce(4))
        detail, download = run_export(client, fmt, RANGE, columns=CHOSEN, options=options)
        files["resumed"] = download.content
    finally:
        settings.shard_parallel_cap, consumer.run_factory = cap, factory
    assert detail["attempts"] == 2, detail
    with stack.runtime.engine.connect() as conn:
        resumes = conn.execute(
            select(AUDIT.c.outcome, AUDIT.c.reason).where(
                AUDIT.c.task_no == detail["taskId"], AUDIT.c.action == "resume"
            )
        ).all()
    assert [r.outcome for r in resumes] == ["resumed"], resumes
    assert combo.probe.served(detail["taskId"]) < 2 * RANGE_ROWS  # the done shard was kept
    name, inside, _type = file_names(fmt, "split" if options else "plain")
    runs = {label: unpack(data, name) for label, data in files.items()}
    if not options:  # the file itself
        assert files["4 at once"] == files["1 at a time"] == files["resumed"]
    else:  # a ZIP: the same parts byte for byte; its manifest.json names its own task
        assert runs["4 at once"] == runs["1 at a time"] == runs["resumed"]
        inner = [zip_manifest(data) for data in files.values()]
        assert len({m["taskId"] for m in inner}) == 3
        assert inner[0]["files"] == inner[1]["files"] == inner[2]["files"]
        assert inner[0]["controlTotals"] == inner[1]["controlTotals"] == inner[2]["controlTotals"]
    # And the file is the export asked for, not three equal wrong ones.
    parts = runs["resumed"]
    assert [p.name for p in parts] == inside
    rows = [r for p in parts for r in read_table(fmt, p.data).rows]
    assert [canonical(fmt, CHOSEN_KEYS, r) for r in rows] == expected_rows(
        baseline(combo, "sharded"), CHOSEN_KEYS
    )
