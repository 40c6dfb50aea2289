"""The key scheme of shard parts: task, shard, segment and version in the key; no
other task number is accepted. What every adapter does with the keys is in
tests/integration/test_storage_conformance.py."""

from __future__ import annotations

import pytest

from export_center.errors import StorageError
from export_center.storage.keys import part_key, task_no_of_part

TASK = "exp_01JA2B3C4D5E6F7G8H9J0KMNPQ"


def test_part_keys_name_task_shard_segment_and_version() -> None:
    assert part_key(TASK, 7, 42, 3) == f"parts/{TASK}/00007/000042.v3"
    assert task_no_of_part(part_key(TASK, 7, 42, 3)) == TASK
    assert task_no_of_part(f"exports/t/2026/12/{TASK}/x.csv") is None
    with pytest.raises(StorageError, match="refused task number"):
        part_key("../etc", 0, 0, 1)
