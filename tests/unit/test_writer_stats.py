"""WriterStats helpers: the checkpoint form (to_dict/from_dict) and the sum of parts."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from export_center.writers import WriterStats

stats_strategy = st.builds(
    WriterStats, **{f.name: st.integers(0, 10**12) for f in dataclasses.fields(WriterStats)}
)


@given(stats=stats_strategy)
def test_stats_round_trip_through_json(stats: WriterStats) -> None:
    stored = json.dumps(stats.to_dict())
    assert WriterStats.from_dict(json.loads(stored)) == stats
    assert set(json.loads(stored)) == {f.name for f in dataclasses.fields(WriterStats)}


@given(parts=st.lists(stats_strategy, max_size=6))
def test_stats_sum_field_by_field(parts: list[WriterStats]) -> None:
    total = WriterStats.total(parts)
    for field in dataclasses.fields(WriterStats):
        assert getattr(total, field.name) == sum(getattr(p, field.name) for p in parts)
    if parts:
        assert parts[0] + WriterStats.total(parts[1:]) == total


def test_stats_from_dict_rejects_what_it_cannot_count() -> None:
    assert WriterStats.from_dict({"rows": 5}) == WriterStats(rows=5)  # older checkpoints
    for bad in ({"rows": -1}, {"rows": 1.0}, {"rows": True}, {"rows": "3"}, {"cells": 1}):
        with pytest.raises(ValueError):
            WriterStats.from_dict(bad)
