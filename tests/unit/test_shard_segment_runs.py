"""A shard checkpoint names its stored segments as runs of one attempt each: its size
stays flat however many pages the shard fetched, and checkpoints written before the runs
(one ``[version, bytes]`` entry per segment) are read alike."""

from __future__ import annotations

from types import SimpleNamespace

import orjson
import pytest

from export_center.repository.shards import (
    ShardCheckpoint,
    segment_runs,
    segments_of,
    shard_row,
)


def _checkpoint(segments: list[int]) -> ShardCheckpoint:
    return ShardCheckpoint(
        shard_no=3,
        key="1995-09-04",
        window_from="1995-09-04T00:00:00+00:00",
        window_to="1995-09-05T00:00:00+00:00",
        segments=segments,
    )


def _stored(cp: ShardCheckpoint) -> str:
    return str(cp.values(version=max(cp.segments or [1]), now="now")["segments_json"])


def test_consecutive_segments_of_one_attempt_fold_into_one_run():
    assert segment_runs([]) == []
    assert segment_runs([1, 1, 1, 2, 2, 4]) == [[1, 3], [2, 2], [4, 1]]
    assert segment_runs([1, 2, 1]) == [[1, 1], [2, 1], [1, 1]]  # order is kept


def test_the_stored_checkpoint_does_not_grow_with_the_pages():
    sizes = [len(_stored(_checkpoint([1] * 700 + [2] * 700 + [3] * n))) for n in (1, 700, 70_000)]
    # {"runs":[[1,700],[2,700],[3,N]]}: only the digits of N grow.
    assert max(sizes) < 40 and max(sizes) - min(sizes) == len("70000") - len("1"), sizes
    assert len(_stored(_checkpoint([1] * 2_100))) < 20


@pytest.mark.parametrize(
    "versions",
    [[], [1], [1] * 2_100, [1, 1, 2, 3, 3, 3], [2, 1, 2]],
)
def test_runs_round_trip_through_the_row(versions):
    cp = _checkpoint(versions)
    values = cp.values(version=1, now="now")
    row = SimpleNamespace(shard_no=cp.shard_no, **values)
    assert shard_row(row).segments == versions


def test_a_checkpoint_written_before_the_runs_is_read_segment_by_segment():
    old = orjson.loads(orjson.dumps([[1, 8_388_608], [1, 8_000_000], [2, 512]]))
    assert segments_of(old) == [1, 1, 2]
    assert segments_of([]) == []


@pytest.mark.parametrize("stored", [None, 7, "runs", {"runs": None}, {"segments": []}])
def test_anything_else_is_refused(stored):
    with pytest.raises(ValueError, match="neither runs nor a segment list"):
        segments_of(stored)
