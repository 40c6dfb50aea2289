"""The admin API over real HTTP: what operators read (tasks, commands, dead letters, the
overview) and do (retry, cancel, with a reason kept in the audit trail), and who may."""

from __future__ import annotations

import time

from sqlalchemy import update

from export_center import repository
from export_center.db import db_now_plus
from export_center.models import ExportOutbox
from export_center.publisher import message_for_row
from export_center.transport import OutgoingMessage
from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import create, wait_state

ADMIN = ["platform:export:admin", "export:orders:create"]
OPERATOR = [*ADMIN, "platform:operator"]
O = ExportOutbox.__table__  # noqa: E741

ROUTES = [
    ("GET", "/api/v1/admin/overview", None),
    ("GET", "/api/v1/admin/tasks", None),
    ("GET", "/api/v1/admin/tasks/EXP-none", None),
    ("POST", "/api/v1/admin/tasks/EXP-none/retry", {"reason": "because"}),
    ("POST", "/api/v1/admin/tasks/EXP-none/cancel", {"reason": "because"}),
    ("GET", "/api/v1/admin/outbox", None),
    ("GET", "/api/v1/admin/dlq", None),
    ("GET", "/api/v1/admin/dlq/none", None),
    ("POST", "/api/v1/admin/registry/reload", None),
]


def test_every_admin_route_needs_the_admin_permission(stack):
    user, anonymous = stack.client("bob"), stack.client(None)
    for method, path, body in ROUTES:
        denied = user.request(method, path, json=body)
        assert denied.status_code == 403, (path, denied.text)
        assert denied.json()["code"] == "PERMISSION_DENIED"
        assert anonymous.request(method, path, json=body).status_code == 401, path


def test_an_admin_sees_their_tenant_and_a_platform_operator_every_tenant(stack):
    ours = create(stack.client("alice", "t1")).json()["taskId"]
    theirs = create(stack.client("bob", "t2")).json()["taskId"]
    admin = stack.client("root", "t1", perms=ADMIN)
    listed = admin.get("/api/v1/admin/tasks").json()
    assert [t["taskId"] for t in listed] == [ours]
    assert listed[0]["tenant"] == "t1" and listed[0]["owner"] == "alice"
    assert len(listed[0]["traceId"]) == 32 and listed[0]["dispatchVersion"] == 1
    other = admin.get("/api/v1/admin/tasks", params={"tenant": "t2"})
    assert other.status_code == 403 and other.json()["code"] == "PERMISSION_DENIED"
    missing = admin.get(f"/api/v1/admin/tasks/{theirs}")
    assert missing.status_code == 404 and missing.json()["code"] == "TASK_NOT_FOUND"
    operator = stack.client("ops", "t1", perms=OPERATOR)
    assert {t["taskId"] for t in operator.get("/api/v1/admin/tasks").json()} == {ours, theirs}
    narrowed = operator.get("/api/v1/admin/tasks", params={"tenant": "t2"}).json()
    assert [t["taskId"] for t in narrowed] == [theirs]
    assert operator.get(f"/api/v1/admin/tasks/{theirs}").json()["task"]["tenant"] == "t2"


def test_filters_are_checked(stack):
    admin = stack.client("root", perms=ADMIN)
    bad = admin.get("/api/v1/admin/tasks", params={"state": "queued,broken"})
    assert bad.status_code == 422 and bad.json()["code"] == "INVALID_STATE"
    assert "broken" in bad.json()["message"]
    assert admin.get("/api/v1/admin/tasks", params={"limit": 0}).status_code == 422
    unknown = admin.get("/api/v1/admin/tasks", params={"colour": "red"})
    assert unknown.status_code == 400 and unknown.json()["code"] == "UNKNOWN_PARAMETER"
    assert admin.get("/api/v1/admin/tasks", params={"state": "succeeded"}).json() == []


