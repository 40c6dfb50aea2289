"""What people did to a task, as the detail and the list tell it: who cancelled it (its
owner, an administrator, an operator), on every path a cancel ends by (at once, the
worker stopping, the reconciler finding the stopped worker), a cancel that arrived after
the export finished, and a retry by hand that ran and failed again, with whether a retry
can be expected to help. SQLite and MariaDB (the audit trail is read with SQL)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import httpx
from sqlalchemy import update

from export_center import operations, repository
from export_center.db import db_now, db_now_plus
from export_center.models import ExportTask
from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import Stack, create, wait_state

TASKS = ExportTask.__table__
SEES_ALL = ["export:orders:create", "export:flaky:create", "platform:download:all"]
ADMIN = [*SEES_ALL, "platform:export:admin"]


def _set(stack: Stack, task_no: str, **values: Any) -> None:
    with stack.runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, task_no)
        assert task is not None
        conn.execute(update(TASKS).where(TASKS.c.id == task.id).values(**values))


def _queued(stack: Stack, client: httpx.Client, day: int) -> str:
    d = f"1995-04-{day:02d}"
    answer = create(client, "csv", taskName=f"day {day}", parameters={"from": d, "to": d})
    assert answer.status_code == 202, answer.text
    return str(answer.json()["taskId"])


def _listed(client: httpx.Client, task_id: str) -> dict[str, Any]:
    [item] = [x for x in client.get("/api/v1/exports").json()["items"] if x["taskId"] == task_id]
    return item


def _ago(iso: str) -> float:
    return (
        dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    ).total_seconds()


def test_a_queued_export_cancelled_says_who_cancelled_it(make_stack):
    stack = make_stack(consumer={"enabled": False})
    bob = stack.client("bob", perms=["export:orders:create"])
    admin = stack.client("admin-1", perms=SEES_ALL)
    root = stack.client("root", perms=ADMIN)
    by_owner, by_admin, by_admin_api, by_operator = (_queued(stack, bob, d) for d in range(1, 5))
    assert bob.post(f"/api/v1/exports/{by_owner}/cancel").status_code == 202
    answer = admin.post(f"/api/v1/exports/{by_admin}/cancel")
    assert answer.status_code == 202, answer.text
    # The answer to the cancel already says who (the person who pressed it reads it).
    assert answer.json()["cancelledBy"] == {"role": "administrator", "user": "admin-1"}
    api = root.post(f"/api/v1/admin/tasks/{by_admin_api}/cancel", json={"reason": "wrong range"})
    assert api.status_code == 200, api.text
    task = operations.find_task(stack.runtime, by_operator)
    operations.cancel_task(stack.runtime, task, actor="operator:ops-login", reason="cleanup")
    expected = {
        by_owner: ("cancelled by its owner (bob)", {"role": "owner", "user": "bob"}),
        by_admin: (
            "cancelled by an administrator (admin-1)",
            {"role": "administrator", "user": "admin-1"},
        ),
        by_admin_api: (
            "cancelled by an administrator (root)",
            {"role": "administrator", "user": "root"},
        ),
        # An operator's login is not the tenant's business: the role only.
        by_operator: ("cancelled by an operator", {"role": "operator", "user": None}),
    }
    for task_id, (message, who) in expected.items():
        for client in (bob, admin):
            detail = client.get(f"/api/v1/exports/{task_id}").json()
            assert detail["state"] == "cancelled" and detail["cancelRequested"] is True
            assert detail["error"] == {"code": "CANCELLED", "message": message}, task_id
            assert detail["cancelledBy"] == who, task_id
            assert _listed(client, task_id)["cancelledBy"] == who
    assert "ops-login" not in str(bob.get("/api/v1/exports").json())
    # Nobody asked to cancel the others: no one is named.
    other = _queued(stack, bob, 9)
    assert bob.get(f"/api/v1/exports/{other}").json()["cancelledBy"] is None


def test_a_running_export_stopped_by_an_administrator_says_so(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=1)
    faulty.reset(rows=100_000, sleep_seconds=0.2)
    bob = stack.client("bob", perms=FLAKY)
    admin = stack.client("admin-1", perms=SEES_ALL)
    task_id = flaky(bob, taskName="Slow").json()["taskId"]
    wait_state(bob, task_id, {"running"})
    flagged = admin.post(f"/api/v1/exports/{task_id}/cancel").json()
    assert flagged["state"] == "running" and flagged["cancelRequested"] is True
    assert flagged["cancelledBy"] == {"role": "administrator", "user": "admin-1"}
    stopped = wait_state(bob, task_id, timeout=30)
    assert stopped["state"] == "cancelled", stopped
    assert stopped["error"] == {
        "code": "CANCELLED",
        "message": "cancelled by an administrator (admin-1)",
    }


def test_a_cancel_the_reconciler_ends_names_who_asked(make_stack):
    """The worker died after the cancel was asked for: the reconciler ends the task when
    its lease runs out, with the audited canceller's name."""
    stack = make_stack(consumer={"enabled": False})
    alice = stack.client("alice")
    task_id = _queued(stack, alice, 1)
    lease = {"lease_owner": "dead-worker", "lease_until": db_now_plus(600)}
    _set(stack, task_id, status="RUNNING", phase="fetch", started_at=db_now(), **lease)
    assert alice.post(f"/api/v1/exports/{task_id}/cancel").json()["state"] == "running"
    _set(stack, task_id, lease_until=db_now_plus(-5))
    stack.runtime.reconciler.run_once()
    detail = alice.get(f"/api/v1/exports/{task_id}").json()
    assert detail["state"] == "cancelled", detail
    assert detail["error"]["message"] == "cancelled by its owner (alice)"
    assert detail["cancelledBy"] == {"role": "owner", "user": "alice"}


