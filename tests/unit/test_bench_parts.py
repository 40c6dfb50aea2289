"""bench.parts on a few rows: every step timed, and the Parquet file assembled from Arrow
IPC parts, rendered from rows parts and written directly is the same file."""

from __future__ import annotations

from bench.parts import STEPS, run_parts


def test_every_step_is_timed_and_the_three_files_are_one() -> None:
    result = run_parts(rows=6_000, repeat=1, datetimes=True)
    assert result["rows"] == 6_000 and result["columns"] == 13
    assert list(result["steps"]) == list(STEPS)
    assert all(step["cpuSeconds"] >= 0 for step in result["steps"].values())
    sizes = result["bytes"]
    assert sizes["parquetPart"] > sizes["parquet"] > 0 and sizes["rowsPart"] > 0
    assert result["sameFile"] is True
