"""Check a delivered file against its manifest, from the file's bytes alone.

:func:`differences` recomputes, for the downloaded file or for each part in its ZIP
(in ZIP order, ``manifest.json`` left out): the bytes, the SHA-256, the data rows and
the control totals (``packaging.reading``), and compares them with the manifest. It
returns one line per difference, naming the file and the total, then the expected and
the found value; no line means the file matches. It catches a changed cell (hash,
totals), a deleted row (rows, totals), a truncated file (bytes, hash, unreadable),
parts in another order or renamed (the part names, position by position).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from export_center.columns import Column, ColumnType
from export_center.packaging.package import MANIFEST_NAME
from export_center.packaging.reading import (
    UnreadableFile,
    recount,
    same_instant,
    time_resolution_us,
)
from export_center.packaging.totals import ControlTotals

__all__ = ["differences", "manifest_columns", "read_zip_manifest"]


def manifest_columns(manifest: Mapping[str, Any]) -> list[Column]:
    """The manifest's ``columns`` as :class:`Column` (key, title, type).

    Raises:
        ValueError: ``columns`` is missing or an item lacks key, title or a known type.
    """
    try:
        return [
            Column(str(c["key"]), str(c["title"]), ColumnType(c["type"]))
            for c in manifest["columns"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the manifest's columns are not readable: {exc!r}") from None


def _compare_file(
    name: str, data: bytes, expected: Mapping[str, Any], manifest: Mapping[str, Any]
) -> tuple[list[str], ControlTotals | None]:
    lines = []
    size = len(data)
    if size != expected.get("bytes"):
        lines.append(f"{name}: bytes expected {expected.get('bytes')} found {size}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected.get("sha256"):
        lines.append(f"{name}: sha256 expected {expected.get('sha256')} found {digest}")
    try:
        totals = recount(
            data,
            file_format=str(manifest.get("format")),
            columns=manifest_columns(manifest),
            options=manifest.get("options") or {},
            time_zone=str(manifest.get("timeZone") or "UTC"),
            gzipped=name.endswith(".gz"),
        )
    except UnreadableFile as exc:
        lines.append(f"{name}: unreadable: {exc}")
        return lines, None
    if totals.rows != expected.get("rows"):
        lines.append(f"{name}: rows expected {expected.get('rows')} found {totals.rows}")
    return lines, totals


def _decimal(text: Any) -> Decimal | None:
    try:
        return Decimal(str(text))
    except ArithmeticError:
        return None


def _compare_totals(manifest: Mapping[str, Any], found: ControlTotals) -> list[str]:
    expected = manifest.get("controlTotals") or {}
    got = found.as_json()
    lines = []
    if expected.get("rowCount") != got["rowCount"]:
        lines.append(
            f"control total rowCount: expected {expected.get('rowCount')} found {got['rowCount']}"
        )
    step_us = time_resolution_us(str(manifest.get("format")))
    wanted: Mapping[str, Any] = expected.get("columns") or {}
    for key in sorted(set(wanted) | set(got["columns"])):
        mine, theirs = wanted.get(key) or {}, got["columns"].get(key) or {}
        for field in ("sum", "min", "max", "nulls"):
            if field not in mine and field not in theirs:
                continue
            left, right = mine.get(field), theirs.get(field)
            if field == "sum":
                same = _decimal(left) is not None and _decimal(left) == _decimal(right)
            elif field == "nulls":
                same = left == right
            else:
                same = same_instant(left, right, step_us=step_us)
            if not same:
                lines.append(f"control total {key}.{field}: expected {left} found {right}")
    if manifest.get("totalRows") != got["rowCount"]:
        lines.append(f"totalRows: expected {manifest.get('totalRows')} found {got['rowCount']}")
    return lines


def _zip_parts(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = [n for n in archive.namelist() if n != MANIFEST_NAME]
        return [(name, archive.read(name)) for name in names]


def _holds_manifest(data: bytes) -> bool:
    """A ZIP of parts (it holds ``manifest.json``; a workbook is a ZIP without one)."""
    if data[:4] != b"PK\x03\x04":
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return MANIFEST_NAME in archive.namelist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return True  # starts as a ZIP but cannot be opened: report it as one


def read_zip_manifest(data: bytes) -> dict[str, Any] | None:
    """The parsed ``manifest.json`` inside a ZIP, or None when there is none.

    Raises:
        ValueError: the entry is not JSON.
    """
    import json

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if MANIFEST_NAME not in archive.namelist():
                return None
            raw = archive.read(MANIFEST_NAME)
    except (zipfile.BadZipFile, OSError, EOFError):
        return None
    loaded = json.loads(raw.decode("utf-8"))
    if not isinstance(loaded, dict):
        raise ValueError("manifest.json is not a JSON object")
    return loaded


def differences(data: bytes, file_name: str, manifest: Mapping[str, Any]) -> list[str]:
    """Every way the file's bytes differ from the manifest (empty: it matches).

    Args:
        data: the downloaded file's bytes (the ZIP, the ``.gz`` or the file itself).
        file_name: its name on disk (``.gz`` means gzip; used in the lines).
        manifest: the parsed manifest (its signature is not checked here).

    Returns:
        Lines such as ``orders-part-0002.csv: rows expected 100000 found 99999`` or
        ``control total o_totalprice.sum: expected 1234.50 found 1230.00``.
    """
    files: Sequence[Mapping[str, Any]] = manifest.get("files") or []
    archive = manifest.get("archive")
    lines: list[str] = []
    # A file the manifest names as its one delivered file is that file, even when it
    # starts like a ZIP (an XLSX cut short): its bytes and hash are what differ.
    single = len(files) == 1 and files[0].get("name") == file_name
    is_zip = archive is not None or (_holds_manifest(data) and not single)
    if is_zip:
        if isinstance(archive, Mapping):
            if len(data) != archive.get("bytes"):
                lines.append(
                    f"{file_name}: bytes expected {archive.get('bytes')} found {len(data)}"
                )
            digest = hashlib.sha256(data).hexdigest()
            if digest != archive.get("sha256"):
                lines.append(f"{file_name}: sha256 expected {archive.get('sha256')} found {digest}")
        try:
            parts = _zip_parts(data)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            return [*lines, f"{file_name}: not a readable ZIP ({exc})"]
    else:
        parts = [(file_name, data)]
    if len(parts) != len(files):
        lines.append(f"{file_name}: files expected {len(files)} found {len(parts)}")
    totals: ControlTotals | None = ControlTotals(manifest_columns(manifest))
    for position, ((name, part), expected) in enumerate(zip(parts, files, strict=False), 1):
        if is_zip and name != expected.get("name"):
            lines.append(f"file {position}: name expected {expected.get('name')} found {name}")
        found, counted = _compare_file(name, part, expected, manifest)
        lines.extend(found)
        if counted is None or totals is None:
            totals = None
        else:
            totals.merge(counted)
    if totals is not None and len(parts) == len(files):
        lines.extend(_compare_totals(manifest, totals))
    return lines
