"""``export-center verify`` in a subprocess on files made by the package, for every
format: the untouched file matches (exit 0); a changed cell, a deleted row, a truncated
file (``truncated`` for CSV and JSON Lines), parts swapped, missing or renamed inside
the ZIP, a tampered signature and, with the key at hand, a manifest without signature
each exit 1 and name what differs; usage errors exit 2. ``--manifest`` checks a plain
CSV and a gzip JSON Lines file."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import http.server
import io
import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from export_center.filespec import FileSpec
from export_center.packaging.manifest import build_manifest, sign_manifest
from export_center.packaging.package import Package
from tests.support.package_rows import COLUMNS, make_rows, package, spec

ROOT = Path(__file__).resolve().parents[2]
KEY = "verify-test-manifest-key-0123456789abcdef"
ROWS = make_rows(1_500)
FORMATS = ["csv", "xlsx", "jsonl", "parquet"]
EXT = {fmt: fmt for fmt in FORMATS}  # each format's extension is its name


def _manifest(fmt: str, file_spec: FileSpec, files, totals, archive) -> dict[str, Any]:
    body = build_manifest(
        task_id="exp_verify",
        export_type="ORDERS",
        parameters={"from": "2024-01-01"},
        file_format=fmt,
        options=file_spec.to_json()["options"],
        time_zone="Asia/Shanghai",
        columns=COLUMNS,
        files=files,
        archive=archive,
        control_totals=totals.as_json(),
        snapshot_token="snap-1",
        created_at=dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC),
        finished_at=dt.datetime(2024, 5, 1, 12, 1, tzinfo=dt.UTC),
    )
    return sign_manifest(body, KEY)


def _make(fmt: str, file_spec: FileSpec) -> tuple[bytes, Package, dict[str, Any]]:
    """The delivered bytes, the package, and the signed manifest the API would answer."""
    data, pack = package(
        fmt,
        file_spec,
        ROWS,
        batches=[500, 77],
        manifest=lambda files, totals: _manifest(fmt, file_spec, files, totals, None),
    )
    return data, pack, _manifest(fmt, file_spec, pack.files, pack.totals, pack.archive)


def _verify(tmp_path: Path, name: str, data: bytes | None, *args: str, key: str = KEY):
    path = tmp_path / name
    if data is not None:
        path.write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "EXPORT_CENTER_ENVIRONMENT": "test",
            "EXPORT_CENTER_DATA_DIR": str(tmp_path / "data"),
            "EXPORT_CENTER_API__MANIFEST_SECRET": key,
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "export_center.cli", "verify", str(path), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def _members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(n, archive.read(n)) for n in archive.namelist()]


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in members:
            archive.writestr(name, body)
    return out.getvalue()


def _edit_part(data: bytes, index: int, edit: Callable[[bytes], bytes]) -> tuple[bytes, str]:
    """The ZIP with part ``index`` edited (manifest.json kept as it was)."""
    members = _members(data)
    name, body = members[index]
    changed = edit(body)
    assert changed != body
    members[index] = (name, changed)
    return _zip(members), name


# --- edits a user's tools would make, per format ---------------------------------------


def _xlsx_edit_sheet(body: bytes, change: Callable[[str], str]) -> bytes:
    members = _members(body)
    members = [
        (n, change(b.decode()).encode() if n == "xl/worksheets/sheet1.xml" else b)
        for n, b in members
    ]
    return _zip(members)


def _change_price(fmt: str, body: bytes) -> bytes:
    """One digit of the price of the part's second data row (3.01 -> 3.02 in part 1)."""
    if fmt in ("csv", "jsonl"):
        old = b",3.01," if fmt == "csv" else b'"amount":"3.01"'
        return body.replace(old, old.replace(b"3.01", b"3.02"), 1)
    if fmt == "xlsx":
        return _xlsx_edit_sheet(
            body, lambda xml: re.sub(r'(<c r="C3"[^>]*><v>)3\.01<', r"\g<1>3.02<", xml, count=1)
        )
    table = pq.read_table(io.BytesIO(body))
    amounts = table.column("amount").to_pylist()
    amounts[1] = Decimal("3.02")
    index = table.schema.get_field_index("amount")
    table = table.set_column(
        index, table.schema.field(index), pa.array(amounts, table.schema.field(index).type)
    )
    out = io.BytesIO()
    pq.write_table(table, out, compression="snappy")
    return out.getvalue()


