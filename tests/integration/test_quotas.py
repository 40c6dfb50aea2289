"""Daily quotas on a running stack (SQLite and MariaDB): 429 ``QUOTA_EXCEEDED`` with
``Retry-After`` to the next day boundary, ``GET /api/v1/me/quota``, the stricter of user
and tenant, rows counted when exports succeed, replays and refusals never counted,
overrides through the admin API and the CLI (audited), and the day boundary on the
database clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select, update

from export_center.auth import ADMIN, OPERATOR
from export_center.db import reading
from export_center.quotas import day_of
from export_center.repository import quotas as qrepo
from export_center.repository.tables import AUDIT, TASKS
from tests.support.helpers import ORDERS_PERMISSION, Stack, create, wait_state
from tests.support.operator_seed import cli_env, last_line, run_cli

ZONE = "Asia/Shanghai"


def quota_stack(make_stack: Any, consumer: bool = False, **quotas: int) -> Stack:
    """A stack whose creates are never duplicates (window 0), with these quotas; the
    consumer is off unless asked (tasks stay queued: only creates matter)."""
    return make_stack(  # type: ignore[no-any-return]
        quotas=quotas,
        task={"time_zone": ZONE},
        limits={"duplicate_window_seconds": 0, "max_active_per_user": 500},
        consumer={"enabled": consumer},
        scheduler={"enabled": False},
    )


def operator(stack: Stack) -> Any:
    return stack.client("ops", "platform", perms=[ADMIN, OPERATOR, ORDERS_PERMISSION])


def the_day(stack: Stack) -> Any:
    with reading(stack.runtime.engine) as conn:
        return day_of(qrepo.database_now(conn), ZONE)


def tasks_in_db(stack: Stack, tenant: str = "t1") -> int:
    with reading(stack.runtime.engine) as conn:
        return int(
            conn.execute(select(func.count()).where(TASKS.c.tenant_id == tenant)).scalar_one()
        )


def assert_refused(answer: Any, stack: Stack, *, words: str, zh: str) -> None:
    assert answer.status_code == 429, answer.text
    body = answer.json()
    assert body["code"] == "QUOTA_EXCEEDED"
    assert words in body["message"] and "starts again at" in body["message"]
    seconds = int(answer.headers["Retry-After"])
    # The same sentence in Chinese, with the same figures and moment.
    assert zh in body["messageZh"] and "本次未创建导出" in body["messageZh"], body
    assert f"（{ZONE}）恢复" in body["messageZh"]
    day = the_day(stack)
    assert abs(seconds - (day.end - day.now).total_seconds()) <= 5
    # the next midnight in the zone, at most a day away
    assert 0 < seconds <= 25 * 3600
    local_end = day.end.replace(tzinfo=UTC).astimezone(ZoneInfo(ZONE))
    assert (local_end.hour, local_end.minute, local_end.second) == (0, 0, 0)


def test_user_tasks_quota_refuses_with_retry_after_and_replays_do_not_count(make_stack):
    stack = quota_stack(make_stack, user_tasks_per_day=3)
    alice = stack.client("alice")
    assert alice.get("/api/v1/me/quota").json()["tasks"]["remaining"] == 3
    first = create(alice, requestId="k-1")
    assert first.status_code == 202, first.text
    assert create(alice, requestId="k-1").status_code == 200  # replay: not counted
    for _ in range(2):
        assert create(alice).status_code == 202
    refused = create(alice, requestId="k-4")
    assert_refused(refused, stack, words="your daily quota of 3", zh="已达每日额度 3 个")
    assert create(alice, requestId="k-4").status_code == 429  # a refusal did not count
    # A replay of a key that made a task is answered even with the quota used up.
    replay = create(alice, requestId="k-1")
    assert replay.status_code == 200 and replay.json()["taskId"] == first.json()["taskId"]
    quota = alice.get("/api/v1/me/quota").json()
    day = the_day(stack)
    assert quota["tasks"]["used"] == 3 and quota["tasks"]["limit"] == 3
    assert quota["tasks"]["remaining"] == 0
    assert datetime.fromisoformat(quota["tasks"]["resetsAt"]) == day.resets_at
    assert quota["tasks"]["resetsAt"].endswith("+08:00")
    assert quota["rows"] == {
        "used": 0,
        "limit": None,
        "remaining": None,
        "resetsAt": quota["tasks"]["resetsAt"],
    }
    assert tasks_in_db(stack) == 3
    # Another user of the tenant has a quota of their own.
    assert create(stack.client("bob")).status_code == 202
    metrics = stack.client(None).get("/metrics").text
    assert 'export_quota_refusals_total{reason="user_tasks"}' in metrics


def test_the_stricter_of_user_and_tenant_applies(make_stack):
    stack = quota_stack(make_stack, user_tasks_per_day=5, tenant_tasks_per_day=2)
    alice, bob = stack.client("alice"), stack.client("bob")
    assert create(alice).status_code == 202
    mine = alice.get("/api/v1/me/quota").json()["tasks"]
    assert (mine["used"], mine["limit"], mine["remaining"]) == (1, 2, 1)  # the tenant's
    assert create(bob).status_code == 202
    assert_refused(create(alice), stack, words="your organization (t1)", zh="贵组织（t1）")
    assert alice.get("/api/v1/me/quota").json()["tasks"]["remaining"] == 0
    # Another tenant is not touched.
    other = stack.client("carol", "t2")
    assert create(other).status_code == 202
    assert other.get("/api/v1/me/quota").json()["tasks"]["remaining"] == 1


def test_rows_count_when_exports_succeed_and_then_refuse(make_stack):
    stack = quota_stack(make_stack, consumer=True, user_rows_per_day=1)
    alice = stack.client("alice")
    task = create(alice).json()
    done = wait_state(alice, task["taskId"])
    assert done["state"] == "succeeded", done
    rows = done["processed"]
    assert rows > 0
    quota = alice.get("/api/v1/me/quota").json()["rows"]
    assert (quota["used"], quota["limit"], quota["remaining"]) == (rows, 1, 0)
    assert_refused(create(alice), stack, words="rows today", zh="行，已达每日额度")
    # bob's rows are his own
    assert create(stack.client("bob")).status_code == 202


def test_operator_overrides_through_the_admin_api_are_audited(make_stack):
    stack = quota_stack(make_stack)
    ops, alice = operator(stack), stack.client("alice")
    reason = {"reason": "contract: 1 export a day"}
    tenant_admin = stack.client("adm", "t1", perms=[ADMIN])
    refused = tenant_admin.put("/api/v1/admin/quotas/t1", json={"tasksPerDay": 99, **reason})
    assert refused.status_code == 403 and refused.json()["code"] == "PERMISSION_DENIED"
    answer = ops.put("/api/v1/admin/quotas/t1", json={"tasksPerDay": 1, **reason})
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["tenantOverride"]["tasksPerDay"] == 1
    assert got["tenantOverride"]["updatedBy"] == "user:platform/ops"
    assert got["quota"]["tasks"]["limit"] == 1
    assert create(alice).status_code == 202
    assert_refused(create(alice), stack, words="its daily quota of 1", zh="已达每日额度 1 个")
    # A user override does not lift the tenant's total: the stricter applies.
    user_set = ops.put(
        "/api/v1/admin/quotas/t1", json={"user": "alice", "tasksPerDay": 10, **reason}
    )
    assert user_set.json()["userOverride"]["tasksPerDay"] == 10
    assert create(alice).status_code == 429
    raised = ops.put("/api/v1/admin/quotas/t1", json={"tasksPerDay": 3, **reason})
    assert raised.json()["quota"]["tasks"]["remaining"] == 2
    assert create(alice).status_code == 202
    # The tenant admin reads its own tenant, not others.
    seen = tenant_admin.get("/api/v1/admin/quotas/t1", params={"user": "alice"}).json()
    assert seen["quota"]["tasks"] == {**seen["quota"]["tasks"], "used": 2, "limit": 3}
    assert tenant_admin.get("/api/v1/admin/quotas/t2").status_code == 403
    listed = ops.get("/api/v1/admin/quotas").json()
    assert [(o["tenant"], o["user"]) for o in listed] == [("t1", None), ("t1", "alice")]
    cleared = ops.delete("/api/v1/admin/quotas/t1", params={"reason": "back to defaults"})
    assert cleared.status_code == 200 and cleared.json()["tenantOverride"] is None
    assert create(alice).status_code == 202  # alice's own 10 applies now
    bad = ops.put("/api/v1/admin/quotas/t1", json={"tasksPerDay": -1, **reason})
    assert bad.status_code == 422
    with reading(stack.runtime.engine) as conn:
        audit = conn.execute(
            select(AUDIT).where(AUDIT.c.action == "quota_override").order_by(AUDIT.c.id)
        ).all()
    assert [(a.actor, a.outcome, a.tenant_id) for a in audit] == [
        ("user:platform/ops", "set", "t1"),
        ("user:platform/ops", "set", "t1"),
        ("user:platform/ops", "set", "t1"),
        ("user:platform/ops", "cleared", "t1"),
    ]
    assert json.loads(audit[2].details_json) == {
        "user": None,
        "before": {"tasksPerDay": 1, "rowsPerDay": None},
        "after": {"tasksPerDay": 3, "rowsPerDay": None},
    }
    assert audit[0].reason == "contract: 1 export a day"


def test_operator_overrides_through_the_cli(make_stack):
    stack = quota_stack(make_stack, tenant_tasks_per_day=1)
    alice = stack.client("alice")
    env = cli_env(stack.settings, EXPORT_CENTER_TASK__TIME_ZONE=ZONE)
    env["EXPORT_CENTER_QUOTAS__TENANT_TASKS_PER_DAY"] = "1"
    assert create(alice).status_code == 202
    assert create(alice).status_code == 429
    shown = run_cli(["quotas", "show", "--tenant", "t1", "--json"], env)
    assert shown.returncode == 0, shown.stderr
    figures = json.loads(shown.stdout)["quota"]["tasks"]
    assert (figures["used"], figures["limit"], figures["remaining"]) == (1, 1, 0)
    # The text names where the defaults come from: this command's settings.
    text = run_cli(["quotas", "show", "--tenant", "t1"], env).stdout
    assert "EXPORT_CENTER_QUOTAS__TENANT_TASKS_PER_DAY=1" in text
    assert "EXPORT_CENTER_QUOTAS__USER_TASKS_PER_DAY=no limit" in text
    assert "not the ones the API applies" in text
    raised = run_cli(
        ["quotas", "set", "--tenant", "t1", "--tasks-per-day", "5", "--reason", "big month"],
        env,
    )
    assert raised.returncode == 0, raised.stderr
    assert "recorded in the audit trail as operator:" in raised.stdout
    assert "5" in raised.stdout and "exports" in raised.stdout
    assert create(alice).status_code == 202
    listed = json.loads(run_cli(["quotas", "list", "--json"], env).stdout)
    assert [(o["tenant"], o["tasksPerDay"]) for o in listed] == [("t1", 5)]
    assert listed[0]["updatedBy"].startswith("operator:")
    cleared = run_cli(["quotas", "clear", "--tenant", "t1", "--reason", "month over"], env)
    assert cleared.returncode == 0, cleared.stderr
    assert create(alice).status_code == 429  # the default of 1 again
    again = run_cli(["quotas", "clear", "--tenant", "t1", "--reason", "month over"], env)
    assert again.returncode == 1 and "nothing changed" in last_line(again)
    no_reason = run_cli(["quotas", "set", "--tenant", "t1", "--tasks-per-day", "1"], env)
    assert no_reason.returncode == 2
    with reading(stack.runtime.engine) as conn:
        outcomes = conn.execute(
            select(AUDIT.c.outcome, AUDIT.c.actor)
            .where(AUDIT.c.action == "quota_override")
            .order_by(AUDIT.c.id)
        ).all()
    assert [o for o, _ in outcomes] == ["set", "cleared"]
    assert all(actor.startswith("operator:") for _, actor in outcomes)


def test_the_day_boundary_in_the_zone_resets_the_counts(make_stack):
    """Yesterday's tasks (in Asia/Shanghai, on the database clock) do not count: the
    tasks are moved to one millisecond before today's local midnight, then to it."""
    stack = quota_stack(make_stack, user_tasks_per_day=2)
    alice = stack.client("alice")
    ids = [create(alice).json()["taskId"] for _ in range(2)]
    assert create(alice).status_code == 429
    day = the_day(stack)
    local_start = day.start.replace(tzinfo=UTC).astimezone(ZoneInfo(ZONE))
    assert (local_start.hour, local_start.minute) == (0, 0)

    def move(to: datetime) -> None:
        with stack.runtime.engine.begin() as conn:
            conn.execute(update(TASKS).where(TASKS.c.task_no.in_(ids)).values(requested_at=to))

    move(day.start - timedelta(milliseconds=1))
    quota = alice.get("/api/v1/me/quota").json()["tasks"]
    assert (quota["used"], quota["remaining"]) == (0, 2)
    assert create(alice).status_code == 202
    move(day.start)  # exactly midnight belongs to today
    assert alice.get("/api/v1/me/quota").json()["tasks"]["used"] == 3
    assert create(alice).status_code == 429


