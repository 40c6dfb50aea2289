"""What the download-center page reads from the API: who am I, the types I may create
with their form fields, filters by type and owner, and each task's owner, parameters,
rate, ETA and link expiry."""

from __future__ import annotations

import datetime as dt
import time

from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import create, wait_state

SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}
ADMIN_PERMS = ["export:orders:create", "export:customers:create", "platform:download:all"]


def test_me_tells_who_the_token_says(stack):
    me = stack.client("alice", perms=ADMIN_PERMS).get("/api/v1/me").json()
    assert (me["user"], me["tenant"], me["app"]) == ("alice", "t1", "PLATFORM")
    assert me["seesAllOwners"] is True and me["isAdmin"] is False
    assert sorted(me["permissions"]) == sorted(ADMIN_PERMS)
    expires = dt.datetime.fromisoformat(me["expiresAt"].replace("Z", "+00:00"))
    assert 3500 < (expires - dt.datetime.now(dt.UTC)).total_seconds() <= 3600
    assert stack.client("bob").get("/api/v1/me").json()["seesAllOwners"] is False
    assert stack.client(None).get("/api/v1/me").status_code == 401


def test_export_types_carry_what_a_form_needs(stack):
    types = {
        t["exportType"]: t
        for t in stack.client("alice", perms=ADMIN_PERMS).get("/api/v1/export-types").json()
    }
    orders = types["ORDERS"]
    assert (orders["title"], orders["titleZh"]) == ("Orders", "订单")
    assert orders["dateRange"] == ["from", "to"] and orders["maxRows"] == 5_000_000
    assert orders["formats"] == ["csv", "xlsx", "jsonl", "parquet"]
    fields = {p["name"]: p for p in orders["parameters"]}
    assert fields["from"] == {
        "name": "from",
        "type": "date",
        "required": False,
        "values": None,
        "valueTitles": None,
        "valueTitlesZh": None,
        "title": "Order date from",
        "titleZh": "下单日期起",
    }
    assert fields["status"]["values"] == ["O", "F", "P"]
    assert fields["status"]["valueTitles"] == {
        "F": "Fulfilled",
        "O": "Open",
        "P": "Partly fulfilled",
    }
    assert fields["status"]["valueTitlesZh"] == {"F": "已完成", "O": "未完成", "P": "部分完成"}
    assert types["CUSTOMERS"]["titleZh"] == "客户"
    only_orders = stack.client("bob").get("/api/v1/export-types").json()
    assert [t["exportType"] for t in only_orders] == ["ORDERS"]


def test_each_task_shows_owner_parameters_and_link_expiry(stack):
    alice = stack.client("alice")
    detail = wait_state(alice, create(alice, "csv", parameters=SEPTEMBER).json()["taskId"])
    assert detail["owner"] == "alice" and detail["parameters"] == SEPTEMBER
    assert detail["rowsPerSecond"] is None and detail["etaSeconds"] is None  # not running
    link_expires = dt.datetime.fromisoformat(detail["downloadExpiresAt"].replace("Z", "+00:00"))
    expires = int(detail["downloadUrl"].split("expires=")[1].split("&")[0])
    assert int(link_expires.timestamp()) == expires


def test_a_running_task_shows_rows_per_second_and_eta(make_stack):
    from sqlalchemy import update

    from export_center import repository
    from export_center.db import db_now_plus
    from export_center.models import ExportTask

    stack = make_stack(consumer={"enabled": False})
    alice = stack.client("alice")
    task_id = create(alice, "csv").json()["taskId"]
    with stack.runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, task_id)
        conn.execute(
            update(ExportTask.__table__)
            .where(ExportTask.__table__.c.id == task.id)
            .values(
                status="RUNNING",
                phase="render",
                processed_rows=5000,
                total_rows=15000,
                started_at=db_now_plus(-10),
                lease_owner="x",
                lease_until=db_now_plus(60),
            )
        )
    detail = alice.get(f"/api/v1/exports/{task_id}").json()
    assert detail["state"] == "running"
    assert 400 <= detail["rowsPerSecond"] <= 500  # 5,000 rows in about 10 s
    assert 18 <= detail["etaSeconds"] <= 22  # 10,000 rows left at that rate


def test_list_filters_by_type_and_owner(stack):
    alice = stack.client("alice", perms=ADMIN_PERMS)
    bob = stack.client("bob")
    a_orders = create(alice, "csv", parameters=SEPTEMBER).json()["taskId"]
    a_customers = create(alice, "xlsx", exportType="CUSTOMERS").json()["taskId"]
    b_orders = create(bob, "csv", parameters=SEPTEMBER).json()["taskId"]
    for task_id in (a_orders, a_customers, b_orders):
        wait_state(alice, task_id)

    def ids(client, **query):
        answer = client.get("/api/v1/exports", params=query)
        assert answer.status_code == 200, answer.text
        return [t["taskId"] for t in answer.json()["items"]]

    assert ids(alice) == [b_orders, a_customers, a_orders]
    assert ids(alice, exportType="ORDERS") == [b_orders, a_orders]
    assert ids(alice, exportType="CUSTOMERS,ORDERS", owner="alice") == [a_customers, a_orders]
    assert ids(alice, owner="bob") == [b_orders]
    assert ids(alice, owner="Bob") == []  # exact, like every identifier
    assert ids(bob) == [b_orders] and ids(bob, owner="bob") == [b_orders]
    refused = bob.get("/api/v1/exports", params={"owner": "alice"})
    assert refused.status_code == 403 and refused.json()["code"] == "PERMISSION_DENIED"
    assert [t["owner"] for t in alice.get("/api/v1/exports").json()["items"]] == [
        "bob",
        "alice",
        "alice",
    ]


