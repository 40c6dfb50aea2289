"""The notification outbox on a real database (SQLite and MariaDB): each terminal
transition writes its rows once, and the notifier delivers signed webhooks to a real
receiver on loopback (retries, dead rows, rotation, a notifier killed between send and
mark)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, update

from export_center import metrics, repository
from export_center.db import db_now, db_now_plus, make_engine
from export_center.notify.notifier import Notifier
from export_center.notify.outbox import schedule_paused
from export_center.notify.webhooks import WebhookChannel
from export_center.repository import notification_reads as reads
from export_center.repository import notifications as notes
from export_center.repository import webhooks as hooks
from export_center.repository.tables import AUDIT, NOTIFICATIONS, PRINCIPALS, TASKS
from export_center.runtime import upgrade_database
from export_center.states import TaskStatus
from tests.support.channel_conformance import check_channel
from tests.support.helpers import stack_settings
from tests.support.webhook_receiver import Receiver

TOPIC = "test-export-center-command-v1"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def engine(db_url):
    eng = make_engine(db_url)
    upgrade_database(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


def settings_for(**notify: Any):
    return stack_settings(
        notify={"webhook_allowed_hosts": ["127.0.0.1"], "backoff_seconds": [0.0], **notify}
    )


def notifier_for(engine, **notify: Any) -> Notifier:
    settings = settings_for(**notify)
    return Notifier(
        engine,
        settings,
        {"webhook": WebhookChannel(engine, settings.notify)},
        owner="notifier-a",
        base_url=lambda: "https://exports.example.com",
    )


def one_pass(notifier: Notifier) -> int:
    """One notifier pass and the deliveries it started."""
    return notifier.run_once() + notifier.drain(timeout=60)


def new_task(engine, *, user: str = "u1", max_attempts: int = 1, notify: str | None = None):
    new = repository.NewTask(
        export_type="ORDERS",
        format="CSV",
        task_name="Weekly orders",
        parameters={"n": user},
        tenant_id="t1",
        app_code="PLATFORM",
        requested_by=user,
        max_attempts=max_attempts,
        notify_json=notify,
    )
    with engine.begin() as conn:
        return repository.create_task(
            conn, new, topic=TOPIC, tag="EXPORT_TASK", limits=repository.CreateLimits(0, 100, 100)
        ).task


def claimed(engine, task) -> None:
    with engine.begin() as conn:
        assert repository.claim_task(
            conn, task.id, task.dispatch_version, "w1", lease_seconds=30, max_duration_seconds=600
        )


STORED = repository.StoredFile(
    object_key="exports/t1/x/0.csv",
    file_name="orders.csv",
    content_type="text/csv",
    size_bytes=3,
    row_count=42,
    warning=None,
)


def add_endpoint(engine, url: str, events=("export.succeeded", "export.failed"), tenant="t1"):
    with engine.begin() as conn:
        return hooks.create_endpoint(
            conn, tenant_id=tenant, url=url, events=list(events), description=None, created_by="a"
        )


def add_principal(engine, user: str = "u1", **values: Any) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(PRINCIPALS).values(
                tenant_id="t1",
                user_id=user,
                app_code="PLATFORM",
                permissions_json="[]",
                seen_at=db_now(),
                updated_at=db_now(),
                **values,
            )
        )


def rows_of(engine, task_id: int) -> list[notes.Notification]:
    with engine.connect() as conn:
        result = conn.execute(
            select(NOTIFICATIONS)
            .where(NOTIFICATIONS.c.task_id == task_id)
            .order_by(NOTIFICATIONS.c.id)
        ).mappings()
        return [notes.Notification.from_row(r) for r in result]


def kinds(rows) -> list[tuple[str, str, str]]:
    return [(r.event_type, r.channel, r.status) for r in rows]


# ------------------------------------------------------------------ enqueue


def test_success_writes_page_webhook_and_route_rows_once(engine, receiver):
    endpoint = add_endpoint(engine, receiver.url)
    add_endpoint(engine, receiver.url, events=("export.failed",))  # not subscribed
    add_endpoint(engine, receiver.url, tenant="t2")  # another tenant's
    t = new_task(engine)
    claimed(engine, t)
    with engine.begin() as conn:
        assert repository.commit_success(conn, t.id, 1, "w1", STORED, retention_seconds=3600)
    with engine.begin() as conn:  # a second commit of the same attempt touches nothing
        assert not repository.commit_success(conn, t.id, 1, "w1", STORED, retention_seconds=3600)
    rows = rows_of(engine, t.id)
    assert kinds(rows) == [
        ("export.succeeded", "page", "SENT"),
        ("export.succeeded", "webhook", "PENDING"),
        ("export.succeeded", "route", "PENDING"),
    ]
    assert len({r.event_id for r in rows}) == 1
    assert rows[1].target == endpoint.public_id
    data = rows[0].data
    assert data == {
        "taskId": t.task_no,
        "state": "succeeded",
        "exportType": "ORDERS",
        "taskName": "Weekly orders",
        "timeZone": "UTC",
        "rows": 42,
        "fileName": "orders.csv",
        "expiresAt": data["expiresAt"],
    }
    assert data["expiresAt"].endswith("Z")


def test_failure_after_last_attempt_notifies_but_a_retry_does_not(engine):
    t = new_task(engine, max_attempts=2)
    args = dict(
        code="PROVIDER_DOWN", message="fetch: provider 503", backoff_seconds=[0.0], jitter=0.0
    )
    claimed(engine, t)
    with engine.begin() as conn:
        end = repository.record_failure(
            conn, t.id, 1, "w1", retry=True, topic=TOPIC, tag="EXPORT_TASK", **args
        )
    assert end == repository.AttemptEnd.RETRY
    assert rows_of(engine, t.id) == []
    with engine.begin() as conn:
        assert repository.claim_task(
            conn, t.id, 2, "w1", lease_seconds=30, max_duration_seconds=600
        )
        end = repository.record_failure(
            conn, t.id, 2, "w1", retry=True, topic=TOPIC, tag="EXPORT_TASK", **args
        )
    assert end == repository.AttemptEnd.FAILED
    rows = rows_of(engine, t.id)
    assert kinds(rows) == [("export.failed", "page", "SENT"), ("export.failed", "route", "PENDING")]
    assert rows[0].data["failureCode"] == "PROVIDER_DOWN"
    assert rows[0].data["failureMessage"] == "fetch: provider 503"


def test_cancel_of_pending_and_of_running_and_lease_recovery_failure(engine):
    page_all = json.dumps([{"channel": "page", "events": ["export.cancelled", "export.failed"]}])
    pending = new_task(engine, notify=page_all)
    with engine.begin() as conn:
        assert repository.request_cancel(conn, pending.id) == TaskStatus.CANCELLED
        assert repository.request_cancel(conn, pending.id) is None
    assert kinds(rows_of(engine, pending.id)) == [
        ("export.cancelled", "page", "SENT"),
        ("export.cancelled", "route", "PENDING"),
    ]
    running = new_task(engine, user="u2", notify=page_all)
    claimed(engine, running)
    with engine.begin() as conn:
        assert repository.request_cancel(conn, running.id) == TaskStatus.RUNNING
    assert rows_of(engine, running.id) == []
    with engine.begin() as conn:
        assert repository.finish_cancelled(conn, running.id, 1, "w1")
    assert [k[:2] for k in kinds(rows_of(engine, running.id))] == [
        ("export.cancelled", "page"),
        ("export.cancelled", "route"),
    ]
    lost = new_task(engine, user="u3", notify=page_all)
    claimed(engine, lost)
    with engine.begin() as conn:
        conn.execute(update(TASKS).where(TASKS.c.id == lost.id).values(lease_until=db_now_plus(-5)))
        current = repository.read_task(conn, lost.id)
        outcome = repository.recover_expired_lease(
            conn, current, topic=TOPIC, tag="EXPORT_TASK", max_recoveries=0
        )
    assert outcome == repository.Recovery.FAILED
    rows = rows_of(engine, lost.id)
    assert [k[:2] for k in kinds(rows)] == [("export.failed", "page"), ("export.failed", "route")]
    assert rows[0].data["failureCode"] == "WORKER_LOST"


def test_a_quarantined_command_fails_its_task_and_notifies(engine):
    t = new_task(engine)
    with engine.connect() as conn:
        (command,) = repository.outbox_rows(conn, t.id)
    with engine.begin() as conn:
        outcome = repository.quarantine(
            conn, event_id=command.event_id, task_no=t.task_no, version=1, reason="bad body"
        )
    assert outcome == repository.QuarantineOutcome.QUARANTINED
    rows = rows_of(engine, t.id)
    assert [k[:2] for k in kinds(rows)] == [("export.failed", "page"), ("export.failed", "route")]
    assert rows[0].data["failureCode"] == "COMMAND_CORRUPTED"


def test_email_target_without_address_goes_to_owner_or_is_audited(engine):
    mail = json.dumps([{"channel": "email", "events": ["export.succeeded"]}])
    add_principal(engine, "u1", email="u1@example.com")
    for user in ("u1", "u2"):  # u2 has no known address
        t = new_task(engine, user=user, notify=mail)
        claimed(engine, t)
        with engine.begin() as conn:
            assert repository.commit_success(conn, t.id, 1, "w1", STORED, retention_seconds=60)
        rows = rows_of(engine, t.id)
        if user == "u1":
            assert [(r.channel, r.target) for r in rows] == [
                ("email", "u1@example.com"),
                ("route", "operator"),
            ]
        else:
            assert [r.channel for r in rows] == ["route"]
            with engine.connect() as conn:
                audit = conn.execute(
                    select(AUDIT.c.action, AUDIT.c.outcome).where(AUDIT.c.task_id == t.id)
                ).all()
            assert [tuple(a) for a in audit] == [("notify_skipped", "no_address")]


def test_owner_defaults_apply_when_the_create_named_none(engine):
    defaults = json.dumps([{"channel": "page", "events": ["export.failed"]}])
    add_principal(engine, "u1", notify_defaults_json=defaults)
    t = new_task(engine)
    claimed(engine, t)
    with engine.begin() as conn:
        assert repository.commit_success(conn, t.id, 1, "w1", STORED, retention_seconds=60)
    # The user asked for failures only: no page row for a success.
    assert [r.channel for r in rows_of(engine, t.id)] == ["route"]


def test_expiring_is_marked_and_enqueued_once(engine):
    t = new_task(engine)
    claimed(engine, t)
    with engine.begin() as conn:
        assert repository.commit_success(conn, t.id, 1, "w1", STORED, retention_seconds=7200)
    with engine.begin() as conn:
        assert notes.mark_expiring(conn, 1.0, 10) == 0  # expires in 2 h, notice is 1 h
        assert notes.mark_expiring(conn, 3.0, 10) == 1
        assert notes.mark_expiring(conn, 3.0, 10) == 0
    expiring = [r for r in rows_of(engine, t.id) if r.event_type == "export.expiring"]
    assert [r.channel for r in expiring] == ["route"]  # page defaults do not include it
    with engine.connect() as conn:
        marked = conn.execute(select(TASKS.c.expiry_notified_at).where(TASKS.c.id == t.id))
        assert marked.scalar_one() is not None


def test_schedule_paused_is_enqueueable(engine):
    with engine.begin() as conn:
        event = schedule_paused(
            conn,
            schedule_id=7,
            tenant_id="t1",
            owner="u1",
            name="Weekly",
            reason="the owner lost the permission",
            notify_json=None,
        )
        rows = reads.notifications_of_event(conn, event)
    assert [(r.event_type, r.channel, r.status, r.schedule_id) for r in rows] == [
        ("schedule.paused", "page", "SENT", 7),
        ("schedule.paused", "route", "PENDING", 7),
    ]


# ------------------------------------------------------------------ delivery


def succeeded_task(engine):
    t = new_task(engine)
    claimed(engine, t)
    with engine.begin() as conn:
        assert repository.commit_success(conn, t.id, 1, "w1", STORED, retention_seconds=3600)
    return t


def webhook_row(engine, task_id: int) -> notes.Notification:
    (row,) = [r for r in rows_of(engine, task_id) if r.channel == "webhook"]
    return row


def test_500_three_times_then_200_is_delivered_on_the_fourth_try(engine, receiver):
    endpoint = add_endpoint(engine, receiver.url)
    receiver.secrets = [endpoint.secret]
    receiver.answers = [500, 500, 500]
    t = succeeded_task(engine)
    notifier = notifier_for(engine)
    for _ in range(4):
        one_pass(notifier)
    row = webhook_row(engine, t.id)
    assert (row.status, row.attempt_count, row.last_status_code) == ("SENT", 4, 200)
    assert len(receiver.deliveries) == 4
    assert {d.headers["export-center-event-id"] for d in receiver.deliveries} == {row.event_id}
    assert all(d.verified[endpoint.secret] for d in receiver.deliveries)
    event = receiver.deliveries[-1].event
    assert set(event) == {"id", "type", "createdAt", "data"}
    assert (event["id"], event["type"]) == (row.event_id, "export.succeeded")
    assert event["data"]["taskId"] == t.task_no and event["data"]["state"] == "succeeded"
    assert receiver.deliveries[-1].headers["content-type"] == "application/json"
    with engine.connect() as conn:
        attempts = reads.delivery_attempts(conn, row.id)
    assert [(a.attempt_no, a.status_code) for a in attempts] == [
        (1, 500),
        (2, 500),
        (3, 500),
        (4, 200),
    ]


def test_receiver_down_past_max_age_is_dead_counted_and_audited(engine, receiver):
    endpoint = add_endpoint(engine, receiver.url)
    receiver.stop()  # nobody listens on the port any more
    t = succeeded_task(engine)
    notifier = notifier_for(engine, max_age_hours=1.0)
    one_pass(notifier)
    row = webhook_row(engine, t.id)
    assert row.status == "PENDING" and row.attempt_count == 1 and row.last_status_code is None
    with engine.begin() as conn:  # 25 hours later, by the database clock
        conn.execute(
            update(NOTIFICATIONS)
            .where(NOTIFICATIONS.c.id == row.id)
            .values(created_at=db_now_plus(-25 * 3600))
        )
    with engine.connect() as conn:  # the gauges: one row waits, written 25 h ago
        pending, age = reads.notification_backlog(conn)
    assert pending == 1 and age >= 25 * 3600  # the route row was expanded (no routes)
    before = metrics.NOTIFICATION_DEAD.labels("webhook")._value.get()
    one_pass(notifier)
    row = webhook_row(engine, t.id)
    assert (row.status, row.attempt_count) == ("DEAD", 2)
    assert metrics.NOTIFICATION_DEAD.labels("webhook")._value.get() == before + 1
    with engine.connect() as conn:
        audit = conn.execute(
            select(AUDIT.c.action, AUDIT.c.event_id, AUDIT.c.details_json).where(
                AUDIT.c.action == "notification_dead"
            )
        ).all()
    assert [(a.action, a.event_id) for a in audit] == [("notification_dead", row.event_id)]
    assert json.loads(audit[0].details_json)["target"] == endpoint.public_id


def test_rotation_sends_two_signatures_new_first(engine, receiver):
    endpoint = add_endpoint(engine, receiver.url)
    with engine.begin() as conn:
        rotated = hooks.rotate_secret(conn, "t1", endpoint.public_id, 24.0)
    assert rotated is not None and rotated.secret != endpoint.secret
    receiver.secrets = [rotated.secret, endpoint.secret]
    t = succeeded_task(engine)
    one_pass(notifier_for(engine))
    (delivery,) = receiver.deliveries
    assert delivery.v1_count == 2
    assert delivery.verified == {rotated.secret: True, endpoint.secret: True}
    new_first = delivery.headers["export-center-signature"].split(",")[1]
    from export_center.notify.signing import sign

    stamp = int(delivery.headers["export-center-signature"].split(",")[0][2:])
    assert new_first == "v1=" + sign(rotated.secret, stamp, delivery.body)
    assert webhook_row(engine, t.id).status == "SENT"
    with engine.begin() as conn:  # the rotation window ends: one signature again
        conn.execute(
            update(hooks.W)
            .where(hooks.W.c.id == endpoint.id)
            .values(previous_secret_until=db_now_plus(-1))
        )
    succeeded_task(engine)
    one_pass(notifier_for(engine))
    assert receiver.deliveries[-1].v1_count == 1
    assert receiver.deliveries[-1].verified == {rotated.secret: True, endpoint.secret: False}


def test_operator_route_goes_to_the_robot_row(engine):
    t = new_task(engine)
    claimed(engine, t)
    with engine.begin() as conn:
        repository.record_failure(
            conn, t.id, 1, "w1", code="X", message="m", retry=False,
            backoff_seconds=[0.0], jitter=0.0, topic=TOPIC, tag="EXPORT_TASK",
        )  # fmt: skip
    notifier = notifier_for(
        engine,
        robots={"ops": {"kind": "dingtalk", "url": "https://oapi.dingtalk.com/robot/send?x=1"}},
        routes=[
            {"event": "export.failed", "export_type": "ORDERS", "robot": "ops"},
            {"event": "export.failed", "export_type": "OTHER", "robot": "ops"},
        ],
    )
    notifier.channels = {}  # the robot channel is another part's: the row waits for it
    one_pass(notifier)
    rows = rows_of(engine, t.id)
    assert [(r.channel, r.target, r.status) for r in rows] == [
        ("page", "u1", "SENT"),
        ("route", "operator", "SENT"),
        ("dingtalk", "ops", "PENDING"),
    ]
    assert rows[2].event_id == rows[0].event_id


def test_kill_9_between_send_and_mark_sends_again_with_the_same_id(engine, receiver, db_url):
    endpoint = add_endpoint(engine, receiver.url)
    receiver.secrets = [endpoint.secret]
    t = succeeded_task(engine)
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.notifier_child", db_url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    receiver.on_delivery = lambda _d: os.kill(child.pid, signal.SIGKILL)
    assert child.stdout is not None and child.stdout.readline().strip() == "READY"
    assert child.wait(timeout=60) == -signal.SIGKILL
    receiver.on_delivery = None
    row = webhook_row(engine, t.id)
    assert (row.status, row.lease_owner) == ("CLAIMED", "child-notifier")
    with engine.begin() as conn:  # the child's 1 s lease runs out
        conn.execute(
            update(NOTIFICATIONS)
            .where(NOTIFICATIONS.c.id == row.id)
            .values(lease_until=db_now_plus(-1))
        )
    one_pass(notifier_for(engine))
    ids = [d.headers["export-center-event-id"] for d in receiver.deliveries]
    assert ids == [row.event_id, row.event_id]
    assert [d.event["id"] for d in receiver.deliveries] == ids
    assert all(d.verified[endpoint.secret] for d in receiver.deliveries)
    assert webhook_row(engine, t.id).status == "SENT"


@pytest.mark.parametrize("how", ["deleted", "switched off"])
def test_a_deleted_or_switched_off_endpoint_is_not_called_and_nothing_alerts(engine, receiver, how):
    endpoint = add_endpoint(engine, receiver.url)
    t = succeeded_task(engine)
    with engine.begin() as conn:
        if how == "deleted":
            assert hooks.delete_endpoint(conn, "t1", endpoint.public_id)
        else:
            assert hooks.update_endpoint(conn, "t1", endpoint.public_id, enabled=False)
    dead_before = metrics.NOTIFICATION_DEAD.labels("webhook")._value.get()
    one_pass(notifier_for(engine))
    assert receiver.deliveries == []
    row = webhook_row(engine, t.id)
    assert row.status == "DROPPED" and row.last_error == "the endpoint was deleted or disabled"
    # An admin's choice is nobody's failure: no dead count (the alert's series).
    assert metrics.NOTIFICATION_DEAD.labels("webhook")._value.get() == dead_before
    if how == "switched off":  # switched on again, the dropped event can be sent by hand
        with engine.begin() as conn:
            assert hooks.update_endpoint(conn, "t1", endpoint.public_id, enabled=True)
            assert notes.redeliver_notification(conn, row.id)
        one_pass(notifier_for(engine))
        assert len(receiver.deliveries) == 1
        assert webhook_row(engine, t.id).status == "SENT"


def docs_receiver() -> Any:
    """The ``verify`` function of the receiver in docs/notifications.md, run as written."""
    text = (ROOT / "docs" / "notifications.md").read_text()
    block = text.split("<!-- receiver -->\n```python\n", 1)[1].split("```", 1)[0]
    assert len(block.strip().splitlines()) <= 10
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/notifications.md", "exec"), namespace)
    return namespace["verify"]


def test_the_receiver_of_the_docs_verifies_a_real_delivery_and_rejects_a_replay(engine, receiver):
    verify = docs_receiver()
    endpoint = add_endpoint(engine, receiver.url)
    succeeded_task(engine)
    one_pass(notifier_for(engine))
    (delivery,) = receiver.deliveries
    header = delivery.headers["export-center-signature"]
    assert verify(endpoint.secret, header, delivery.body) is True
    assert verify("whsec_other", header, delivery.body) is False
    assert verify(endpoint.secret, header, delivery.body + b" ") is False
    # The same delivery replayed 6 minutes later: refused, although correctly signed.
    from export_center.notify.signing import signature_header

    old = signature_header([endpoint.secret], delivery.body, timestamp=int(time.time()) - 360)
    assert verify(endpoint.secret, old, delivery.body) is False
    fresh = signature_header([endpoint.secret], delivery.body, timestamp=int(time.time()) - 60)
    assert verify(endpoint.secret, fresh, delivery.body) is True


def test_the_webhook_channel_passes_the_channel_conformance_checks(engine, receiver):
    endpoint = add_endpoint(engine, receiver.url)
    receiver.secrets = [endpoint.secret]
    channel = WebhookChannel(engine, settings_for().notify)
    try:
        check_channel(channel, endpoint.public_id, "we_missing", lambda: len(receiver.deliveries))
    finally:
        channel.close()
    assert all(d.verified[endpoint.secret] for d in receiver.deliveries)
    assert [d.event["data"]["state"] for d in receiver.deliveries] == [
        "succeeded",
        "succeeded",
        "failed",
    ]


def test_a_slow_receiver_holds_its_own_slots_and_others_are_delivered_meanwhile(engine, receiver):
    slow = Receiver(on_delivery=lambda _: time.sleep(3.0)).start()
    try:
        add_endpoint(engine, slow.url)
        add_endpoint(engine, receiver.url)
        for _ in range(3):
            succeeded_task(engine)
        notifier = notifier_for(engine, concurrency=8, concurrency_per_target=2)
        started = time.monotonic()
        notifier.run_once()  # returns without waiting for the deliveries it started
        assert time.monotonic() - started < 2.0
        while (len(receiver.deliveries), len(slow.deliveries)) < (2, 2) and (
            time.monotonic() - started < 2.5
        ):
            time.sleep(0.02)
        # Two rows per endpoint are under way at most: the fast one got two, the slow
        # one holds its two slots; each has a third row waiting.
        assert len(receiver.deliveries) == 2 and len(slow.deliveries) == 2
        while notifier.in_flight() > 2 and time.monotonic() - started < 2.5:
            time.sleep(0.02)  # the fast endpoint's answers are being recorded
        assert notifier.in_flight() == 2
        # The next pass gives the fast endpoint its third row while the slow one waits.
        notifier.run_once()
        while len(receiver.deliveries) < 3 and time.monotonic() - started < 2.9:
            time.sleep(0.02)
        assert len(receiver.deliveries) == 3 and time.monotonic() - started < 3.0
        assert len(slow.deliveries) == 2
        notifier.drain(timeout=30)
        one_pass(notifier)  # the slow endpoint's last row, now its slots are free
        assert len(slow.deliveries) == 3
        with engine.connect() as conn:
            statuses = (
                conn.execute(
                    select(NOTIFICATIONS.c.status).where(NOTIFICATIONS.c.channel == "webhook")
                )
                .scalars()
                .all()
            )
        assert statuses == ["SENT"] * 6
        notifier.close()
    finally:
        slow.stop()
