"""The bench's split-download check (bench.split_check) says when the served bytes are
not what the manifest describes: a figure that stayed true whatever the ZIP held would
let the file-formats bench report a broken split as a good one."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from bench.split_check import inspect_split, read_part

TITLES = ["Order", "Comment"]


def _part(rows: range, header: list[str] = TITLES) -> bytes:
    lines = [",".join(header)] + [f'{i},"text, {i}"' for i in rows]
    return ("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8")


def _download(tmp_path: Path, parts: dict[str, bytes], files: list[dict[str, Any]]) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in parts.items():
            zf.writestr(name, data)
        zf.writestr("manifest.json", json.dumps({"files": files}))
    path = tmp_path / "export.zip"
    path.write_bytes(buffer.getvalue())
    return path


def _entry(name: str, data: bytes, rows: int) -> dict[str, Any]:
    return {
        "name": name,
        "rows": rows,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _manifest(path: Path, files: list[dict[str, Any]]) -> dict[str, Any]:
    served = path.read_bytes()
    return {
        "options": {"encoding": "utf-8-bom", "delimiter": ",", "header": True},
        "columns": [{"key": t.lower(), "title": t, "type": "STRING"} for t in TITLES],
        "totalRows": sum(f["rows"] for f in files),
        "files": files,
        "archive": {
            "name": "export.zip",
            "bytes": len(served),
            "sha256": hashlib.sha256(served).hexdigest(),
        },
    }


def test_a_good_split_has_every_figure_true(tmp_path: Path) -> None:
    parts = {"a-part-0001.csv": _part(range(3)), "a-part-0002.csv": _part(range(3, 5))}
    files = [
        _entry("a-part-0001.csv", parts["a-part-0001.csv"], 3),
        _entry("a-part-0002.csv", parts["a-part-0002.csv"], 2),
    ]
    path = _download(tmp_path, parts, files)
    got = inspect_split(path, _manifest(path, files))
    assert got["parts"] == 2 and got["partRows"] == [3, 2] and got["rowsTotal"] == 5
    assert got["manifestTotalRows"] == 5
    flags = [
        "hasManifestJson",
        "partsReadableAlone",
        "archiveBytesEqual",
        "archiveSha256Equal",
        "fileNamesEqual",
        "fileRowsEqual",
        "fileBytesEqual",
        "fileSha256Equal",
        "zipManifestFilesEqual",
    ]
    assert {flag: got[flag] for flag in flags} == dict.fromkeys(flags, True)


def test_a_changed_part_a_wrong_header_and_other_bytes_are_reported(tmp_path: Path) -> None:
    good = _part(range(3))
    changed = good.replace(b"text, 1", b"text, 9")
    files = [_entry("a-part-0001.csv", good, 3), _entry("a-part-0002.csv", _part(range(3, 5)), 2)]
    parts = {
        "a-part-0001.csv": changed,
        "a-part-0002.csv": _part(range(3, 5), ["Order", "Remarks"]),
    }
    path = _download(tmp_path, parts, files)
    manifest = _manifest(path, files)
    manifest["archive"]["sha256"] = "0" * 64  # the manifest of some other download
    got = inspect_split(path, manifest)
    assert got["fileSha256Equal"] is False
    assert got["fileRowsEqual"] is True and got["fileBytesEqual"] is True  # same size
    assert got["partsReadableAlone"] is False
    assert list(got["partErrors"]) == ["a-part-0002.csv"]
    assert got["archiveSha256Equal"] is False and got["archiveBytesEqual"] is True


def test_a_part_that_does_not_parse_alone_says_why() -> None:
    broken = b'1,"an open quote\r\n'
    got = read_part(broken, encoding="utf-8", delimiter=",", header=False)
    assert got["error"] is not None
    gbk = "单号,备注\r\n1,张三\r\n".encode("gb18030")
    read = read_part(gbk, encoding="gb18030", delimiter=",", header=True)
    assert read == {"rows": 1, "header": ["单号", "备注"], "widths": [2], "error": None}