def test_retry_a_failed_task_with_a_reason_kept_in_the_audit_trail(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=1)
    faulty.reset(rows=2500, fail_versions={1}, fail_at_batch=1)
    owner = stack.client("alice", perms=FLAKY)
    task_id = flaky(owner).json()["taskId"]
    assert wait_state(owner, task_id)["state"] == "failed"
    admin = stack.client("root", perms=[*ADMIN, "export:flaky:create"])
    failed = admin.get("/api/v1/admin/tasks", params={"state": "failed"}).json()
    assert [(t["taskId"], t["errorCode"]) for t in failed] == [(task_id, "PROVIDER_UNAVAILABLE")]
    no_reason = admin.post(f"/api/v1/admin/tasks/{task_id}/retry", json={})
    assert no_reason.status_code == 422
    retried = admin.post(
        f"/api/v1/admin/tasks/{task_id}/retry", json={"reason": "provider redeployed"}
    )
    assert retried.status_code == 200, retried.text
    assert retried.json()["state"] in ("queued", "running") and retried.json()["errorCode"] is None
    assert wait_state(owner, task_id)["state"] == "succeeded"
    report = admin.get(f"/api/v1/admin/tasks/{task_id}").json()
    assert [(c["dispatchVersion"], c["status"]) for c in report["commands"]] == [
        (1, "sent"),
        (2, "sent"),
    ]
    retry = [a for a in report["audit"] if a["action"] == "manual_retry"]
    assert len(retry) == 1
    assert retry[0]["actor"] == "user:t1/root" and retry[0]["reason"] == "provider redeployed"
    assert retry[0]["dispatchVersion"] == 2 and retry[0]["outcome"] == "requeued"
    assert "503" in retry[0]["details"]["previousFailure"]
    again = admin.post(f"/api/v1/admin/tasks/{task_id}/retry", json={"reason": "once more"})
    assert again.status_code == 409 and again.json()["code"] == "NOT_RETRYABLE"
    assert again.json()["message"] == (
        "only failed exports can be retried; this one has already succeeded"
    )


def test_cancel_a_queued_task_with_a_reason(make_stack):
    stack = make_stack(consumer={"enabled": False})
    task_id = create(stack.client("alice")).json()["taskId"]
    admin = stack.client("root", perms=ADMIN)
    cancelled = admin.post(
        f"/api/v1/admin/tasks/{task_id}/cancel", json={"reason": "asked for the wrong month"}
    )
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    audit = admin.get(f"/api/v1/admin/tasks/{task_id}").json()["audit"]
    assert [(a["action"], a["actor"], a["reason"]) for a in audit] == [
        ("manual_cancel", "user:t1/root", "asked for the wrong month")
    ]
    again = admin.post(f"/api/v1/admin/tasks/{task_id}/cancel", json={"reason": "again"})
    assert again.status_code == 409 and again.json()["code"] == "NOT_CANCELLABLE"
    assert again.json()["message"] == "the export has already been cancelled"
    extra = admin.post(f"/api/v1/admin/tasks/{task_id}/cancel", json={"reason": "x", "y": 1})
    assert extra.status_code == 422


def test_outbox_lists_unsent_commands_oldest_first(make_stack):
    stack = make_stack(publisher={"enabled": False}, consumer={"enabled": False})
    first = create(stack.client("alice")).json()["taskId"]
    second = create(stack.client("carol")).json()["taskId"]
    admin = stack.client("root", perms=ADMIN)
    rows = admin.get("/api/v1/admin/outbox").json()
    assert [(r["taskId"], r["status"], r["sends"]) for r in rows] == [
        (first, "pending", 0),
        (second, "pending", 0),
    ]
    assert all(r["ageSeconds"] >= 0 and len(r["eventId"]) == 36 for r in rows)
    assert admin.get("/api/v1/admin/outbox", params={"stuckSeconds": 3600}).json() == []
    with stack.runtime.engine.begin() as conn:  # the first one was due ten minutes ago
        conn.execute(
            update(O)
            .where(O.c.event_id == rows[0]["eventId"])
            .values(created_at=db_now_plus(-600), next_retry_at=db_now_plus(-600))
        )
    stuck = admin.get("/api/v1/admin/outbox", params={"stuckSeconds": 300}).json()
    assert [r["taskId"] for r in stuck] == [first] and stuck[0]["ageSeconds"] >= 599
    overview = admin.get("/api/v1/admin/overview").json()
    assert overview["outboxPending"] == 2 and overview["outboxOldestAgeSeconds"] >= 599


