"""Approval of sensitive exports (issue 25 item 5), over real HTTP on SQLite and MariaDB.

FLAKY (tests/support/fault_provider.py) needs approval above 1,000 estimated rows or
when the file writes its ``note`` column; ``export:flaky:approve`` decides.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from export_center import repository
from export_center.models import ExportOutbox
from export_center.reconciler import Reconciler
from export_center.repository import approvals as store
from export_center.settings import ReconcilerSettings
from tests.support.fault_provider import FAULT_TOKEN, FaultProviderServer, flaky, registry_file
from tests.support.helpers import wait_state

CREATE = "export:flaky:create"
APPROVE = "export:flaky:approve"
RULE = (
    "  approval:\n    when: {rows_over: 1000, columns: [note]}\n"
    f"    approver_permission: {APPROVE}\n"
)


def approval_stack(
    make_stack: Any, faulty: FaultProviderServer, tmp_path: Path, **overrides: Any
) -> Any:
    path = registry_file(tmp_path, faulty.url)
    path.write_text(path.read_text() + RULE)
    return make_stack(
        export_types_file=str(path), provider={"internal_token": FAULT_TOKEN}, **overrides
    )


def outbox_count(stack: Any, task_no: str) -> int:
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_no)
        assert task is not None
        return int(
            conn.execute(select(func.count()).where(ExportOutbox.task_id == task.id)).scalar_one()
        )


def metrics_text(stack: Any) -> str:
    answer = stack.client(None).get("/metrics")
    assert answer.status_code == 200, answer.text
    return answer.text


def audit_of(stack: Any, task_no: str) -> list[tuple[str, str, str]]:
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_no)
        assert task is not None
        rows = repository.audit_entries(conn, task_id=task.id)
    return [(e.action, e.outcome, e.actor) for e in reversed(rows)]


def test_approval_by_another_user_runs_the_export_and_self_approval_is_refused(
    make_stack, faulty, tmp_path
):
    stack = approval_stack(make_stack, faulty, tmp_path)
    faulty.reset(rows=2500, estimate=2500)
    # The requester is an approver too: still not of their own request.
    alice = stack.client("alice", perms=[CREATE, APPROVE])
    created = flaky(alice, columns=["id", "amount"])
    assert created.status_code == 202, created.text
    task_no = created.json()["taskId"]
    detail = alice.get(f"/api/v1/exports/{task_no}").json()
    assert (detail["state"], detail["phase"]) == ("awaiting_approval", "approval"), detail
    assert outbox_count(stack, task_no) == 0  # nothing is dispatched before approval
    listed = alice.get("/api/v1/exports", params={"state": "awaiting_approval"}).json()
    assert [t["taskId"] for t in listed["items"]] == [task_no]
    own = alice.post(f"/api/v1/approvals/{task_no}/approve", json={})
    assert own.status_code == 403 and own.json()["code"] == "SELF_APPROVAL", own.text
    # Someone without the approver permission sees no queue and may not decide.
    carol = stack.client("carol", perms=[CREATE])
    assert carol.get("/api/v1/approvals").json() == {"canApprove": False, "items": []}
    denied = carol.post(f"/api/v1/approvals/{task_no}/approve", json={})
    assert denied.status_code == 403 and denied.json()["code"] == "PERMISSION_DENIED"
    # An approver of another tenant does not even see the task.
    other = stack.client("dave", tenant="t2", perms=[APPROVE])
    assert other.get("/api/v1/approvals").json()["items"] == []
    assert other.post(f"/api/v1/approvals/{task_no}/approve", json={}).status_code == 404
    assert 'export_approval_awaiting{type="FLAKY"} 1.0' in metrics_text(stack)
    bob = stack.client("bob", perms=[APPROVE])
    queue = bob.get("/api/v1/approvals").json()
    assert queue["canApprove"] is True
    [item] = queue["items"]
    assert item["taskId"] == task_no and item["requestedBy"] == "alice"
    assert item["estimatedRows"] == 2500 and any(
        "2,500 rows, more than 1,000" in r for r in item["reasons"]
    )
    assert item["rules"] == [{"rule": "rows_over", "limit": 1000, "estimate": 2500}]
    approved = bob.post(f"/api/v1/approvals/{task_no}/approve", json={"reason": "ok for Q3"})
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] in ("queued", "running", "succeeded")
    done = wait_state(alice, task_no, timeout=60)
    assert done["state"] == "succeeded", done
    # The requester is told in the page (whatever their targets ask for).
    notes = alice.get("/api/v1/notifications").json()["items"]
    [told] = [n for n in notes if n["type"] == "export.approved"]
    assert told["taskId"] == task_no and "was approved" in told["message"]
    assert "已通过审批" in told["messageZh"]
    assert outbox_count(stack, task_no) == 1
    again = bob.post(f"/api/v1/approvals/{task_no}/approve", json={})
    assert again.status_code == 409 and again.json()["code"] == "NOT_AWAITING_APPROVAL"
    assert bob.get("/api/v1/approvals").json()["items"] == []
    text = metrics_text(stack)
    assert 'export_approval_awaiting{type="FLAKY"}' not in text
    assert 'export_approval_decisions_total{outcome="approved",type="FLAKY"}' in text
    trail = audit_of(stack, task_no)
    assert trail[0] == ("approval_requested", "awaiting", "user:t1/alice")
    assert ("approval_decision", "approved", "user:t1/bob") in trail
    with stack.runtime.engine.connect() as conn:
        request = store.read_approval(conn, _id(conn, task_no))
    assert request is not None and request.outcome == "approved" and request.decided_by == "bob"


def _id(conn: Any, task_no: str) -> int:
    task = repository.read_task_by_no(conn, task_no)
    assert task is not None
    return task.id


def test_reject_needs_a_reason_and_ends_the_task_rejected_with_it(make_stack, faulty, tmp_path):
    stack = approval_stack(make_stack, faulty, tmp_path)
    faulty.reset(rows=50, estimate=50)
    alice = stack.client("alice", perms=[CREATE])
    task_no = flaky(alice).json()["taskId"]  # every column: it writes note
    bob = stack.client("bob", perms=[APPROVE])
    empty = bob.post(f"/api/v1/approvals/{task_no}/reject", json={"reason": "  "})
    assert empty.status_code == 422 and empty.json()["code"] == "REASON_REQUIRED"
    rejected = bob.post(f"/api/v1/approvals/{task_no}/reject", json={"reason": "no PII today"})
    assert rejected.status_code == 200, rejected.text
    detail = alice.get(f"/api/v1/exports/{task_no}").json()
    assert (detail["state"], detail["phase"]) == ("rejected", "approval"), detail
    assert detail["error"]["code"] == "APPROVAL_REJECTED"
    assert detail["error"]["message"] == "rejected by bob: no PII today"
    assert outbox_count(stack, task_no) == 0
    late = bob.post(f"/api/v1/approvals/{task_no}/approve", json={})
    assert late.status_code == 409 and late.json()["code"] == "NOT_AWAITING_APPROVAL"
    assert (
        alice.get("/api/v1/exports", params={"state": "rejected"}).json()["items"][0]["taskId"]
        == task_no
    )
    assert ("approval_decision", "rejected", "user:t1/bob") in audit_of(stack, task_no)
    [told] = [
        n for n in alice.get("/api/v1/notifications").json()["items"] if n["taskId"] == task_no
    ]
    assert told["type"] == "export.rejected" and "未通过审批" in told["messageZh"]
    assert "no PII today" in told["message"], told


def test_columns_and_rows_over_rules(make_stack, faulty, tmp_path):
    stack = approval_stack(make_stack, faulty, tmp_path)
    alice = stack.client("alice", perms=[CREATE])
    faulty.reset(rows=40, estimate=40)
    plain = flaky(alice, columns=["id", "amount"], taskName="plain").json()["taskId"]
    assert wait_state(alice, plain, timeout=60)["state"] == "succeeded"
    note = flaky(alice, columns=["id", "note"], taskName="note").json()["taskId"]
    assert alice.get(f"/api/v1/exports/{note}").json()["state"] == "awaiting_approval"
    every = flaky(alice, taskName="every").json()["taskId"]  # no columns chosen: all
    assert alice.get(f"/api/v1/exports/{every}").json()["state"] == "awaiting_approval"
    faulty.reset(rows=40, estimate=1001)
    big = flaky(alice, columns=["id"], taskName="big").json()["taskId"]
    assert alice.get(f"/api/v1/exports/{big}").json()["state"] == "awaiting_approval"
    faulty.reset(rows=40, estimate=None)  # no estimate: a row rule asks for approval
    unknown = flaky(alice, columns=["amount"], taskName="unknown").json()["taskId"]
    assert alice.get(f"/api/v1/exports/{unknown}").json()["state"] == "awaiting_approval"
    bob = stack.client("bob", perms=[APPROVE])
    reasons = {i["taskName"]: i["reasons"] for i in bob.get("/api/v1/approvals").json()["items"]}
    assert reasons == {
        "note": ["it writes the column(s) note"],
        "every": ["it writes the column(s) note"],
        "big": ["about 1,001 rows, more than 1,000"],
        "unknown": ["the row count is unknown (approval above 1,000)"],
    }
    # The owner may cancel a request still waiting.
    cancelled = alice.post(f"/api/v1/exports/{every}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["state"] == "cancelled"
    assert len(bob.get("/api/v1/approvals").json()["items"]) == 3
    with stack.runtime.engine.connect() as conn:
        request = store.read_approval(conn, _id(conn, every))
    assert request is not None and request.outcome == "cancelled"


def test_an_expired_request_ends_rejected(make_stack, faulty, tmp_path):
    stack = approval_stack(make_stack, faulty, tmp_path, approvals={"expire_hours": 1 / 3600})
    faulty.reset(rows=2500, estimate=2500)
    alice = stack.client("alice", perms=[CREATE])
    task_no = flaky(alice).json()["taskId"]
    engine = stack.runtime.engine
    reconciler = Reconciler(engine, stack.runtime.storage, ReconcilerSettings(), topic="t")
    deadline = time.monotonic() + 30
    while alice.get(f"/api/v1/exports/{task_no}").json()["state"] == "awaiting_approval":
        assert time.monotonic() < deadline, "the request did not expire"
        reconciler.run_once()
        time.sleep(0.2)
    detail = alice.get(f"/api/v1/exports/{task_no}").json()
    assert detail["state"] == "rejected" and detail["error"]["code"] == "APPROVAL_EXPIRED"
    assert ("approval_decision", "expired", "system:reconciler") in audit_of(stack, task_no)
    bob = stack.client("bob", perms=[APPROVE])
    late = bob.post(f"/api/v1/approvals/{task_no}/approve", json={})
    assert late.status_code == 409 and late.json()["code"] == "NOT_AWAITING_APPROVAL"
    assert outbox_count(stack, task_no) == 0


def test_a_schedule_run_waits_for_approval_like_a_create(make_stack, faulty, tmp_path):
    stack = approval_stack(make_stack, faulty, tmp_path, scheduler={"enabled": False})
    faulty.reset(rows=20, estimate=20)
    alice = stack.client("alice", perms=[CREATE])
    schedule = {
        "name": "weekly ids",
        "export": {"exportType": "FLAKY", "format": "csv", "columns": ["id"]},
        "cron": "0 8 * * MON",
        "timezone": "UTC",
    }
    made = alice.post("/api/v1/schedules", json=schedule)
    assert made.status_code == 201, made.text
    run = alice.post(f"/api/v1/schedules/{made.json()['scheduleId']}/run").json()
    assert run["outcome"] == "created", run
    detail = alice.get(f"/api/v1/exports/{run['taskId']}").json()
    # A fire asks the provider nothing: with no estimate, the rows_over rule asks.
    assert detail["state"] == "awaiting_approval", detail
    assert outbox_count(stack, run["taskId"]) == 0
    bob = stack.client("bob", perms=[APPROVE])
    [item] = bob.get("/api/v1/approvals").json()["items"]
    assert item["reasons"] == ["the row count is unknown (approval above 1,000)"]
    assert bob.post(f"/api/v1/approvals/{run['taskId']}/approve", json={}).status_code == 200
    assert wait_state(alice, run["taskId"], timeout=60)["state"] == "succeeded"


def test_a_rejected_request_gives_its_daily_quota_slot_back(make_stack, faulty, tmp_path):
    """Quotas count requests awaiting approval (they may run) but not rejected ones."""
    stack = approval_stack(
        make_stack,
        faulty,
        tmp_path,
        quotas={"user_tasks_per_day": 2},
        limits={"duplicate_window_seconds": 0},
    )
    faulty.reset(rows=50, estimate=50)
    alice = stack.client("alice", perms=[CREATE])
    first = flaky(alice, taskName="first").json()["taskId"]  # every column: awaits
    assert alice.get(f"/api/v1/exports/{first}").json()["state"] == "awaiting_approval"
    assert alice.get("/api/v1/me/quota").json()["tasks"]["remaining"] == 1
    second = flaky(alice, taskName="second")
    assert second.status_code == 202, second.text
    refused = flaky(alice, taskName="third")
    assert (refused.status_code, refused.json()["code"]) == (429, "QUOTA_EXCEEDED")
    bob = stack.client("bob", perms=[APPROVE])
    rejected = bob.post(f"/api/v1/approvals/{first}/reject", json={"reason": "no PII today"})
    assert rejected.status_code == 200, rejected.text
    assert alice.get("/api/v1/me/quota").json()["tasks"]["remaining"] == 1
    again = flaky(alice, taskName="third")
    assert again.status_code == 202, again.text