def test_a_failure_says_whether_a_retry_can_help_and_when_the_automatic_one_is_due(
    flaky_stack, faulty
):
    stack = flaky_stack(max_rows=1500, task={"retry_backoff_seconds": [30.0]})
    alice = stack.client("alice", perms=FLAKY)
    # More rows than the type allows: the same export fails the same way again.
    faulty.reset(rows=2500)
    too_big = wait_state(alice, flaky(alice).json()["taskId"])
    assert (too_big["state"], too_big["error"]["code"]) == ("failed", "ROW_LIMIT_EXCEEDED")
    assert too_big["retryable"] is False and too_big["nextRetryAt"] is None
    # The data source did not answer: a retry can help, and the automatic one is due in
    # 30 s (the backoff), with 2 of the 3 attempts left.
    faulty.reset(rows=500, fail_versions={1})
    task_id = flaky(alice).json()["taskId"]
    deadline = time.monotonic() + 60
    waiting = alice.get(f"/api/v1/exports/{task_id}").json()
    while not (waiting["state"] == "queued" and waiting["error"]) and time.monotonic() < deadline:
        time.sleep(0.1)
        waiting = alice.get(f"/api/v1/exports/{task_id}").json()
    assert waiting["error"]["code"] == "PROVIDER_UNAVAILABLE"
    assert (waiting["attempts"], waiting["maxAttempts"], waiting["retryable"]) == (1, 3, False)
    due = dt.datetime.fromisoformat(waiting["nextRetryAt"].replace("Z", "+00:00"))
    assert 20 < (due - dt.datetime.now(dt.UTC)).total_seconds() <= 31
    fine = wait_state(alice, create(alice, "csv", parameters=SEPTEMBER).json()["taskId"])
    assert (fine["state"], fine["retryable"], fine["nextRetryAt"]) == ("succeeded", False, None)


def test_a_failure_a_retry_may_cure_is_retryable(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=1)
    faulty.reset(rows=500, always_fail=True)
    alice = stack.client("alice", perms=FLAKY)
    failed = wait_state(alice, flaky(alice).json()["taskId"])
    assert (failed["state"], failed["error"]["code"]) == ("failed", "PROVIDER_UNAVAILABLE")
    assert failed["retryable"] is True and failed["maxAttempts"] == 1
    assert failed["nextRetryAt"] is None


def test_development_sign_in_only_where_it_is_on(make_stack):
    off = make_stack()  # tests run with environment "test": off unless set
    answer = off.client(None).post("/api/v1/dev/sign-in", json={"user": "a", "tenant": "t"})
    assert answer.status_code == 404 and answer.json()["code"] == "NOT_FOUND"
    assert off.client(None).get("/api/v1/dev/sign-in").json() == {"available": False}
    on = make_stack(api={"dev_sign_in": True})
    anonymous = on.client(None)
    assert anonymous.get("/api/v1/dev/sign-in").json() == {"available": True}
    # A request that proves no origin is refused (tests/integration/test_trust_boundary.py
    # has the whole rule); the page's own requests carry its Origin.
    unproven = anonymous.post("/api/v1/dev/sign-in", json={"user": "ops", "tenant": "acme"})
    assert unproven.status_code == 403 and unproven.json()["code"] == "SAME_ORIGIN_REQUIRED"
    anonymous.headers["origin"] = on.url
    minted = anonymous.post(
        "/api/v1/dev/sign-in", json={"user": "ops", "tenant": "acme", "role": "admin"}
    )
    assert minted.status_code == 200, minted.text
    headers = {"authorization": f"Bearer {minted.json()['token']}"}
    me = anonymous.get("/api/v1/me", headers=headers).json()
    assert (me["user"], me["tenant"], me["seesAllOwners"], me["isAdmin"]) == (
        "ops",
        "acme",
        True,
        True,
    )
    plain = anonymous.post("/api/v1/dev/sign-in", json={"user": "u", "tenant": "acme"}).json()
    me = anonymous.get("/api/v1/me", headers={"authorization": f"Bearer {plain['token']}"})
    assert (
        me.json()["seesAllOwners"] is False and "export:orders:create" in me.json()["permissions"]
    )
    for bad in (
        {"user": " ", "tenant": "t"},
        {"user": "a", "tenant": "t", "role": "root"},
        {"user": "a", "tenant": "t", "app": "OTHER"},
        {"user": "a"},
    ):
        refused = anonymous.post("/api/v1/dev/sign-in", json=bad)
        assert refused.status_code == 422, (bad, refused.text)