def test_a_dead_letter_is_listed_explained_and_counted(make_stack):
    stack = make_stack(publisher={"enabled": False})
    runtime = stack.runtime
    alice = stack.client("alice")
    task_id = create(alice).json()["taskId"]
    with runtime.engine.begin() as conn:  # as if the publisher had sent the real command
        task = repository.read_task_by_no(conn, task_id)
        row = repository.outbox_rows(conn, task.id)[0]
        conn.execute(
            update(O).where(O.c.id == row.id).values(status="SENT", sent_at=db_now_plus(0))
        )
    good = message_for_row(row)
    runtime.transport.send(
        OutgoingMessage(good.topic, good.tag, good.key, b"\x00 not json", good.properties)
    )
    assert wait_state(alice, task_id, timeout=60)["state"] == "failed"
    admin = stack.client("root", perms=ADMIN)
    deadline = time.monotonic() + 30
    letters: list = []
    while not letters and time.monotonic() < deadline:
        letters = admin.get("/api/v1/admin/dlq").json()
        time.sleep(0.1)
    assert len(letters) == 1
    letter = letters[0]
    assert letter["command"]["taskId"] == task_id and letter["taskState"] == "failed"
    assert letter["command"]["status"] == "quarantined"
    assert letter["reason"] and letter["quarantinedAt"]
    report = admin.get(f"/api/v1/admin/dlq/{row.event_id}").json()
    assert report["command"]["eventId"] == row.event_id
    assert [(a["actor"], a["action"]) for a in report["audit"]] == [
        ("system:dlq-handler", "dead_letter")
    ]
    assert report["audit"][0]["details"]["messageId"]
    overview = admin.get("/api/v1/admin/overview").json()
    assert [q["command"]["eventId"] for q in overview["quarantined"]] == [row.event_id]
    assert overview["failuresByType"] == {"ORDERS": 1}
    assert [t["taskId"] for t in overview["failed"]] == [task_id]
    unknown = admin.get("/api/v1/admin/dlq/no-such-event")
    assert unknown.status_code == 404 and unknown.json()["code"] == "EVENT_NOT_FOUND"
    other_tenant = stack.client("root2", "t2", perms=ADMIN)
    assert other_tenant.get("/api/v1/admin/dlq").json() == []
    assert other_tenant.get(f"/api/v1/admin/dlq/{row.event_id}").status_code == 404


def test_every_admin_answer_names_the_export_and_tasks_filter_by_name(make_stack):
    stack = make_stack(publisher={"enabled": False}, consumer={"enabled": False})
    names = ["九月订单 华北区", "September orders", "100%_done report"]
    ids = [
        create(
            stack.client("alice"), taskName=name, parameters={"from": f"1995-0{i + 1}-01"}
        ).json()["taskId"]
        for i, name in enumerate(names)
    ]
    admin = stack.client("root", perms=ADMIN)
    listed = admin.get("/api/v1/admin/tasks").json()
    assert {t["taskId"]: t["taskName"] for t in listed} == dict(zip(ids, names, strict=True))

    def named(text: str) -> list[str]:
        answer = admin.get("/api/v1/admin/tasks", params={"name": text})
        assert answer.status_code == 200, answer.text
        return sorted(t["taskId"] for t in answer.json())

    assert named("九月") == [ids[0]]
    assert named("SEPTEMBER") == [ids[1]]  # letters without case
    assert named("orders") == [ids[1]]
    assert named("%") == [ids[2]] and named("_") == [ids[2]]  # plain characters
    assert named("0%_d") == [ids[2]] and named("nothing like it") == []
    too_long = admin.get("/api/v1/admin/tasks", params={"name": "x" * 201})
    assert too_long.status_code == 422 and too_long.json()["code"] == "TOO_LONG"

    report = admin.get(f"/api/v1/admin/tasks/{ids[0]}").json()
    assert report["task"]["taskName"] == names[0]
    assert [c["taskName"] for c in report["commands"]] == [names[0]]
    outbox = admin.get("/api/v1/admin/outbox").json()
    assert {r["taskId"]: r["taskName"] for r in outbox} == dict(zip(ids, names, strict=True))
    cancelled = admin.post(f"/api/v1/admin/tasks/{ids[1]}/cancel", json={"reason": "wrong month"})
    assert cancelled.json()["taskName"] == names[1]
    overview = admin.get("/api/v1/admin/overview").json()
    (entry,) = overview["audit"]
    assert (entry["taskId"], entry["taskName"]) == (ids[1], names[1])