def _delete_row(fmt: str, body: bytes) -> bytes:
    """Delete the fifth data row of part 2 (id 604), as an editor would."""
    if fmt == "csv":  # a record starts after CRLF (its text holds a quoted LF)
        text = body.decode("utf-8-sig")
        start = text.index("\r\n604,") + 2
        end = text.index("\r\n605,") + 2
        return ("\ufeff" + text[:start] + text[end:]).encode()
    if fmt == "jsonl":
        start = body.index(b'{"id":604,')
        end = body.index(b"\n", start) + 1
        return body[:start] + body[end:]
    if fmt == "xlsx":
        book = openpyxl.load_workbook(io.BytesIO(body))
        book.worksheets[0].delete_rows(6)  # row 1 is the header
        out = io.BytesIO()
        book.save(out)
        return out.getvalue()
    table = pq.read_table(io.BytesIO(body))
    table = pa.concat_tables([table.slice(0, 4), table.slice(5)])
    out = io.BytesIO()
    pq.write_table(table, out, compression="snappy")
    return out.getvalue()


# --- the ZIP with its signed manifest.json, per format ---------------------------------


@pytest.fixture(scope="module", params=FORMATS)
def split_zip(request):
    fmt = request.param
    file_spec = spec("zip", rows=600)
    data, pack, api_manifest = _make(fmt, file_spec)
    assert [f.rows for f in pack.files] == [600, 600, 300]
    return fmt, data, pack, api_manifest


def _found_sum(stdout: str, expected: str) -> Decimal:
    """The amount sum verify found, from its line naming the expected one."""
    head = f"control total amount.sum: expected {expected} found "
    [line] = [line for line in stdout.splitlines() if line.startswith(head)]
    return Decimal(line[len(head) :])


def _ok(result) -> None:
    assert result.returncode == 0, (result.stdout, result.stderr)


def test_the_untouched_zip_matches(split_zip, tmp_path):
    fmt, data, _, _ = split_zip
    result = _verify(tmp_path, "orders.zip", data)
    _ok(result)
    assert "manifest: manifest.json in the ZIP" in result.stdout
    assert "signature ok" in result.stdout
    assert result.stdout.rstrip().endswith("orders.zip: matches")


def test_a_changed_price_is_named(split_zip, tmp_path):
    fmt, data, pack, _ = split_zip
    changed, name = _edit_part(data, 0, lambda body: _change_price(fmt, body))
    result = _verify(tmp_path, "orders.zip", changed)
    assert result.returncode == 1, result.stdout
    assert f"{name}: sha256 expected {pack.files[0].sha256}" in result.stdout
    expected = pack.totals.as_json()["columns"]["amount"]["sum"]
    assert _found_sum(result.stdout, expected) == Decimal(expected) + Decimal("0.01")
    assert "difference(s)" in result.stdout and "matches" not in result.stdout


def test_a_deleted_row_is_named(split_zip, tmp_path):
    fmt, data, pack, _ = split_zip
    changed, name = _edit_part(data, 1, lambda body: _delete_row(fmt, body))
    result = _verify(tmp_path, "orders.zip", changed)
    assert result.returncode == 1, result.stdout
    assert f"{name}: rows expected 600 found 599" in result.stdout
    assert "control total rowCount: expected 1500 found 1499" in result.stdout
    assert "totalRows: expected 1500 found 1499" in result.stdout


