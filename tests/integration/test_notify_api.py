"""The notification APIs through a running stack (SQLite and MariaDB): webhook endpoints
(create with the secret once, allow-list 422s, permission 403, other tenant 404,
deliveries, test event, redelivery), a real export delivered to a real receiver, the
in-page list with its unread count, and ``notify`` on a create."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.helpers import ORDERS_PERMISSION, create, wait_state
from tests.support.webhook_receiver import Receiver

MANAGE = "platform:webhooks:manage"
EVENTS = ["export.succeeded", "export.failed"]


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def stack(make_stack: Any) -> Any:
    return make_stack(
        notify={
            "loop_seconds": 0.05,
            "backoff_seconds": [0.1],
            "webhook_allowed_hosts": ["127.0.0.1", "hooks.example.com"],
        }
    )


def admin(stack: Any, user: str = "ada", tenant: str = "t1") -> Any:
    return stack.client(user, tenant, perms=[ORDERS_PERMISSION, MANAGE])


def wait_for(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("https://evil.example.net/hook", "WEBHOOK_URL_NOT_ALLOWED"),
        ("http://10.0.0.5/hook", "WEBHOOK_URL_NOT_ALLOWED"),
        ("http://hooks.example.com/hook", "WEBHOOK_HTTPS_REQUIRED"),
        ("https://user:pw@hooks.example.com/hook", "INVALID_WEBHOOK_URL"),
        ("ftp://hooks.example.com/hook", "INVALID_WEBHOOK_URL"),
        ("hooks.example.com/hook", "INVALID_WEBHOOK_URL"),
    ],
)
def test_webhook_url_outside_the_rules_is_422(stack, url, code):
    answer = admin(stack).post("/api/v1/webhook-endpoints", json={"url": url, "events": EVENTS})
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["code"] == code and body["field"] == "url" and len(body["message"]) > 20


def test_endpoint_crud_permission_and_tenant(stack, receiver):
    client = admin(stack)
    made = client.post(
        "/api/v1/webhook-endpoints",
        json={"url": receiver.url, "events": ["export.failed", "export.succeeded"]},
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["secret"].startswith("whsec_") and body["events"] == EVENTS
    hook_id = body["id"]
    listed = client.get("/api/v1/webhook-endpoints").json()["items"]
    assert [e["id"] for e in listed] == [hook_id] and "secret" not in listed[0]
    assert "secret" not in client.get(f"/api/v1/webhook-endpoints/{hook_id}").json()
    bad = client.post("/api/v1/webhook-endpoints", json={"url": receiver.url, "events": ["x"]})
    assert (bad.status_code, bad.json()["code"]) == (422, "INVALID_EVENTS")
    # Without the permission: 403; another tenant's admin: 404.
    plain = stack.client("bob", "t1")
    denied = plain.get("/api/v1/webhook-endpoints")
    assert (denied.status_code, denied.json()["code"]) == (403, "PERMISSION_DENIED")
    other = admin(stack, "eve", "t2")
    for answer in (
        other.get(f"/api/v1/webhook-endpoints/{hook_id}"),
        other.patch(f"/api/v1/webhook-endpoints/{hook_id}", json={"enabled": False}),
        other.post(f"/api/v1/webhook-endpoints/{hook_id}/rotate-secret"),
        other.delete(f"/api/v1/webhook-endpoints/{hook_id}"),
    ):
        assert (answer.status_code, answer.json()["code"]) == (404, "WEBHOOK_NOT_FOUND")
    assert other.get("/api/v1/webhook-endpoints").json()["items"] == []
    patched = client.patch(
        f"/api/v1/webhook-endpoints/{hook_id}", json={"description": "ops", "enabled": False}
    )
    assert (patched.json()["description"], patched.json()["enabled"]) == ("ops", False)
    # A disabled endpoint gets no test event; "yes" is not a boolean; null is no value.
    test = client.post(f"/api/v1/webhook-endpoints/{hook_id}/test")
    assert (test.status_code, test.json()["code"]) == (409, "WEBHOOK_DISABLED")
    again = client.post(f"/api/v1/webhook-endpoints/{hook_id}/deliveries/1/redeliver")
    assert (again.status_code, again.json()["code"]) == (409, "WEBHOOK_DISABLED")
    for change, field in (({"enabled": "yes"}, "enabled"), ({"url": None}, "url")):
        refused = client.patch(f"/api/v1/webhook-endpoints/{hook_id}", json=change)
        assert refused.status_code == 422 and refused.json()["field"] == field, refused.text
    # The same URL twice in a tenant is refused (each would get every event); another
    # tenant may register it.
    twice = client.post("/api/v1/webhook-endpoints", json={"url": receiver.url, "events": EVENTS})
    assert (twice.status_code, twice.json()["code"]) == (409, "WEBHOOK_ALREADY_REGISTERED")
    assert hook_id in twice.json()["message"]
    # The same receiver written another way (case, a fragment) too.
    for same in (receiver.url + "#frag", receiver.url.replace("http://", "HTTP://")):
        again = client.post("/api/v1/webhook-endpoints", json={"url": same, "events": EVENTS})
        assert (again.status_code, again.json()["code"]) == (409, "WEBHOOK_ALREADY_REGISTERED"), (
            same
        )
    assert (
        other.post(
            "/api/v1/webhook-endpoints", json={"url": receiver.url, "events": EVENTS}
        ).status_code
        == 201
    )
    second = client.post(
        "/api/v1/webhook-endpoints", json={"url": receiver.url + "/b", "events": EVENTS}
    ).json()["id"]
    moved = client.patch(f"/api/v1/webhook-endpoints/{second}", json={"url": receiver.url})
    assert (moved.status_code, moved.json()["code"]) == (409, "WEBHOOK_ALREADY_REGISTERED")
    assert client.delete(f"/api/v1/webhook-endpoints/{second}").status_code == 204
    rotated = client.post(f"/api/v1/webhook-endpoints/{hook_id}/rotate-secret").json()
    assert rotated["secret"] != body["secret"] and rotated["previousSecretValidUntil"]
    assert client.delete(f"/api/v1/webhook-endpoints/{hook_id}").status_code == 204
    assert client.get(f"/api/v1/webhook-endpoints/{hook_id}").status_code == 404


def test_an_export_is_delivered_signed_and_listed_in_the_page(stack, receiver):
    client = admin(stack)
    made = client.post(
        "/api/v1/webhook-endpoints", json={"url": receiver.url, "events": EVENTS}
    ).json()
    receiver.secrets = [made["secret"]]
    owner = stack.client("alice", "t1")
    task_id = create(owner, parameters={"from": "1995-01-01", "to": "1995-01-31"}).json()["taskId"]
    wait_state(owner, task_id, {"succeeded"})
    wait_for(lambda: receiver.deliveries)
    (delivery,) = receiver.deliveries
    event = delivery.event
    assert delivery.verified == {made["secret"]: True}
    assert delivery.headers["export-center-event-id"] == event["id"]
    assert event["type"] == "export.succeeded"
    assert {k: event["data"][k] for k in ("taskId", "state", "exportType")} == {
        "taskId": task_id,
        "state": "succeeded",
        "exportType": "ORDERS",
    }
    # The in-page list of the owner.
    page = owner.get("/api/v1/notifications").json()
    assert page["unreadCount"] == 1
    (item,) = page["items"]
    assert (item["type"], item["taskId"], item["state"], item["read"]) == (
        "export.succeeded",
        task_id,
        "succeeded",
        False,
    )
    assert item["taskName"] == "orders" and "orders" in item["message"]
    assert "「orders」已完成" in item["messageZh"]
    assert stack.client("bob", "t1").get("/api/v1/notifications").json()["unreadCount"] == 0
    not_yours = stack.client("bob", "t1").post(f"/api/v1/notifications/{item['id']}/read")
    assert (not_yours.status_code, not_yours.json()["code"]) == (404, "NOTIFICATION_NOT_FOUND")
    assert owner.post(f"/api/v1/notifications/{item['id']}/read").json() == {"unreadCount": 0}
    assert owner.get("/api/v1/notifications").json()["items"][0]["read"] is True
    # Delivery history, a test event and a redelivery (same event id).
    hook = f"/api/v1/webhook-endpoints/{made['id']}"
    (history,) = client.get(f"{hook}/deliveries").json()["items"]
    assert (history["status"], history["eventId"], history["lastStatusCode"]) == (
        "delivered",
        event["id"],
        200,
    )
    assert [a["statusCode"] for a in history["attempts"]] == [200]
    tested = client.post(f"{hook}/test")
    assert tested.status_code == 202
    wait_for(lambda: len(receiver.deliveries) == 2)
    assert receiver.deliveries[1].event["type"] == "webhook.test"
    again = client.post(f"{hook}/deliveries/{history['id']}/redeliver")
    assert (again.status_code, again.json()["status"]) == (202, "pending")
    wait_for(lambda: len(receiver.deliveries) == 3)
    assert receiver.deliveries[2].event["id"] == event["id"]
    missing = client.post(f"{hook}/deliveries/999999/redeliver")
    assert (missing.status_code, missing.json()["code"]) == (404, "DELIVERY_NOT_FOUND")


def test_read_all_and_pages(stack):
    owner = stack.client("alice", "t1")
    ids = []
    for day in ("01", "02", "03"):
        ids.append(create(owner, parameters={"from": f"1995-01-{day}", "to": "1995-01-31"}))
    for answer in ids:
        wait_state(owner, answer.json()["taskId"], {"succeeded"})
    first = owner.get("/api/v1/notifications", params={"limit": 2}).json()
    assert first["unreadCount"] == 3 and len(first["items"]) == 2 and first["nextBefore"]
    rest = owner.get(
        "/api/v1/notifications", params={"limit": 2, "before": first["nextBefore"]}
    ).json()
    assert len(rest["items"]) == 1 and rest["nextBefore"] is None
    items = first["items"] + rest["items"]
    # Newest first (exports end in any order: two run at once).
    assert [int(i["id"]) for i in items] == sorted((int(i["id"]) for i in items), reverse=True)
    assert sorted(i["taskId"] for i in items) == sorted(a.json()["taskId"] for a in ids)
    assert owner.post("/api/v1/notifications/read-all").json()["marked"] == 3
    assert owner.get("/api/v1/notifications").json()["unreadCount"] == 0


def test_notify_on_a_create_is_checked_stored_and_shown(stack):
    owner = stack.client("alice", "t1")
    bad = create(owner, notify=[{"channel": "sms"}])
    assert (bad.status_code, bad.json()["code"], bad.json()["field"]) == (
        422,
        "INVALID_NOTIFY",
        "notify[0].channel",
    )
    mail = create(owner, notify=[{"channel": "email", "to": "a@example.com"}])
    assert (mail.status_code, mail.json()["code"]) == (422, "EMAIL_NOT_CONFIGURED")
    made = create(
        owner,
        parameters={"from": "1995-02-01", "to": "1995-02-28"},
        notify=[{"channel": "page", "events": ["export.failed"]}],
    )
    assert made.status_code in (200, 201, 202), made.text
    task_id = made.json()["taskId"]
    detail = wait_state(owner, task_id, {"succeeded"})
    assert detail["notify"] == [{"channel": "page", "events": ["export.failed"]}]
    # It asked for failures only: the success is not in the page.
    time.sleep(0.3)
    assert owner.get("/api/v1/notifications").json()["items"] == []
