"""``packaging.verify.differences`` on the parts of a split ZIP: each part is compared
with the manifest entry of its name, so a missing, renamed, repeated or misplaced part
is named as such, and a long list of one kind is cut after ``LINES_PER_KIND`` lines."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest

from export_center.packaging.verify import LINES_PER_KIND, differences
from tests.support.package_rows import COLUMNS, make_rows, package, spec


def _split(parts: int) -> tuple[list[tuple[str, bytes]], dict[str, Any]]:
    """A split CSV ZIP of ``parts`` parts of 2 rows: its members, and its manifest."""
    manifest: dict[str, Any] = {}

    def make(files: Any, totals: Any) -> dict[str, Any]:
        manifest.update(
            format="csv",
            options={},
            timeZone="Asia/Shanghai",
            columns=[{"key": c.key, "title": c.title, "type": str(c.type)} for c in COLUMNS],
            totalRows=sum(f.rows for f in files),
            files=[f.as_json() for f in files],
            archive=None,
            controlTotals=totals.as_json(),
        )
        return manifest

    data, _ = package("csv", spec("zip", rows=2), make_rows(parts * 2), manifest=make)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = [(n, archive.read(n)) for n in archive.namelist()]
    assert len(members) == parts + 1 and members[-1][0] == "manifest.json"
    return members[:-1], manifest


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, body in members:
            archive.writestr(name, body)
        archive.writestr("manifest.json", b"{}")
    return out.getvalue()


def test_the_parts_as_delivered_match() -> None:
    parts, manifest = _split(3)
    assert differences(_zip(parts), "orders.zip", manifest) == []


def test_parts_in_reverse_are_named_up_to_the_limit() -> None:
    parts, manifest = _split(25)
    lines = differences(_zip(parts[::-1]), "orders.zip", manifest)
    names = [name for name, _ in parts]
    # 25 parts reversed: all but the middle one (part 13) are out of place.
    assert lines[0] == f"parts out of order: {names[24]} is part 25, expected part 1"
    assert lines[12] == f"parts out of order: {names[11]} is part 12, expected part 14"
    assert lines[LINES_PER_KIND - 1] == (
        f"parts out of order: {names[4]} is part 5, expected part 21"
    )
    assert lines[LINES_PER_KIND:] == ["... and 4 more parts out of order"]


def test_a_repeated_and_a_stranger_entry_are_named_and_the_parts_still_compared() -> None:
    parts, manifest = _split(3)
    members = [parts[0], parts[1], parts[1], ("readme.txt", b"x"), parts[2]]
    with pytest.warns(UserWarning, match="Duplicate name"):  # zipfile allows it, warns
        repeated = _zip(members)
    assert differences(repeated, "orders.zip", manifest) == [
        f"{parts[1][0]}: a second entry of this name",
        "readme.txt: not a part in the manifest",
    ]
    # A changed part 3 after a missing part 2: part 3's own lines, part 2 named once.
    edited = parts[2][1].replace(b"\r\n", b"\n", 1)
    lines = differences(_zip([parts[0], (parts[2][0], edited)]), "orders.zip", manifest)
    assert lines[0] == f"part 2 of 3 is missing: {parts[1][0]}"
    assert [line.split(":")[0] for line in lines[1:]] == [parts[2][0]] * 2  # bytes, sha256
    assert not any(parts[0][0] in line for line in lines)


def test_many_missing_parts_are_counted_after_the_limit() -> None:
    parts, manifest = _split(30)
    lines = differences(_zip(parts[:5]), "orders.zip", manifest)
    assert lines[0] == f"part 6 of 30 is missing: {parts[5][0]}"
    assert len(lines) == LINES_PER_KIND + 1
    assert lines[-1] == "... and 5 more missing parts"