def test_a_truncated_part_is_named(split_zip, tmp_path):
    fmt, data, pack, _ = split_zip
    changed, name = _edit_part(data, 2, lambda body: body[: len(body) * 2 // 3])
    result = _verify(tmp_path, "orders.zip", changed)
    assert result.returncode == 1, result.stdout
    size = pack.files[2].bytes
    assert f"{name}: bytes expected {size} found {size * 2 // 3}" in result.stdout
    if fmt in ("xlsx", "parquet"):  # the reader refuses a cut file
        assert f"{name}: unreadable: cannot read the file as {fmt}" in result.stdout
    else:  # the last row has lost its end (the cut falls inside a row)
        assert f"{name}: truncated: " in result.stdout, result.stdout
        assert f"{name}: unreadable" not in result.stdout
    assert "control total" not in result.stdout  # a part was not read: no totals


def test_a_truncated_download_is_named_with_the_api_manifest(split_zip, tmp_path):
    fmt, data, pack, api_manifest = split_zip
    (tmp_path / "m.json").write_text(json.dumps(api_manifest), encoding="utf-8")
    cut = data[: len(data) // 2]
    result = _verify(tmp_path, "orders.zip", cut, "--manifest", str(tmp_path / "m.json"))
    assert result.returncode == 1, result.stdout
    assert f"orders.zip: bytes expected {len(data)} found {len(cut)}" in result.stdout
    assert "orders.zip: not a readable ZIP" in result.stdout
    whole = _verify(tmp_path, "orders.zip", data, "--manifest", str(tmp_path / "m.json"))
    _ok(whole)  # the API's manifest also names the ZIP's own hash: it matches


def _differences(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The output lines between the manifest and signature lines and the summary."""
    return [
        line
        for line in result.stdout.splitlines()
        if not line.startswith(("manifest: ", "signature ok", "signature not checked"))
        and not line.endswith(("difference(s)", ": matches"))
    ]


def test_parts_in_another_order_are_named(split_zip, tmp_path):
    fmt, data, pack, _ = split_zip
    members = _members(data)
    swapped = _zip([members[1], members[0], *members[2:]])
    result = _verify(tmp_path, "orders.zip", swapped)
    assert result.returncode == 1, result.stdout
    first, second = pack.files[0].name, pack.files[1].name
    # Each part is compared with its own entry: they are intact, only the order differs.
    assert _differences(result) == [
        f"parts out of order: {second} is part 2, expected part 1",
        f"parts out of order: {first} is part 1, expected part 2",
    ]
    assert result.stdout.rstrip().endswith("orders.zip: 2 difference(s)")


def test_a_missing_part_is_named_once_and_the_later_parts_still_match(split_zip, tmp_path):
    fmt, data, pack, _ = split_zip
    members = _members(data)
    result = _verify(tmp_path, "orders.zip", _zip([members[0], *members[2:]]))
    assert result.returncode == 1, result.stdout
    assert _differences(result) == [f"part 2 of 3 is missing: {pack.files[1].name}"]


def test_a_missing_part_and_the_rest_out_of_order(tmp_path):
    data, pack, _ = _make("csv", spec("zip", rows=300))
    names = [f.name for f in pack.files]
    assert len(names) == 5
    members = _members(data)  # five parts, then manifest.json
    shuffled = [members[4], members[0], members[1], members[3], members[5]]  # part 3 gone
    result = _verify(tmp_path, "orders.zip", _zip(shuffled))
    assert result.returncode == 1, result.stdout
    assert _differences(result) == [
        f"part 3 of 5 is missing: {names[2]}",
        f"parts out of order: {names[4]} is part 5, expected part 1",
        f"parts out of order: {names[0]} is part 1, expected part 2",
        f"parts out of order: {names[1]} is part 2, expected part 4",
        f"parts out of order: {names[3]} is part 4, expected part 5",
    ]
    extra = [*members[:5], ("notes.txt", b"hi"), members[5]]
    stranger = _verify(tmp_path, "orders.zip", _zip(extra))
    assert stranger.returncode == 1
    assert _differences(stranger) == ["notes.txt: not a part in the manifest"]


def test_a_renamed_part_is_named(split_zip, tmp_path):
    fmt, data, pack, _ = split_zip
    members = _members(data)
    members[2] = (f"orders-part-0009.{EXT[fmt]}", members[2][1])
    result = _verify(tmp_path, "orders.zip", _zip(members))
    assert result.returncode == 1, result.stdout
    expected = pack.files[2].name
    assert _differences(result) == [
        f"orders-part-0009.{EXT[fmt]} is part 3 renamed: expected the name {expected}"
    ]


def _with_manifest(data: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    members = _members(data)
    body = json.loads(members[-1][1])
    change(body)
    members[-1] = ("manifest.json", json.dumps(body).encode())
    return _zip(members)


def test_a_tampered_manifest_fails_its_signature(tmp_path):
    data, _, _ = _make("csv", spec("zip", rows=600))
    edited = _with_manifest(data, lambda body: body.update(snapshotToken="snap-2"))
    result = _verify(tmp_path, "orders.zip", edited)
    assert result.returncode == 1, result.stdout
    assert "signature: does not match the manifest's contents" in result.stdout

    def forge(body: dict[str, Any]) -> None:
        body["signature"]["value"] = "0" * 64

    forged = _verify(tmp_path, "orders.zip", _with_manifest(data, forge))
    assert forged.returncode == 1
    assert "signature: does not match the manifest's contents" in forged.stdout

    other = _verify(tmp_path, "orders.zip", data, key="another-installation-key-0123456789")
    assert other.returncode == 1
    assert (
        "signature: keyId expected" in other.stdout and "(signed with another key)" in other.stdout
    )

    unchecked = _verify(tmp_path, "orders.zip", data, key="")
    _ok(unchecked)
    assert "signature not checked: no manifest key here" in unchecked.stdout


def test_a_manifest_without_signature_differs_when_the_key_is_here(tmp_path):
    data, _, manifest = _make("csv", spec())
    del manifest["signature"]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    args = ("--manifest", str(path))
    by_setting = _verify(tmp_path, "orders.csv", data, *args)
    assert by_setting.returncode == 1, by_setting.stdout
    assert _differences(by_setting) == ["signature: the manifest is not signed"]
    assert "signature not checked" not in by_setting.stdout
    # The key from the data directory's generated manifest-secret.txt counts the same.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "manifest-secret.txt").write_text(KEY + "\n", encoding="utf-8")
    by_file = _verify(tmp_path, "orders.csv", data, *args, key="")
    assert by_file.returncode == 1, by_file.stdout
    assert _differences(by_file) == ["signature: the manifest is not signed"]
    (tmp_path / "data" / "manifest-secret.txt").unlink()
    no_key = _verify(tmp_path, "orders.csv", data, *args, key="")
    _ok(no_key)
    assert "signature not checked: no manifest key here; the manifest is not signed" in (
        no_key.stdout
    )
    assert no_key.stdout.rstrip().endswith("orders.csv: matches")
    # Inside a ZIP too.
    zipped, _, _ = _make("jsonl", spec("zip", rows=600))
    unsigned = _with_manifest(zipped, lambda body: body.pop("signature"))
    inside = _verify(tmp_path, "orders.zip", unsigned)
    assert inside.returncode == 1, inside.stdout
    assert _differences(inside) == ["signature: the manifest is not signed"]


# --- --manifest with a plain CSV and a gzip JSON Lines file ----------------------------


@pytest.mark.parametrize(
    ("fmt", "compression", "name"),
    [("csv", "none", "orders.csv"), ("jsonl", "gzip", "orders.jsonl.gz")],
)
def test_a_plain_or_gzip_file_checks_against_its_manifest(fmt, compression, name, tmp_path):
    data, pack, manifest = _make(fmt, spec(compression))
    assert pack.delivered_name == name and pack.archive is None
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    result = _verify(tmp_path, name, data, "--manifest", str(path))
    _ok(result)
    assert f"manifest: {path}" in result.stdout and "signature ok" in result.stdout
    assert result.stdout.rstrip().endswith(f"{name}: matches")

    plain = gzip.decompress(data) if compression == "gzip" else data
    changed = _change_price(fmt, plain)
    if compression == "gzip":
        changed = gzip.compress(changed, mtime=0)
    broken = _verify(tmp_path, name, changed, "--manifest", str(path))
    assert broken.returncode == 1, broken.stdout
    assert f"{name}: sha256 expected {pack.files[0].sha256}" in broken.stdout
    expected = pack.totals.as_json()["columns"]["amount"]["sum"]
    assert _found_sum(broken.stdout, expected) == Decimal(expected) + Decimal("0.01")


@pytest.mark.parametrize(
    ("fmt", "compression", "name", "says"),
    [
        ("csv", "none", "orders.csv", "truncated: the last row does not end with CRLF"),
        ("jsonl", "none", "orders.jsonl", "truncated: the last row does not end with LF"),
        ("jsonl", "gzip", "orders.jsonl.gz", "truncated: the gzip stream ends before its end"),
    ],
)
def test_a_file_cut_inside_a_row_says_truncated(fmt, compression, name, says, tmp_path):
    data, pack, manifest = _make(fmt, spec(compression))
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    plain = gzip.decompress(data) if compression == "gzip" else data
    # Where row 700 starts: the end of the first 700 rows.
    row_end = plain.index(b'\n{"id":700,') + 1 if fmt == "jsonl" else plain.index(b"\r\n700,") + 2
    cut = data[: len(data) - 9] if compression == "gzip" else plain[: row_end - 5]
    result = _verify(tmp_path, name, cut, "--manifest", str(path))
    assert result.returncode == 1, result.stdout
    size = pack.files[0].bytes
    assert _differences(result) == [
        f"{name}: bytes expected {size} found {len(cut)}",
        f"{name}: sha256 expected {pack.files[0].sha256} found {hashlib.sha256(cut).hexdigest()}",
        f"{name}: {says}",
    ]
    # Cut at a row's end instead: a complete file with rows missing, not "truncated".
    if compression == "none":
        whole_rows = plain[:row_end]
        shorter = _verify(tmp_path, name, whole_rows, "--manifest", str(path))
        assert shorter.returncode == 1
        assert "truncated" not in shorter.stdout
        assert f"{name}: rows expected 1500 found 700" in shorter.stdout


# --- usage errors ----------------------------------------------------------------------


def test_usage_errors_exit_2(tmp_path):
    data, _, manifest = _make("csv", spec())
    missing = _verify(tmp_path, "absent.zip", None)
    assert missing.returncode == 2 and "verify: cannot read" in missing.stderr
    no_manifest = _verify(tmp_path, "orders.csv", data)
    assert no_manifest.returncode == 2
    assert "no manifest: give --manifest M.json or --task TASK_ID --url URL" in no_manifest.stderr
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    bad = _verify(tmp_path, "orders.csv", data, "--manifest", str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "cannot read the manifest" in bad.stderr
    (tmp_path / "odd.json").write_text('{"files": []}', encoding="utf-8")
    odd = _verify(tmp_path, "orders.csv", data, "--manifest", str(tmp_path / "odd.json"))
    assert odd.returncode == 2 and "the manifest is not readable" in odd.stderr
    task = _verify(tmp_path, "orders.csv", data, "--task", "exp_1")
    assert task.returncode == 2 and "--task needs --url" in task.stderr
    unknown = _verify(tmp_path, "orders.csv", data, "--colour")
    assert unknown.returncode == 2
    assert manifest["files"][0]["name"] == "orders.csv"


# --- --task: the manifest from the API over loopback HTTP -------------------------------


class _ManifestApi(http.server.BaseHTTPRequestHandler):
    """Answers the manifest of task ``exp_verify`` to the bearer token ``t0ken``."""

    manifest: dict[str, Any] = {}

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
        if self.headers.get("authorization") != "Bearer t0ken":
            status, body = 401, b'{"code": "UNAUTHENTICATED"}'
        elif self.path == "/api/v1/exports/exp_verify/manifest":
            status, body = 200, json.dumps(self.manifest).encode()
        else:
            status, body = 404, b'{"code": "MANIFEST_NOT_FOUND"}'
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


def test_the_manifest_comes_from_the_api_with_task(tmp_path):
    data, _, manifest = _make("parquet", spec("zip", rows=600))
    _ManifestApi.manifest = manifest
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ManifestApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        args = ("--task", "exp_verify", "--url", url)
        result = _verify(tmp_path, "orders.zip", data, *args, "--token", "t0ken")
        _ok(result)
        assert f"manifest: {url} task exp_verify" in result.stdout
        assert result.stdout.rstrip().endswith("orders.zip: matches")
        refused = _verify(tmp_path, "orders.zip", data, *args, "--token", "wrong")
        assert refused.returncode == 2
        assert "the API answered 401 for the manifest of exp_verify" in refused.stderr
        other = _verify(tmp_path, "orders.zip", data[:-10], *args, "--token", "t0ken")
        assert other.returncode == 1 and "orders.zip: sha256 expected" in other.stdout
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
