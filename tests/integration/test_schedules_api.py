"""``/api/v1/schedules`` on a running stack (SQLite and MariaDB): create, read, change,
pause, resume, run now, delete, runs, visibility and the 422s. The scheduler loop is
off here; the tests drive ``runtime.scheduler.run_once()`` themselves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from export_center.repository.tables import SCHEDULES
from tests.support.helpers import Stack, wait_state

CUSTOMERS = "export:customers:create"
ORDERS = "export:orders:create"


def body(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "Last week's orders",
        "export": {"exportType": "ORDERS", "format": "csv", "parameters": {}},
        "cron": "0 8 * * MON",
        "timezone": "Asia/Shanghai",
        "window": "previous_week",
    }
    data.update(over)
    return data


@pytest.fixture
def sched_stack(make_stack: Any) -> Stack:
    return make_stack(scheduler={"enabled": False})  # type: ignore[no-any-return]


def test_create_read_list_update_delete(sched_stack: Stack) -> None:
    alice = sched_stack.client("alice")
    created = alice.post("/api/v1/schedules", json=body(notify=[{"channel": "page"}]))
    assert created.status_code == 201, created.text
    got = created.json()
    sid = got["scheduleId"]
    assert got["state"] == "active" and got["owner"] == "alice"
    fires = got["nextFireTimes"]
    assert len(fires) == 5
    parsed = [datetime.fromisoformat(t) for t in fires]
    assert all(t.utcoffset() == timedelta(hours=8) for t in parsed)
    assert all((t.weekday(), t.hour, t.minute) == (0, 8, 0) for t in parsed)
    assert [b - a for a, b in zip(parsed, parsed[1:], strict=False)] == [timedelta(days=7)] * 4
    assert got["notify"] == [{"channel": "page", "events": got["notify"][0]["events"]}]

    detail = alice.get(f"/api/v1/schedules/{sid}").json()
    assert detail["nextFireTimes"] == fires and detail["window"] == "previous_week"
    listed = alice.get("/api/v1/schedules").json()["items"]
    assert [s["scheduleId"] for s in listed] == [sid]

    changed = alice.patch(
        f"/api/v1/schedules/{sid}", json={"cron": "30 2 * * *", "timezone": "Europe/Berlin"}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["cron"] == "30 2 * * *"
    assert all(datetime.fromisoformat(t).hour in (2, 3) for t in changed.json()["nextFireTimes"])
    assert changed.json()["window"] == "previous_week"  # untouched fields stay

    bad = alice.patch(f"/api/v1/schedules/{sid}", json={"cron": "not a cron"})
    assert (bad.status_code, bad.json()["code"]) == (422, "INVALID_CRON")
    cleared = alice.patch(f"/api/v1/schedules/{sid}", json={"name": None, "export": None})
    assert (cleared.status_code, cleared.json()["code"]) == (422, "INVALID_VALUE")
    assert cleared.json()["field"] == "export"
    no_window = alice.patch(f"/api/v1/schedules/{sid}", json={"window": None})
    assert no_window.status_code == 200 and no_window.json()["window"] is None

    assert alice.delete(f"/api/v1/schedules/{sid}").status_code == 204
    assert alice.get(f"/api/v1/schedules/{sid}").json()["code"] == "SCHEDULE_NOT_FOUND"
    assert alice.get("/api/v1/schedules").json()["items"] == []


@pytest.mark.parametrize(
    ("over", "status", "code", "field"),
    [
        ({"cron": "61 * * * *"}, 422, "INVALID_CRON", "cron"),
        ({"cron": "0 8 * *"}, 422, "INVALID_CRON", "cron"),
        ({"timezone": "Mars/Olympus_Mons"}, 422, "UNKNOWN_TIME_ZONE", "timezone"),
        ({"window": "last_week"}, 422, "INVALID_WINDOW", "window"),
        ({"window": {"lastNDays": 0}}, 422, "INVALID_WINDOW", "window"),
        ({"window": []}, 422, "INVALID_WINDOW", "window"),
        ({"window": 7}, 422, "INVALID_WINDOW", "window"),
        (
            {"export": {"exportType": "CUSTOMERS", "format": "csv"}},
            422,
            "WINDOW_NOT_SUPPORTED",
            "window",
        ),
        ({"notify": [{"channel": "sms"}]}, 422, "INVALID_NOTIFY", "notify[0].channel"),
        ({"notify": "page"}, 422, "INVALID_NOTIFY", "notify"),
        (
            {"export": {"exportType": "ORDERS", "format": "csv", "requestId": "k"}},
            422,
            "UNKNOWN_FIELD",
            "export.requestId",
        ),
        (
            {"export": {"exportType": "ORDERS", "format": "csv", "notify": []}},
            422,
            "INVALID_NOTIFY",
            "export.notify",
        ),
        (
            {"export": {"exportType": "ORDERS", "format": "docx"}},
            422,
            "INVALID_FORMAT",
            "export.format",
        ),
        (
            {"export": {"exportType": "ORDERS", "format": "csv", "parameters": {"zz": 1}}},
            422,
            "UNKNOWN_PARAMETER",
            None,
        ),
        ({"export": {"exportType": "NOPE", "format": "csv"}}, 422, "UNKNOWN_EXPORT_TYPE", None),
        ({"endAt": "2000-01-01T00:00:00Z"}, 422, "INVALID_VALUE", "endAt"),
        ({"cron": None}, 422, "INVALID_TYPE", "cron"),
    ],
)
def test_bad_bodies_are_422_with_a_code(
    sched_stack: Stack, over: dict[str, Any], status: int, code: str, field: str | None
) -> None:
    answer = sched_stack.client("alice", perms=[ORDERS, CUSTOMERS]).post(
        "/api/v1/schedules", json=body(**over)
    )
    got = answer.json()
    assert (answer.status_code, got["code"]) == (status, code), answer.text
    assert got["message"]
    if field is not None:
        assert got["field"] == field
    else:
        assert got["field"].startswith("export.")


def test_permission_needed_to_create(sched_stack: Stack) -> None:
    answer = sched_stack.client("bob", perms=[]).post("/api/v1/schedules", json=body())
    assert (answer.status_code, answer.json()["code"]) == (403, "PERMISSION_DENIED")


def test_visibility(sched_stack: Stack) -> None:
    sid = sched_stack.client("alice").post("/api/v1/schedules", json=body()).json()["scheduleId"]
    other_tenant = sched_stack.client("alice", tenant="t2")
    assert other_tenant.get(f"/api/v1/schedules/{sid}").status_code == 404
    assert other_tenant.get(f"/api/v1/schedules/{sid}/runs").status_code == 404
    assert other_tenant.post(f"/api/v1/schedules/{sid}/run").status_code == 404
    bob = sched_stack.client("bob")
    assert bob.get(f"/api/v1/schedules/{sid}").json()["code"] == "SCHEDULE_NOT_FOUND"
    assert bob.delete(f"/api/v1/schedules/{sid}").status_code == 404
    reader = sched_stack.client("carol", perms=["platform:download:all"])
    assert reader.get(f"/api/v1/schedules/{sid}").status_code == 200
    assert reader.get(f"/api/v1/schedules/{sid}/runs").status_code == 200
    assert reader.post(f"/api/v1/schedules/{sid}/pause").status_code == 403
    assert reader.get("/api/v1/schedules").json()["items"] == []  # the list is "mine"


def test_run_now_makes_a_task_that_names_its_schedule(sched_stack: Stack) -> None:
    alice = sched_stack.client("alice")
    sid = alice.post("/api/v1/schedules", json=body(window="previous_day")).json()["scheduleId"]
    run = alice.post(f"/api/v1/schedules/{sid}/run")
    assert run.status_code == 201, run.text
    got = run.json()
    assert got["manual"] is True and got["outcome"] == "created" and got["taskId"]
    detail = wait_state(alice, got["taskId"])
    assert detail["state"] == "succeeded"
    assert detail["scheduleId"] == sid
    yesterday = got["windowFrom"]
    assert detail["parameters"]["from"] == detail["parameters"]["to"] == yesterday
    assert detail["timeZone"] == "Asia/Shanghai"
    runs = alice.get(f"/api/v1/schedules/{sid}/runs").json()["items"]
    assert len(runs) == 1
    assert runs[0]["taskId"] == got["taskId"] and runs[0]["state"] == "succeeded"
    assert runs[0]["rows"] == detail["processed"]
    assert datetime.fromisoformat(runs[0]["fireTime"]).utcoffset() == timedelta(hours=8)
    # A task a person made has no schedule.
    plain = alice.post("/api/v1/exports", json={"exportType": "ORDERS", "format": "csv"})
    assert alice.get(f"/api/v1/exports/{plain.json()['taskId']}").json()["scheduleId"] is None


def set_schedule(stack: Stack, sid: int, **values: Any) -> None:
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(SCHEDULES).where(SCHEDULES.c.id == sid).values(**values))


def db_now(stack: Stack) -> datetime:
    from export_center.repository.schedules import database_now

    with stack.runtime.engine.connect() as conn:
        return database_now(conn)


def test_pause_resume(sched_stack: Stack) -> None:
    alice = sched_stack.client("alice")
    sid = alice.post("/api/v1/schedules", json=body(cron="* * * * *")).json()["scheduleId"]
    paused = alice.post(f"/api/v1/schedules/{sid}/pause").json()
    assert paused["state"] == "paused" and paused["nextFireTimes"] == []
    assert paused["pauseReason"] == "paused by alice"
    set_schedule(
        sched_stack,
        sid,
        next_fire_at=(db_now(sched_stack) - timedelta(minutes=3)).replace(tzinfo=None),
    )
    assert sched_stack.runtime.scheduler.run_once() == 0  # a paused schedule does not fire
    resumed = alice.post(f"/api/v1/schedules/{sid}/resume").json()
    assert resumed["state"] == "active" and resumed["pauseReason"] is None
    first = datetime.fromisoformat(resumed["nextFireTimes"][0])
    assert first > db_now(sched_stack)  # fires missed while paused are not made up
    assert alice.get(f"/api/v1/schedules/{sid}/runs").json()["items"] == []


def test_lost_permission_fails_the_run_and_pauses(sched_stack: Stack) -> None:
    alice = sched_stack.client("alice")
    sid = alice.post("/api/v1/schedules", json=body(cron="0 * * * *")).json()["scheduleId"]
    # A newer token of alice lacks the ORDERS permission; any authenticated call
    # records it.
    assert (
        sched_stack.client("alice", perms=["export:customers:create"]).get("/api/v1/me").status_code
        == 200
    )
    set_schedule(
        sched_stack,
        sid,
        next_fire_at=(db_now(sched_stack) - timedelta(seconds=5)).replace(tzinfo=None),
    )
    assert sched_stack.runtime.scheduler.run_once() == 1
    detail = alice.get(f"/api/v1/schedules/{sid}").json()
    assert detail["state"] == "paused"
    assert "export:orders:create" in detail["pauseReason"]
    (run,) = alice.get(f"/api/v1/schedules/{sid}/runs").json()["items"]
    assert (run["outcome"], run["state"], run["taskId"], run["code"]) == (
        "failed",
        "failed",
        None,
        "PERMISSION_DENIED",
    )
    assert "may no longer create ORDERS exports" in run["message"]
    assert sched_stack.runtime.scheduler.run_once() == 0
    # The pause is announced in the owner's page list, once, with the reason.
    inbox = alice.get("/api/v1/notifications").json()
    paused = [n for n in inbox["items"] if n["type"] == "schedule.paused"]
    assert len(paused) == 1 and inbox["unreadCount"] == 1
    assert paused[0]["scheduleId"] == sid
    assert "may no longer create ORDERS exports" in paused[0]["message"]
    assert paused[0]["messageZh"] and paused[0]["messageZh"] != paused[0]["message"]
    assert "创建者已没有此类导出的权限（需要 export:orders:create）" in paused[0]["messageZh"]
    assert "owner" not in paused[0]["messageZh"]
    # The owner cannot resume, nor run it now, with the token that lacks the permission.
    weak = sched_stack.client("alice", perms=["export:customers:create"])
    for action in ("resume", "run"):
        refused = weak.post(f"/api/v1/schedules/{sid}/{action}")
        assert (refused.status_code, refused.json()["code"]) == (403, "PERMISSION_DENIED")
        assert "export:orders:create" in refused.json()["message"]
    assert len(alice.get(f"/api/v1/schedules/{sid}/runs").json()["items"]) == 1
    assert weak.get(f"/api/v1/schedules/{sid}").json()["state"] == "paused"
    # With the permission back, it resumes.
    assert alice.post(f"/api/v1/schedules/{sid}/resume").json()["state"] == "active"


def test_tasks_are_named_after_the_schedule_in_the_saved_language(sched_stack: Stack) -> None:
    li = sched_stack.client("li")
    li.headers["accept-language"] = "zh-CN,zh;q=0.9"
    created = li.post("/api/v1/schedules", json=body(name="每周订单", window="previous_day"))
    sid = created.json()["scheduleId"]
    assert created.json()["export"]["options"]["language"] == "zh-CN"
    first = li.post(f"/api/v1/schedules/{sid}/run").json()
    detail = wait_state(li, first["taskId"])
    day = detail["parameters"]["from"]
    assert detail["parameters"]["to"] == day  # previous_day: one day, named in the task
    assert detail["taskName"] == f"每周订单 {day}" and detail["options"]["language"] == "zh-CN"
    assert detail["fileName"].startswith(f"每周订单 {day}")
    # No Accept-Language (a script): the token's locale claim picks the header language.
    wang = sched_stack.client("wang", locale="zh-CN")
    made = wang.post("/api/v1/schedules", json=body(name="w")).json()
    assert made["export"]["options"]["language"] == "zh-CN"
    plain = wang.post("/api/v1/exports", json={"exportType": "ORDERS", "format": "csv"})
    assert (
        wang.get(f"/api/v1/exports/{plain.json()['taskId']}").json()["options"]["language"]
        == "zh-CN"
    )


def test_a_run_while_the_same_export_is_queued_is_a_duplicate(make_stack: Any) -> None:
    idle = make_stack(scheduler={"enabled": False}, consumer={"enabled": False})
    alice = idle.client("alice")
    sid = alice.post("/api/v1/schedules", json=body(window="previous_day")).json()["scheduleId"]
    one = alice.post(f"/api/v1/schedules/{sid}/run").json()
    two = alice.post(f"/api/v1/schedules/{sid}/run").json()
    assert two["taskId"] == one["taskId"]
    assert (one["outcome"], two["outcome"]) == ("created", "duplicate")
    assert "still queued or running" in two["message"]


def test_a_start_without_an_offset_is_a_wall_time_of_the_schedules_zone(
    sched_stack: Stack,
) -> None:
    alice = sched_stack.client("alice")
    # Monday 2030-01-07 08:00 in Shanghai (00:00 UTC): that fire is the first.
    made = alice.post("/api/v1/schedules", json=body(startAt="2030-01-07T08:00:00"))
    assert made.status_code == 201, made.text
    assert made.json()["nextFireTimes"][0] == "2030-01-07T08:00:00+08:00"
    # With an offset, the instant is the one given: 08:00 UTC is 16:00 in Shanghai.
    later = alice.post("/api/v1/schedules", json=body(startAt="2030-01-07T08:00:00Z"))
    assert later.json()["nextFireTimes"][0] == "2030-01-14T08:00:00+08:00"


def test_a_window_and_date_parameters_together_are_422(sched_stack: Stack) -> None:
    alice = sched_stack.client("alice")
    export = {"exportType": "ORDERS", "format": "csv", "parameters": {"from": "1995-01-01"}}
    answer = alice.post("/api/v1/schedules", json=body(export=export))
    got = answer.json()
    assert (answer.status_code, got["code"], got["field"]) == (
        422,
        "WINDOW_CONFLICT",
        "export.parameters.from",
    )
    # Without a window, fixed dates are fine.
    fixed = alice.post("/api/v1/schedules", json=body(export=export, window=None))
    assert fixed.status_code == 201, fixed.text


def test_downtime_coalesces_into_one_run_with_the_latest_window(sched_stack: Stack) -> None:
    alice = sched_stack.client("alice")
    created = alice.post(
        "/api/v1/schedules", json=body(cron="0 0 * * *", timezone="UTC", window="previous_day")
    ).json()
    sid = created["scheduleId"]
    now = db_now(sched_stack)
    latest = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if latest > now - timedelta(seconds=2):  # just at midnight: take the day before
        latest -= timedelta(days=1)
    set_schedule(sched_stack, sid, next_fire_at=(latest - timedelta(days=4)).replace(tzinfo=None))
    assert sched_stack.runtime.scheduler.run_once() == 1
    assert sched_stack.runtime.scheduler.run_once() == 0
    (run,) = alice.get(f"/api/v1/schedules/{sid}/runs").json()["items"]
    assert run["fires"] == 5
    assert datetime.fromisoformat(run["fireTime"]) == latest
    day = (latest - timedelta(days=1)).date().isoformat()
    assert (run["windowFrom"], run["windowTo"]) == (day, day)
    task = alice.get(f"/api/v1/exports/{run['taskId']}").json()
    assert task["parameters"] == {"from": day, "to": day} and task["scheduleId"] == sid
    nxt = datetime.fromisoformat(alice.get(f"/api/v1/schedules/{sid}").json()["nextFireTimes"][0])
    assert nxt == latest + timedelta(days=1) and nxt > now


def test_end_at_ends_the_schedule(sched_stack: Stack) -> None:
    alice = sched_stack.client("alice")
    now = db_now(sched_stack)
    end = (now + timedelta(minutes=2)).astimezone(UTC)
    sid = alice.post(
        "/api/v1/schedules", json=body(cron="* * * * *", endAt=end.isoformat())
    ).json()["scheduleId"]
    # Pretend the schedule was due long ago and the end has passed by now.
    start = (now - timedelta(minutes=10)).replace(second=0, microsecond=0, tzinfo=None)
    # Fires at start, +1, +2, +3, +4 min are before endAt; the later ones are not.
    set_schedule(
        sched_stack, sid, next_fire_at=start, end_at=start + timedelta(minutes=4, seconds=30)
    )
    assert sched_stack.runtime.scheduler.run_once() == 1
    detail = alice.get(f"/api/v1/schedules/{sid}").json()
    assert detail["state"] == "ended" and detail["nextFireTimes"] == []
    (run,) = alice.get(f"/api/v1/schedules/{sid}/runs").json()["items"]
    assert run["fires"] == 5  # the fires up to endAt, not those after it


def test_principals_are_recorded_at_most_once_a_minute_unless_claims_change(
    sched_stack: Stack,
) -> None:
    from export_center.repository.schedules import read_principal
    from export_center.repository.tables import PRINCIPALS

    def seen() -> tuple[Any, Any]:
        with sched_stack.runtime.engine.connect() as conn:
            row = (
                conn.execute(PRINCIPALS.select().where(PRINCIPALS.c.user_id == "dora"))
                .mappings()
                .one()
            )
        return row["seen_at"], row["permissions_json"]

    dora = sched_stack.client("dora")
    assert dora.get("/api/v1/me").status_code == 200
    first = seen()
    assert dora.get("/api/v1/me").status_code == 200
    assert seen() == first  # unchanged claims within a minute: no write
    assert sched_stack.client("dora", perms=[CUSTOMERS]).get("/api/v1/me").status_code == 200
    with sched_stack.runtime.engine.connect() as conn:
        principal = read_principal(conn, "t1", "dora")
    assert principal is not None and principal.permissions == frozenset({CUSTOMERS})
    assert principal.app_code == "PLATFORM"
