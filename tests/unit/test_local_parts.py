"""Shard parts in the local directory: one file per segment, written whole (a
temporary file renamed), read back in chunks, deleted per task; keys the server did
not make are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from export_center.errors import StorageError
from export_center.storage.keys import part_key, task_no_of_part
from export_center.storage.local import LocalStorage

TASK = "exp_01JA2B3C4D5E6F7G8H9J0KMNPQ"
OTHER = "exp_01JA2B3C4D5E6F7G8H9J0KMNPR"


def test_segments_round_trip_and_are_deleted_per_task(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    big = bytes(range(256)) * 20_000  # 5 MB: several read chunks
    storage.put_part(part_key(TASK, 0, 0, 1), big)
    storage.put_part(part_key(TASK, 3, 12, 2), b"tail")
    storage.put_part(part_key(OTHER, 0, 0, 1), b"kept")
    assert b"".join(storage.read_part(part_key(TASK, 0, 0, 1))) == big
    assert max(len(c) for c in storage.read_part(part_key(TASK, 0, 0, 1))) <= 1 << 20
    assert not list(tmp_path.rglob("*.tmp"))
    listed = sorted(o.key for o in storage.list("parts/"))
    assert listed == sorted(
        [part_key(TASK, 0, 0, 1), part_key(TASK, 3, 12, 2), part_key(OTHER, 0, 0, 1)]
    )
    assert storage.delete_parts(TASK) == 2
    assert [o.key for o in storage.list("parts/")] == [part_key(OTHER, 0, 0, 1)]
    assert not (tmp_path / "parts" / TASK).exists()
    with pytest.raises(StorageError, match="cannot read"):
        storage.read_part(part_key(TASK, 0, 0, 1))


def test_part_keys_name_task_shard_segment_and_version() -> None:
    assert part_key(TASK, 7, 42, 3) == f"parts/{TASK}/00007/000042.v3"
    assert task_no_of_part(part_key(TASK, 7, 42, 3)) == TASK
    assert task_no_of_part(f"exports/t/2026/12/{TASK}/x.csv") is None
    with pytest.raises(StorageError, match="refused task number"):
        part_key("../etc", 0, 0, 1)


@pytest.mark.parametrize(
    "key", ["parts/../x", f"parts/{TASK}/00000/000000", f"parts/{TASK}/0/0.v1", "exports/a.csv"]
)
def test_keys_not_made_by_the_server_are_refused(tmp_path: Path, key: str) -> None:
    storage = LocalStorage(tmp_path)
    with pytest.raises(StorageError, match="refused part key"):
        storage.put_part(key, b"x")
    with pytest.raises(StorageError, match="refused part key"):
        storage.read_part(key)
    with pytest.raises(StorageError, match="refused task number"):
        storage.delete_parts("../" + TASK)
