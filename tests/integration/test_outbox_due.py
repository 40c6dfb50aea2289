"""Only due commands are outbox backlog (SQLite and MariaDB).

An automatic retry is written to the outbox when its attempt fails, due at the end of
its backoff: until then it waits by design. It must not count as an unsent, stuck
command in the gauges (``ExportOutboxBacklog``), in ``outbox list --stuck``, in the
admin overview or in the Operations view; once due and still unsent, its age counts
from the moment it became due. A command whose send failed stays backlog through the
publisher's own send backoff (a broker that refuses every send must page).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import select, update

from export_center import repository
from export_center.db import db_now, db_now_plus
from export_center.models import ExportOutbox, ExportTask
from tests.support.fault_provider import FLAKY, flaky
from tests.support.operator_seed import cli_env, run_cli

O = ExportOutbox.__table__  # noqa: E741
T = ExportTask.__table__
ADMIN = ["platform:export:admin", *FLAKY]
NAME = "9月订单 [/] retry"


def _scheduled_retry(flaky_stack, faulty, tenant: str = "t1"):
    """A stack (no publisher loop, no reconciler) whose FLAKY export failed its first
    attempt: its retry (dispatch version 2) waits 150 s in the outbox."""
    stack = flaky_stack(
        max_attempts=2,
        publisher={"enabled": False},
        reconciler={"enabled": False},
        task={"retry_backoff_seconds": [150], "retry_jitter": 0},
        provider={"request_attempts": 1},
    )
    faulty.reset(rows=2500, fail_versions={1}, fail_at_batch=1)
    client = stack.client("bob", tenant, perms=FLAKY)
    task_id = flaky(client, taskName=NAME).json()["taskId"]
    assert stack.runtime.publisher.run_once() == 1  # version 1 goes out and fails
    deadline = time.monotonic() + 60
    while True:
        with stack.runtime.engine.connect() as conn:
            task = repository.read_task_by_no(conn, task_id)
        assert task is not None
        if task.dispatch_version == 2 and task.status == "PENDING":
            return stack, task
        assert time.monotonic() < deadline, task
        time.sleep(0.05)


def _figures(stack, tenant_id=None):
    with stack.runtime.engine.connect() as conn:
        return repository.queue_figures(conn, tenant_id=tenant_id)


def _db_seconds_until(stack, moment: datetime) -> float:
    with stack.runtime.engine.connect() as conn:
        now = conn.execute(select(db_now())).scalar_one()
    now = datetime.fromisoformat(now) if isinstance(now, str) else now
    return (moment.replace(tzinfo=None) - now).total_seconds()


def _cli_json(stack, *args: str):
    result = run_cli(list(args), cli_env(stack.settings))
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


def _gauges(stack) -> dict[str, float]:
    text = httpx.get(f"{stack.url}/metrics", timeout=10).text
    found = {}
    for line in text.splitlines():
        if line.startswith("export_outbox_") or line.startswith("export_task_queue_age"):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def _shift(stack, task, *, created: float, due: float, **values) -> float:
    """Move the retry's times: its row written ``created`` s from now, due ``due`` s
    from now (the task's retry time with it), as if that much time had passed.
    Returns the monotonic time of the move (see :func:`_aged`)."""
    moved = time.monotonic()
    with stack.runtime.engine.begin() as conn:
        conn.execute(
            update(O)
            .where(O.c.task_id == task.id, O.c.dispatch_version == task.dispatch_version)
            .values(created_at=db_now_plus(created), next_retry_at=db_now_plus(due), **values)
        )
        conn.execute(update(T).where(T.c.id == task.id).values(next_retry_at=db_now_plus(due)))
    return moved


def _aged(age: float, since_due: float, moved: float) -> bool:
    """``age`` is the seconds since a command became due ``since_due`` s before the
    move at ``moved`` (monotonic), give or take what the test has taken since."""
    return since_due - 1 <= age <= since_due + (time.monotonic() - moved) + 1


def test_a_scheduled_automatic_retry_is_no_backlog_anywhere(flaky_stack, faulty):
    stack, task = _scheduled_retry(flaky_stack, faulty)
    figures = _figures(stack)
    assert (figures.outbox_pending, figures.outbox_oldest_age_seconds) == (0, 0.0)
    assert figures.outbox_scheduled == 1
    assert figures.outbox_next_scheduled_at is not None
    assert 140 <= _db_seconds_until(stack, figures.outbox_next_scheduled_at) <= 151

    assert _cli_json(stack, "outbox", "list", "--stuck", "--json") == []
    assert _cli_json(stack, "outbox", "list", "--stuck", "--stuck-seconds", "0", "--json") == []
    (row,) = _cli_json(stack, "outbox", "list", "--json")
    assert (row["taskId"], row["taskName"], row["dispatchVersion"]) == (task.task_no, NAME, 2)
    assert (row["status"], row["sends"], row["scheduled"], row["ageSeconds"]) == (
        "pending",
        0,
        True,
        0.0,
    )
    assert row["dueAt"] == row["nextTryAt"]
    table = run_cli(["outbox", "list"], cli_env(stack.settings))
    assert table.returncode == 0, table.stderr
    assert "scheduled retry" in table.stdout and NAME in table.stdout
    assert "1 of them: automatic retries scheduled for later, not stuck" in table.stdout

    admin = stack.client("root", perms=ADMIN)
    overview = admin.get("/api/v1/admin/overview").json()
    assert (overview["outboxPending"], overview["outboxOldestAgeSeconds"]) == (0, 0.0)
    assert overview["outboxScheduled"] == 1
    assert overview["outboxNextScheduledAt"] == row["dueAt"]
    gauges = _gauges(stack)
    assert gauges["export_outbox_pending"] == 0
    assert gauges["export_outbox_oldest_age_seconds"] == 0
    assert gauges["export_outbox_scheduled"] == 1

    # The reviewer's case: the default second backoff is 15 minutes, so the row was
    # written long ago and is still not due. Still no backlog.
    _shift(stack, task, created=-600, due=300)
    figures = _figures(stack)
    assert (figures.outbox_pending, figures.outbox_scheduled) == (0, 1)
    assert figures.outbox_oldest_age_seconds == 0.0
    assert _cli_json(stack, "outbox", "list", "--stuck", "--json") == []


def test_a_due_command_ages_from_the_moment_it_became_due(flaky_stack, faulty):
    stack, task = _scheduled_retry(flaky_stack, faulty)
    # Written 280 s ago with a backoff that ended 130 s ago; no publisher sent it.
    moved = _shift(stack, task, created=-280, due=-130)
    figures = _figures(stack)
    assert (figures.outbox_pending, figures.outbox_scheduled) == (1, 0)
    assert _aged(figures.outbox_oldest_age_seconds, 130, moved)
    assert figures.outbox_next_scheduled_at is None
    (stuck,) = _cli_json(stack, "outbox", "list", "--stuck", "--json")
    assert (stuck["taskId"], stuck["scheduled"]) == (task.task_no, False)
    assert _aged(stuck["ageSeconds"], 130, moved)
    assert _cli_json(stack, "outbox", "list", "--stuck", "--stuck-seconds", "200", "--json") == []
    assert _aged(_gauges(stack)["export_outbox_oldest_age_seconds"], 130, moved)
    overview = stack.client("root", perms=ADMIN).get("/api/v1/admin/overview").json()
    assert (overview["outboxPending"], overview["outboxScheduled"]) == (1, 0)
    assert overview["outboxNextScheduledAt"] is None
    # Its neighbour: due this very moment (its backoff just ended) is backlog of age 0.
    moved = _shift(stack, task, created=-150, due=0)
    figures = _figures(stack)
    assert (figures.outbox_pending, figures.outbox_scheduled) == (1, 0)
    assert _aged(figures.outbox_oldest_age_seconds, 0, moved)


def test_a_command_in_the_publishers_send_backoff_stays_backlog(flaky_stack, faulty):
    """The broker refused the sends: the publisher waits (its own backoff) before the
    next try. The command is due all along; its age counts from its task's retry time."""
    stack, task = _scheduled_retry(flaky_stack, faulty)
    moved = _shift(stack, task, created=-900, due=-600, attempt_count=4, last_error="broker down")
    with stack.runtime.engine.begin() as conn:  # the send backoff: next try in 5 minutes
        conn.execute(
            update(O)
            .where(O.c.task_id == task.id, O.c.dispatch_version == 2)
            .values(next_retry_at=db_now_plus(300))
        )
    figures = _figures(stack)
    assert (figures.outbox_pending, figures.outbox_scheduled) == (1, 0)
    assert _aged(figures.outbox_oldest_age_seconds, 600, moved)
    assert figures.outbox_max_attempt == 4
    (stuck,) = _cli_json(stack, "outbox", "list", "--stuck", "--json")
    assert (stuck["sends"], stuck["lastError"], stuck["scheduled"]) == (4, "broker down", False)
    # Claimed by a publisher that is sending it right now: still unsent, still due.
    with stack.runtime.engine.begin() as conn:
        conn.execute(
            update(O)
            .where(O.c.task_id == task.id, O.c.dispatch_version == 2)
            .values(status="CLAIMED", lease_owner="publisher-x", lease_until=db_now_plus(30))
        )
    assert _figures(stack).outbox_pending == 1


def test_the_overview_counts_the_admins_tenant_only(flaky_stack, faulty):
    stack, _ = _scheduled_retry(flaky_stack, faulty, tenant="t1")
    ours = stack.client("root", "t1", perms=ADMIN).get("/api/v1/admin/overview").json()
    assert (ours["tenant"], ours["outboxScheduled"]) == ("t1", 1)
    theirs = stack.client("root", "t2", perms=ADMIN).get("/api/v1/admin/overview").json()
    assert (theirs["tenant"], theirs["outboxScheduled"], theirs["outboxPending"]) == ("t2", 0, 0)
    assert theirs["failed"] == [] and theirs["audit"] == []
    everyone = stack.client("ops", "t2", perms=[*ADMIN, "platform:operator"])
    every = everyone.get("/api/v1/admin/overview").json()
    assert (every["tenant"], every["outboxScheduled"]) == (None, 1)
    assert _figures(stack, "t2").outbox_scheduled == 0
    assert _figures(stack, "t1").outbox_scheduled == 1


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_the_due_time_is_the_retry_time(flaky_stack, faulty):
    stack, task = _scheduled_retry(flaky_stack, faulty)
    (row,) = _cli_json(stack, "outbox", "list", "--json")
    assert _utc(row["dueAt"]) == task.next_retry_at.replace(tzinfo=UTC)
    assert _utc(row["dueAt"]) - _utc(row["createdAt"]) > timedelta(seconds=140)
