"""Check a delivered file against its manifest, from the file's bytes alone.

:func:`differences` recomputes, for the downloaded file or for each part in its ZIP
(``manifest.json`` left out): the bytes, the SHA-256, the data rows and the control
totals (``packaging.reading``), and compares them with the manifest. It returns one
line per difference, naming the file and the total, then the expected and the found
value; no line means the file matches. It catches a changed cell (hash, totals), a
deleted row (rows, totals), a truncated file (bytes, hash, ``truncated`` or
unreadable), and in a ZIP:

* a part is matched to the manifest's entry of its *name*, so each part is compared
  with its own entry wherever it sits;
* a missing part is named once (``part 3 of 5 is missing: orders-part-0003.csv``),
  and the parts after it are still compared with their own entries;
* an entry of no part's name is a renamed part when its SHA-256 is a missing part's
  (``orders-part-0009.csv is part 3 renamed: ...``), else a stranger; a second entry
  of a part's name is named as such;
* parts in the wrong order: at each position where the parts found, in ZIP order, are
  not in the manifest's order, ``parts out of order: X is part 2, expected part 1``
  (the parts present sorted by number give the expected one).

Control totals are compared when every part is there and readable (a missing part's
totals would only restate it). At most :data:`LINES_PER_KIND` lines of one kind are
given, then how many more.
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
    TruncatedFile,
    UnreadableFile,
    recount,
    same_instant,
    time_resolution_us,
)
from export_center.packaging.totals import ControlTotals

__all__ = ["LINES_PER_KIND", "differences", "manifest_columns", "read_zip_manifest"]

LINES_PER_KIND = 20
"""The most lines of one kind (missing parts, parts out of order) before ``... and N
more``: a ZIP of 1,000 parts put in reverse order says so in 21 lines, not 1,000."""


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
    except TruncatedFile as exc:
        lines.append(f"{name}: {exc}")
        return lines, None
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
        # By entry, not by name: a repeated name is read as each entry it names.
        entries = [i for i in archive.infolist() if i.filename != MANIFEST_NAME]
        return [(entry.filename, archive.read(entry)) for entry in entries]


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


def _capped(lines: list[str], kind: str) -> list[str]:
    """``lines`` up to :data:`LINES_PER_KIND`, then one line counting the rest."""
    if len(lines) <= LINES_PER_KIND:
        return lines
    return [*lines[:LINES_PER_KIND], f"... and {len(lines) - LINES_PER_KIND} more {kind}"]


def _placed_parts(
    parts: Sequence[tuple[str, bytes]], files: Sequence[Mapping[str, Any]]
) -> tuple[list[tuple[int, str, bytes]], list[str]]:
    """Each ZIP part with the number (from 1) of its manifest entry, in ZIP order, and
    the lines for missing, renamed and unknown parts and for the order (module rules)."""
    numbers: dict[str, int] = {}
    for number, entry in enumerate(files, start=1):
        numbers.setdefault(str(entry.get("name")), number)
    placed: list[tuple[int, int, str, bytes]] = []  # (ZIP position, number, name, bytes)
    strangers: list[tuple[int, str, bytes]] = []
    taken: set[int] = set()
    lines: list[str] = []
    for position, (name, body) in enumerate(parts):
        known = numbers.get(name)
        if known in taken:
            lines.append(f"{name}: a second entry of this name")
        elif known is None:
            strangers.append((position, name, body))
        else:
            taken.add(known)
            placed.append((position, known, name, body))
    missing = [n for n in range(1, len(files) + 1) if n not in taken]
    for position, name, body in strangers:
        digest = hashlib.sha256(body).hexdigest()
        twin = next((n for n in missing if files[n - 1].get("sha256") == digest), None)
        if twin is None:
            lines.append(f"{name}: not a part in the manifest")
            continue
        missing.remove(twin)
        lines.append(
            f"{name} is part {twin} renamed: expected the name {files[twin - 1].get('name')}"
        )
        placed.append((position, twin, name, body))
    placed.sort()
    total = len(files)
    lines += _capped(
        [f"part {n} of {total} is missing: {files[n - 1].get('name')}" for n in missing],
        "missing parts",
    )
    order = sorted(number for _, number, _, _ in placed)
    lines += _capped(
        [
            f"parts out of order: {name} is part {number}, expected part {wanted}"
            for (_, number, name, _), wanted in zip(placed, order, strict=True)
            if number != wanted
        ],
        "parts out of order",
    )
    return [(number, name, body) for _, number, name, body in placed], lines


def differences(data: bytes, file_name: str, manifest: Mapping[str, Any]) -> list[str]:
    """Every way the file's bytes differ from the manifest (empty: it matches).

    Args:
        data: the downloaded file's bytes (the ZIP, the ``.gz`` or the file itself).
        file_name: its name on disk (``.gz`` means gzip; used in the lines).
        manifest: the parsed manifest (its signature is not checked here).

    Returns:
        Lines such as ``orders-part-0002.csv: rows expected 100000 found 99999``,
        ``part 3 of 5 is missing: orders-part-0003.csv``, ``parts out of order:
        orders-part-0002.csv is part 2, expected part 1`` or ``control total
        o_totalprice.sum: expected 1234.50 found 1230.00`` (rules: module docstring).
    """
    files: Sequence[Mapping[str, Any]] = manifest.get("files") or []
    archive = manifest.get("archive")
    lines: list[str] = []
    # A file the manifest names as its one delivered file is that file, even when it
    # starts like a ZIP (an XLSX cut short): its bytes and hash are what differ.
    single = len(files) == 1 and files[0].get("name") == file_name
    if archive is not None or (_holds_manifest(data) and not single):
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
        placed, found = _placed_parts(parts, files)
        lines += found
        complete = len(placed) == len(files)
    else:
        placed = [(1, file_name, data)] if files else []
        if len(files) != 1:
            lines.append(f"{file_name}: files expected {len(files)} found 1")
        complete = len(files) == 1
    totals: ControlTotals | None = ControlTotals(manifest_columns(manifest))
    for number, name, part in placed:
        found, counted = _compare_file(name, part, files[number - 1], manifest)
        lines.extend(found)
        if counted is None or totals is None:
            totals = None
        else:
            totals.merge(counted)
    if totals is not None and complete:
        lines.extend(_compare_totals(manifest, totals))
    return lines