def test_a_cancel_that_arrived_after_the_export_finished_is_told(make_stack):
    stack = make_stack(consumer={"enabled": False})
    alice = stack.client("alice")
    admin = stack.client("admin-1", perms=SEES_ALL)
    task_id = _queued(stack, alice, 1)
    _set(stack, task_id, status="RUNNING", lease_owner="w", lease_until=db_now_plus(600))
    assert admin.post(f"/api/v1/exports/{task_id}/cancel").json()["cancelRequested"] is True
    # The worker committed its file before it saw the flag.
    _set(
        stack,
        task_id,
        status="SUCCEEDED",
        completed_at=db_now(),
        expires_at=db_now_plus(86400),
        object_key="exports/x.csv",
        file_name="x.csv",
        size_bytes=10,
        lease_owner=None,
        lease_until=None,
    )
    for client in (alice, admin):
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        assert (detail["state"], detail["cancelRequested"], detail["error"]) == (
            "succeeded",
            True,
            None,
        )
        assert detail["cancelledBy"] == {"role": "administrator", "user": "admin-1"}
        assert detail["downloadUrl"]


def test_a_retry_that_failed_again_says_it_ran_and_whether_retrying_helps(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=1, max_rows=1500)
    faulty.reset(rows=500, always_fail=True, fail_status=404)
    alice = stack.client("alice", perms=FLAKY)
    root = stack.client("root", perms=ADMIN)
    task_id = flaky(alice, taskName="Refused").json()["taskId"]
    failed = wait_state(alice, task_id)
    assert (failed["state"], failed["error"]["code"]) == ("failed", "PROVIDER_REJECTED")
    # A retry is allowed (the provider may be fixed) but will probably meet the same 404.
    assert (failed["retryable"], failed["retryUnlikelyToHelp"], failed["lastRetry"]) == (
        True,
        True,
        None,
    )
    queued = alice.post(f"/api/v1/exports/{task_id}/retry")
    assert queued.status_code == 202
    assert queued.json()["lastRetry"]["by"] == {"role": "owner", "user": "alice"}
    again = wait_state(alice, task_id)
    assert (again["state"], again["error"]["code"]) == ("failed", "PROVIDER_REJECTED")
    retried = again["lastRetry"]
    assert retried["by"] == {"role": "owner", "user": "alice"} and 0 <= _ago(retried["at"]) < 60
    assert _listed(alice, task_id)["lastRetry"] == retried
    # The time is the audit trail's (database clock).
    report = root.get(f"/api/v1/admin/tasks/{task_id}").json()
    [audited] = [a for a in report["audit"] if a["action"] == "manual_retry"]
    at = dt.datetime.fromisoformat(retried["at"].replace("Z", "+00:00"))
    assert at == dt.datetime.fromisoformat(audited["at"].replace("Z", "+00:00"))
    # An administrator's retry is the newest one.
    time.sleep(0.01)
    answer = root.post(f"/api/v1/admin/tasks/{task_id}/retry", json={"reason": "provider fixed?"})
    assert answer.status_code == 200, answer.text
    third = wait_state(alice, task_id)
    assert third["state"] == "failed"
    assert third["lastRetry"]["by"] == {"role": "administrator", "user": "root"}
    assert third["lastRetry"]["at"] >= retried["at"]
    # A failure a retry may cure says so; one it cannot is not offered a retry at all.
    faulty.reset(rows=500, always_fail=True, fail_status=503)
    unavailable = wait_state(alice, flaky(alice, taskName="Down").json()["taskId"])
    assert unavailable["error"]["code"] == "PROVIDER_UNAVAILABLE"
    assert (unavailable["retryable"], unavailable["retryUnlikelyToHelp"]) == (True, False)
    faulty.reset(rows=2500)
    too_big = wait_state(alice, flaky(alice, taskName="Big").json()["taskId"])
    assert too_big["error"]["code"] == "ROW_LIMIT_EXCEEDED"
    assert (too_big["retryable"], too_big["retryUnlikelyToHelp"]) == (False, True)
    ok = wait_state(alice, create(alice, "csv", parameters={"from": "1995-05-01"}).json()["taskId"])
    assert (ok["state"], ok["retryUnlikelyToHelp"], ok["lastRetry"]) == ("succeeded", False, None)
