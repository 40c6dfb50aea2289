"""Exactly one task per minute with two instances on MariaDB, for real minutes
(issue 24: "two API/worker instances on MariaDB for 10 minutes of a once-a-minute
schedule").

Two embedded stacks (two runtimes, each with its own engine, scheduler loop, lease
owner and consumer) share one MariaDB database; a ``* * * * *`` schedule runs for
``EXPORT_CENTER_TEST_IDLE_MINUTES`` (default 10) minutes. Marked ``slow_idle``: it
mostly waits, so CI runs it in its own pytest process beside the others.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from export_center.repository.tables import SCHEDULE_RUNS, TASKS
from tests.conftest import sample_url
from tests.support.helpers import Stack

MINUTES = int(os.environ.get("EXPORT_CENTER_TEST_IDLE_MINUTES", "10"))


@pytest.mark.slow_idle
@pytest.mark.mariadb
def test_two_instances_make_one_task_per_minute(
    mariadb_db_url: str, sample_dir: Path, tmp_path: Path
) -> None:
    overrides: dict[str, Any] = {
        "scheduler": {"enabled": True, "loop_seconds": 1.0, "lease_seconds": 30},
        # Each minute's export is the same (no window): measure the scheduler alone.
        "limits": {"duplicate_window_seconds": 0},
    }
    stacks = [
        Stack.start(
            data_dir=tmp_path / f"data-{name}",
            database_url=mariadb_db_url,
            sample_database_url=sample_url("mariadb", sample_dir),
            overrides={**overrides, "instance_id": f"idle-{name}"},
        )
        for name in ("a", "b")
    ]
    try:
        client = stacks[0].client("alice")
        created = client.post(
            "/api/v1/schedules",
            json={
                "name": "every minute",
                "export": {"exportType": "ORDERS", "format": "csv", "parameters": {"status": "F"}},
                "cron": "* * * * *",
                "timezone": "Asia/Shanghai",
            },
        )
        assert created.status_code == 201, created.text
        sid = created.json()["scheduleId"]
        first = created.json()["nextFireTimes"][0]
        time.sleep(MINUTES * 60 + 20)
        engine = stacks[0].runtime.engine
        with engine.connect() as conn:
            runs = conn.execute(
                select(SCHEDULE_RUNS.c.fire_time, SCHEDULE_RUNS.c.task_id, SCHEDULE_RUNS.c.fires)
                .where(SCHEDULE_RUNS.c.schedule_id == sid)
                .order_by(SCHEDULE_RUNS.c.fire_time)
            ).all()
            tasks = conn.execute(
                select(func.count()).select_from(TASKS).where(TASKS.c.schedule_id == sid)
            ).scalar_one()
        fire_times = [r.fire_time for r in runs]
        per_task = Counter(r.task_id for r in runs)
        print(
            f"\nidle test: first fire {first}, {len(runs)} runs, {tasks} tasks, "
            f"duplicated fire times {len(fire_times) - len(set(fire_times))}, "
            f"tasks shared by runs {sum(1 for n in per_task.values() if n > 1)}"
        )
        assert MINUTES <= len(runs) <= MINUTES + 1
        assert len(set(fire_times)) == len(fire_times)
        assert all(r.fires == 1 and r.task_id is not None for r in runs)
        assert tasks == len(runs) and max(per_task.values()) == 1
        steps = {(b - a).total_seconds() for a, b in zip(fire_times, fire_times[1:], strict=False)}
        assert steps == {60.0}
    finally:
        for stack in reversed(stacks):
            stack.stop()
