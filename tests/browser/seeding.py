"""Tasks put in a given state by writing their row, for tests of how the page shows them
(no worker runs: ``consumer={"enabled": False}``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from export_center import repository
from export_center.db import db_now, db_now_plus
from export_center.models import ExportTask
from tests.support.helpers import Stack, create

TASKS = ExportTask.__table__

#: Column values of each state, as a worker would have left them.
STATES: dict[str, dict[str, Any]] = {
    "queued": {"status": "PENDING"},
    "running": {
        "status": "RUNNING",
        "phase": "render",
        "processed_rows": 4000,
        "total_rows": 9000,
        "attempt_count": 1,
        "started_at": db_now_plus(-8),
        "lease_owner": "seed",
        "lease_until": db_now_plus(600),
    },
    "succeeded": {
        "status": "SUCCEEDED",
        "phase": "store",
        "processed_rows": 191,
        "total_rows": 191,
        "attempt_count": 1,
        "started_at": db_now_plus(-3),
        "completed_at": db_now(),
        "expires_at": db_now_plus(7 * 86400),
        "file_name": "orders.csv",
        "size_bytes": 61_234,
        "object_key": "exports/seed.csv",
    },
    "failed": {
        "status": "FAILED",
        "phase": "fetch",
        "attempt_count": 3,
        "started_at": db_now_plus(-5),
        "completed_at": db_now(),
        "failure_code": "PROVIDER_UNAVAILABLE",
        "failure_message": "fetch: batch 3 (cursor 2000): provider answered 503 on 3 tries",
    },
}


def set_task(stack: Stack, task_no: str, **values: Any) -> None:
    """Write ``values`` into the row of task ``task_no``."""
    with stack.runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, task_no)
        assert task is not None
        conn.execute(update(TASKS).where(TASKS.c.id == task.id).values(**values))


def seeded(stack: Stack, user: str, state: str, name: str, day: int = 1, **values: Any) -> str:
    """A task of ``user`` named ``name`` in ``state`` (plus ``values``); its id.

    ``day`` makes the parameters differ, so the 60 s duplicate window keeps them apart.
    """
    d = f"1995-01-{day:02d}"
    answer = create(stack.client(user), "csv", taskName=name, parameters={"from": d, "to": d})
    assert answer.status_code == 202, answer.text
    task_no = answer.json()["taskId"]
    set_task(stack, task_no, **{**STATES[state], **values})
    return str(task_no)
