"""``export-center verify`` end to end, on SQLite and MariaDB: a real subprocess checks a
file downloaded from the running stack against the manifest the API answers
(``--task ID --url URL --token T``) or against the ``manifest.json`` inside a split ZIP.

The untouched download matches (exit 0, the signature checked with the installation's
key). Then the file is changed the way a real tool would change it (``csv``,
``json``, ``openpyxl`` or ``pyarrow`` writes it back): one amount a cent higher, the
last row deleted; or cut in half; or a split ZIP rebuilt with two parts swapped. Each
exits 1 and names the difference: the total that moved and by how much, the rows, the
bytes, the parts out of order.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.combo_stack import ComboStack, combo, run_export  # noqa: F401 - fixture
from tests.support.combos import BOM, CHOSEN, RANGE, RANGE_ROWS, rezip, unpack
from tests.support.operator_seed import cli_env, run_cli

CENT = Decimal("0.01")


def _verify(combo: ComboStack, path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``export-center verify PATH ARGS...`` in a subprocess on this stack's machine."""
    return run_cli(["verify", str(path), *args], cli_env(combo.stack.settings))


def _by_api(combo: ComboStack, task_id: str) -> list[str]:
    return ["--task", task_id, "--url", combo.stack.url, "--token", combo.stack.token()]


def _csv_edit(data: bytes, edit: Callable[[list[list[str]]], None]) -> bytes:
    records = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    edit(records)
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(records)
    return BOM + out.getvalue().encode("utf-8")


def _csv_raise(records: list[list[str]]) -> None:
    records[1][0] = str(Decimal(records[1][0]) + CENT)


def _jsonl_edit(data: bytes, edit: Callable[[list[dict[str, Any]]], None]) -> bytes:
    items = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    edit(items)
    return "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items).encode("utf-8")


def _jsonl_raise(items: list[dict[str, Any]]) -> None:
    items[0]["o_totalprice"] = str(Decimal(items[0]["o_totalprice"]) + CENT)


def _xlsx_edit(data: bytes, edit: Callable[[Any], None]) -> bytes:
    book = openpyxl.load_workbook(io.BytesIO(data))
    edit(book.worksheets[0])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _xlsx_raise(sheet: Any) -> None:
    cell = sheet.cell(row=2, column=1)
    cell.value = float(Decimal(repr(cell.value)) + CENT)


def _parquet_edit(data: bytes, edit: Callable[[Any], Any]) -> bytes:
    out = io.BytesIO()
    pq.write_table(edit(pq.read_table(io.BytesIO(data))), out)
    return out.getvalue()


def _parquet_raise(table: Any) -> Any:
    index = table.schema.get_field_index("o_totalprice")
    field = table.schema.field(index)
    values = table.column(index).to_pylist()
    values[0] += CENT
    return table.set_column(index, field, pa.array(values, type=field.type))


CHANGED: dict[str, Callable[[bytes], bytes]] = {
    "csv": lambda data: _csv_edit(data, _csv_raise),
    "xlsx": lambda data: _xlsx_edit(data, _xlsx_raise),
    "jsonl": lambda data: _jsonl_edit(data, _jsonl_raise),
    "parquet": lambda data: _parquet_edit(data, _parquet_raise),
}
"""The file with the first row's amount one cent higher, written back by a real tool."""
DELETED: dict[str, Callable[[bytes], bytes]] = {
    "csv": lambda data: _csv_edit(data, lambda records: records.pop()),
    "xlsx": lambda data: _xlsx_edit(data, lambda sheet: sheet.delete_rows(sheet.max_row)),
    "jsonl": lambda data: _jsonl_edit(data, lambda items: items.pop()),
    "parquet": lambda data: _parquet_edit(data, lambda table: table.slice(0, table.num_rows - 1)),
}
"""The file without its last data row."""


