"""Shard checkpoints in the database: written only under the attempt's lease (owner and
dispatch version), kept across attempts when the plan is the same, replaced (and said
so) when it is not, counted on the task."""

from __future__ import annotations

from sqlalchemy import Engine

from export_center import repository
from export_center.repository import ShardCheckpoint, ShardStatus
from tests.unit.test_repository_transitions import claim, engine, new_task  # noqa: F401


def _plan(n: int) -> list[ShardCheckpoint]:
    return [
        ShardCheckpoint(i, f"2024-01-0{i + 1}", f"2024-01-0{i + 1}T00:00:00+00:00", "x")
        for i in range(n)
    ]


def test_checkpoints_are_fenced_by_owner_and_version(engine: Engine) -> None:
    task_id = new_task(engine)
    assert claim(engine, task_id, 1, "w/1")
    with engine.begin() as conn:
        answer = repository.plan_task_shards(conn, task_id, 1, "w/1", _plan(3))
    assert answer is not None
    shards, replaced = answer
    assert not replaced and [s.key for s in shards] == ["2024-01-01", "2024-01-02", "2024-01-03"]
    first = shards[0]
    first.cursor, first.rows_written, first.segments = "c-1", 500, [1]
    first.bytes, first.checksum, first.snapshot_token = 1234, 0xDEADBEEF, "snap"
    first.stats = {"writer": {"rows": 500}}
    with engine.begin() as conn:
        assert repository.save_checkpoint(conn, task_id, 1, "w/1", first)
        assert not repository.save_checkpoint(conn, task_id, 1, "w/other", first)
        assert not repository.save_checkpoint(conn, task_id, 2, "w/1", first)
        assert repository.plan_task_shards(conn, task_id, 1, "w/other", _plan(3)) is None
    with engine.connect() as conn:
        [stored, *_rest] = repository.load_shards(conn, task_id)
    assert (stored.cursor, stored.rows_written, stored.segments) == ("c-1", 500, [1])
    assert (stored.bytes, stored.checksum, stored.snapshot_token) == (1234, 0xDEADBEEF, "snap")
    assert stored.stats == {"writer": {"rows": 500}} and stored.status == ShardStatus.PENDING


def test_the_same_plan_is_kept_and_another_replaces_it(engine: Engine) -> None:
    task_id = new_task(engine)
    assert claim(engine, task_id, 1, "w/1")
    with engine.begin() as conn:
        answer = repository.plan_task_shards(conn, task_id, 1, "w/1", _plan(3))
        assert answer is not None
        done = answer[0][1]
        done.status, done.rows_written, done.segments = ShardStatus.DONE, 7, [1]
        assert repository.save_checkpoint(conn, task_id, 1, "w/1", done)
        again = repository.plan_task_shards(conn, task_id, 1, "w/1", _plan(3))
        assert again is not None and not again[1] and again[0][1].done
        task = repository.read_task(conn, task_id)
        assert task is not None
        assert (task.processed_rows, task.shards_done, task.shards_total) == (7, 1, 3)
        other = repository.plan_task_shards(conn, task_id, 1, "w/1", _plan(2))
        assert other is not None and other[1]  # a plan with progress was dropped
        assert [s.done for s in other[0]] == [False, False]
        assert repository.delete_shards(conn, task_id, forget_counts=True) == 2
        task = repository.read_task(conn, task_id)
        assert task is not None and (task.shards_done, task.shards_total) == (None, None)