@pytest.mark.parametrize(
    ("zone", "now", "hours"),
    [
        ("Asia/Shanghai", datetime(2026, 12, 2, 15, 59, 59), 24),  # 23:59:59 local
        ("Asia/Shanghai", datetime(2026, 12, 2, 16, 0, 0), 24),  # 00:00 local, next day
        ("Europe/Berlin", datetime(2026, 3, 29, 10, 0, 0), 23),  # spring forward
        ("Europe/Berlin", datetime(2026, 10, 25, 10, 0, 0), 25),  # fall back
    ],
)
def test_day_of_is_the_local_calendar_day(zone, now, hours):
    day = day_of(now, zone)
    assert day.start <= now < day.end
    assert day.end - day.start == timedelta(hours=hours)
    start = day.start.replace(tzinfo=UTC).astimezone(ZoneInfo(zone))
    assert (start.hour, start.minute) == (0, 0)
    assert day.resets_at.date() == start.date() + timedelta(days=1)


def test_a_scheduled_run_over_quota_makes_no_task_and_says_why(make_stack):
    stack = quota_stack(make_stack, user_tasks_per_day=1)
    alice = stack.client("alice")
    assert create(alice).status_code == 202
    schedule = {
        "name": "Daily orders",
        "export": {"exportType": "ORDERS", "format": "csv", "parameters": {}},
        "cron": "0 8 * * *",
        "timezone": ZONE,
        "window": "previous_day",
    }
    sid = alice.post("/api/v1/schedules", json=schedule).json()["scheduleId"]
    run = alice.post(f"/api/v1/schedules/{sid}/run").json()
    assert run["outcome"] == "failed" and run["taskId"] is None, run
    runs = alice.get(f"/api/v1/schedules/{sid}/runs").json()["items"]
    assert [(r["outcome"], r["code"]) for r in runs] == [("failed", "QUOTA_EXCEEDED")]
    assert "you have created 1 export today, your daily quota of 1;" in runs[0]["message"]
    assert tasks_in_db(stack) == 1