def _lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.stderr == "", result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("fmt", ["csv", "xlsx", "jsonl", "parquet"])
def test_verify_passes_the_download_and_names_a_changed_cell_a_deleted_row_and_a_cut(
    combo: ComboStack, tmp_path: Path, fmt: str
) -> None:
    client = combo.stack.client()
    detail, download = run_export(client, fmt, RANGE, columns=CHOSEN, taskName="orders")
    name, data = detail["fileName"], download.content
    manifest = client.get(f"/api/v1/exports/{detail['taskId']}/manifest").json()
    total = Decimal(manifest["controlTotals"]["columns"]["o_totalprice"]["sum"])
    api = _by_api(combo, detail["taskId"])
    cases = {
        "untouched": data,
        "changed": CHANGED[fmt](data),
        "deleted": DELETED[fmt](data),
        "truncated": data[: len(data) // 2],
    }
    found: dict[str, subprocess.CompletedProcess[str]] = {}
    for case, content in cases.items():
        (tmp_path / case).mkdir()
        path = tmp_path / case / name
        path.write_bytes(content)
        found[case] = _verify(combo, path, *api)

    untouched = _lines(found["untouched"])
    assert found["untouched"].returncode == 0, untouched
    assert untouched[0] == f"manifest: {combo.stack.url} task {detail['taskId']}"
    assert untouched[1].startswith("signature ok (keyId ")
    assert untouched[-1] == f"{name}: matches"

    changed = _lines(found["changed"])
    assert found["changed"].returncode == 1, changed
    assert f"control total o_totalprice.sum: expected {total} found {total + CENT}" in changed
    assert any(line.startswith(f"{name}: sha256 expected ") for line in changed), changed

    deleted = _lines(found["deleted"])
    assert found["deleted"].returncode == 1, deleted
    assert f"{name}: rows expected {RANGE_ROWS} found {RANGE_ROWS - 1}" in deleted
    assert f"control total rowCount: expected {RANGE_ROWS} found {RANGE_ROWS - 1}" in deleted

    truncated = _lines(found["truncated"])
    assert found["truncated"].returncode == 1, truncated
    assert f"{name}: bytes expected {len(data)} found {len(data) // 2}" in truncated
    if fmt in ("csv", "jsonl"):  # cut inside a row: said so, rather than "unreadable"
        assert any(line.startswith(f"{name}: truncated: ") for line in truncated), truncated
    for case in ("changed", "deleted", "truncated"):  # manifest, signature, lines, count
        lines = _lines(found[case])
        assert lines[-1] == f"{name}: {len(lines) - 3} difference(s)", lines


def test_verify_reads_a_gzip_download_inside(combo: ComboStack, tmp_path: Path) -> None:
    client = combo.stack.client()
    options = {"compression": "gzip"}
    detail, download = run_export(client, "jsonl", RANGE, columns=CHOSEN, options=options)
    manifest = client.get(f"/api/v1/exports/{detail['taskId']}/manifest").json()
    total = Decimal(manifest["controlTotals"]["columns"]["o_totalprice"]["sum"])
    path = tmp_path / detail["fileName"]
    assert path.name == "orders.jsonl.gz"
    path.write_bytes(download.content)
    result = _verify(combo, path, *_by_api(combo, detail["taskId"]))
    assert result.returncode == 0 and _lines(result)[-1] == "orders.jsonl.gz: matches"
    # One amount a cent higher inside, gzipped again: the total inside is what differs.
    changed = CHANGED["jsonl"](gzip.decompress(download.content))
    path.write_bytes(gzip.compress(changed, mtime=0))
    result = _verify(combo, path, *_by_api(combo, detail["taskId"]))
    lines = _lines(result)
    assert result.returncode == 1, lines
    assert f"control total o_totalprice.sum: expected {total} found {total + CENT}" in lines


def test_verify_checks_a_split_zip_by_its_own_manifest_and_catches_swapped_parts(
    combo: ComboStack, tmp_path: Path
) -> None:
    client = combo.stack.client()
    options = {"split": {"maxRowsPerFile": 7}}
    detail, download = run_export(client, "csv", RANGE, columns=CHOSEN, options=options)
    name, data = detail["fileName"], download.content
    parts = [p.name for p in unpack(data, name)]
    assert parts == [f"orders-part-000{n}.csv" for n in (1, 2, 3, 4)]
    path = tmp_path / name
    path.write_bytes(data)
    inside = _verify(combo, path)  # no --task: the ZIP's manifest.json
    lines = _lines(inside)
    assert inside.returncode == 0, lines
    assert lines[0] == "manifest: manifest.json in the ZIP"
    assert lines[1].startswith("signature ok (keyId ")
    assert lines[-1] == f"{name}: matches"
    by_api = _verify(combo, path, *_by_api(combo, detail["taskId"]))
    assert by_api.returncode == 0 and _lines(by_api)[-1] == f"{name}: matches"

    path.write_bytes(rezip(data, [1, 0, 2, 3, 4]))  # parts 1 and 2 swapped, manifest last
    swapped = [
        f"parts out of order: {parts[1]} is part 2, expected part 1",
        f"parts out of order: {parts[0]} is part 1, expected part 2",
    ]
    for args in ((), tuple(_by_api(combo, detail["taskId"]))):
        result = _verify(combo, path, *args)
        lines = _lines(result)
        assert result.returncode == 1, lines
        assert [line for line in lines if line.startswith("parts out of order")] == swapped
        # Each part is compared with its own entry: the parts are intact and all there,
        # no part's hash and no total differs, only the order does.
        assert not any(line.startswith(tuple(parts)) for line in lines), lines
        assert not any(line.startswith("control total") for line in lines), lines
        if args:  # the API's manifest knows the ZIP's own hash
            assert any(line.startswith(f"{name}: sha256 expected ") for line in lines)
