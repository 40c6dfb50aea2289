"""Errors, automatic and manual retry, cancel and the creation guard, over real HTTP.

The FLAKY provider (tests/support/fault_provider.py) runs on its own loopback port; the stack
calls it exactly as it would call a business service.
"""

from __future__ import annotations

import copy
import email.utils
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from export_center import repository
from export_center.models import ExportOutbox, ExportTask
from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import create, download, read_csv, wait_state


def files(stack):
    return [o for o in stack.runtime.storage.list()]


def test_503_twice_then_200_succeeds_on_the_third_attempt(flaky_stack, faulty):
    stack = flaky_stack()
    faulty.reset(rows=2500, fail_versions={1, 2}, fail_at_batch=2)
    client = stack.client(perms=FLAKY)
    task_id = flaky(client).json()["taskId"]
    detail = wait_state(client, task_id, timeout=60)
    assert detail["state"] == "succeeded", detail
    assert detail["attempts"] == 3
    with stack.runtime.engine.connect() as conn:
        row = repository.read_task_by_no(conn, task_id)
        rows = repository.outbox_rows(conn, row.id)
    assert row.attempt_count == 3 and row.dispatch_version == 3
    assert [(r.dispatch_version, r.attempt_count, r.status) for r in rows] == [
        (1, 1, "SENT"),
        (2, 1, "SENT"),
        (3, 1, "SENT"),
    ]
    ids = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    assert ids == list(range(1, 2501))
    assert len(files(stack)) == 1  # the two failed attempts left no partial file


def test_always_503_fails_after_max_attempts_naming_phase_and_batch(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=3)
    behaviour = faulty.reset(rows=5000, always_fail=True, fail_at_batch=3)
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=90)
    assert detail["state"] == "failed", detail
    assert detail["attempts"] == 3
    message = detail["error"]["message"]
    assert message.startswith("fetch: batch 3 (cursor "), message
    assert "provider answered 503 on 3 tries" in message
    assert detail["error"]["code"] == "PROVIDER_UNAVAILABLE"
    versions = {r["version"] for r in behaviour.requests}
    assert versions == {1, 2, 3}
    assert files(stack) == []
    # Backoff between attempts: not earlier than configured (0.5 s, then 1 s).
    firsts = [min(r["at"] for r in behaviour.requests if r["version"] == v) for v in (1, 2, 3)]
    assert firsts[1] - firsts[0] >= 0.5 and firsts[2] - firsts[1] >= 1.0


@pytest.mark.parametrize(
    ("behaviour", "limits", "code", "fragment"),
    [
        (
            {"always_fail": True, "fail_status": 400, "fail_at_batch": 2},
            {},
            "PROVIDER_REJECTED",
            "provider answered 400",
        ),
        (
            {"always_fail": True, "fail_status": 410, "fail_at_batch": 2},
            {},
            "SNAPSHOT_EXPIRED",
            "snapshot expired",
        ),
        (
            {"always_fail": True, "fail_status": 501, "fail_at_batch": 2},
            {},
            "PROVIDER_REJECTED",
            "provider answered 501",
        ),
        (
            {
                "scripted": [(308, {"Location": "http://evil.example/steal"})],
                "scripted_at_batch": 2,
            },
            {},
            "PROVIDER_REDIRECTED",
            "provider redirected (308) to http://evil.example/steal",
        ),
        ({"change_schema_at_batch": 2}, {}, "SCHEMA_CHANGED", "schemaHash changed"),
        ({"nan_at_row": 1500}, {}, "INVALID_VALUE", "row 1500, column amount"),
        ({}, {"max_rows": 1200}, "ROW_LIMIT_EXCEEDED", "1,200 rows"),
        ({"big_text": 2000}, {"task": {"max_file_size_mb": 1}}, "FILE_TOO_LARGE", "1"),
    ],
)
def test_permanent_errors_fail_at_once(flaky_stack, faulty, behaviour, limits, code, fragment):
    limits = copy.deepcopy(limits)  # parametrize values are shared by the SQLite and
    behaviour = copy.deepcopy(behaviour)  # MariaDB runs (and scripted answers are used up)
    stack = flaky_stack(max_rows=limits.pop("max_rows", 5_000_000), **limits)
    requests = faulty.reset(rows=2500, **behaviour).requests
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed", detail
    assert detail["attempts"] == 1 and detail["error"]["code"] == code
    assert fragment in detail["error"]["message"], detail["error"]
    assert {r["version"] for r in requests} == {1}
    assert files(stack) == []


def test_a_cursor_that_does_not_advance_is_a_contract_error(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=2)
    behaviour = faulty.reset(rows=2500, stall_cursor_at_batch=2)
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed" and detail["attempts"] == 1  # permanent: no retry
    assert detail["error"]["code"] == "PROVIDER_CONTRACT"
    message = detail["error"]["message"]
    assert message.startswith("fetch: batch 2 (cursor 1000."), message
    assert "provider broke the contract: nextCursor '1000." in message
    assert message.endswith(
        "of batch 2 repeats the cursor already sent for batch 2 (the provider pages in a loop)"
    )
    assert [r["batch"] for r in behaviour.requests] == [1, 2]
    assert files(stack) == []


def test_has_more_without_a_cursor_is_a_contract_error(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=2)
    faulty.reset(rows=2500, stall_cursor_at_batch=1)
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed" and detail["attempts"] == 1
    assert detail["error"] == {
        "code": "PROVIDER_CONTRACT",
        "message": "fetch: batch 1: provider broke the contract: "
        "batch 1 says hasMore but has no nextCursor",
    }


@pytest.mark.parametrize("header", ["1", "http-date"])
def test_429_with_retry_after_then_200_succeeds_after_the_asked_pause(flaky_stack, faulty, header):
    stack = flaky_stack(max_attempts=1)
    not_before = None
    if header == "http-date":  # three seconds ahead, cut to whole seconds as HTTP-dates are
        when = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
        header, not_before = email.utils.format_datetime(when, True), when.timestamp()
    behaviour = faulty.reset(
        rows=2500, scripted=[(429, {"Retry-After": header})], scripted_at_batch=2
    )
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "succeeded", detail
    assert detail["attempts"] == 1 and detail["error"] is None
    assert [int(r[0]) for r in read_csv(download(client, detail))[1:]] == list(range(1, 2501))
    second = [r for r in behaviour.requests if r["batch"] == 2]
    assert len(second) == 2
    if not_before is None:  # "1": the asked second, not the usual 0.5 s
        assert second[1]["at"] - second[0]["at"] >= 0.9
    else:  # an HTTP-date: not asked again before that moment (however late the 429 came)
        assert second[1]["wall"] >= not_before - 0.01


def test_a_retry_after_beyond_the_bound_ends_the_attempt_without_waiting(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=1, provider={"max_retry_after_seconds": 30})
    behaviour = faulty.reset(
        rows=2500, scripted=[(503, {"Retry-After": "3600"})], scripted_at_batch=2
    )
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed" and detail["error"]["code"] == "PROVIDER_UNAVAILABLE"
    assert detail["error"]["message"].endswith(
        "provider answered 503 with Retry-After 3600 s, longer than the 30 s waited within a "
        "batch (provider.max_retry_after_seconds)"
    )
    assert [r["batch"] for r in behaviour.requests] == [1, 2]
    assert files(stack) == []


def wait_for_drip(behaviour, client, task_id):
    """Until the provider is dripping its answer (the fetch is in flight)."""
    deadline = time.monotonic() + 30
    while behaviour.drip_bytes_sent < 1:
        assert time.monotonic() < deadline, client.get(f"/api/v1/exports/{task_id}").json()
        time.sleep(0.05)


def dripping_export(flaky_stack, faulty):
    """A running export whose second batch drips one byte every 5 s for 60 s."""
    stack = flaky_stack()
    behaviour = faulty.reset(rows=5000, drip_at_batch=2, drip_every=5, drip_for=60)
    client = stack.client(perms=FLAKY)
    task_id = flaky(client).json()["taskId"]
    wait_for_drip(behaviour, client, task_id)
    return stack, client, task_id


def test_cancel_interrupts_a_fetch_in_flight_within_10_seconds(flaky_stack, faulty):
    # One byte every 5 s for 60 s: the read timeout (15 s) never fires.
    stack, client, task_id = dripping_export(flaky_stack, faulty)
    asked = time.monotonic()
    assert client.post(f"/api/v1/exports/{task_id}/cancel").json()["state"] == "running"
    detail = wait_state(client, task_id, {"cancelled", "succeeded", "failed"}, timeout=30)
    stopped = time.monotonic()
    assert detail["state"] == "cancelled" and stopped - asked < 10, detail
    assert files(stack) == []
    assert not [r for r in faulty.behaviour.requests if r["at"] > stopped]


def test_cancel_interrupts_the_pause_between_tries(flaky_stack, faulty):
    stack = flaky_stack()
    behaviour = faulty.reset(
        rows=2500, scripted=[(503, {"Retry-After": "25"})], scripted_at_batch=2
    )
    client = stack.client(perms=FLAKY)
    task_id = flaky(client).json()["taskId"]
    deadline = time.monotonic() + 30
    while not behaviour.requests or behaviour.requests[-1]["batch"] != 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    asked = time.monotonic()
    client.post(f"/api/v1/exports/{task_id}/cancel")
    detail = wait_state(client, task_id, {"cancelled", "succeeded", "failed"}, timeout=40)
    assert detail["state"] == "cancelled" and time.monotonic() - asked < 10, detail
    assert [r["batch"] for r in behaviour.requests] == [1, 2]  # batch 2 never tried again
    assert files(stack) == []


def test_a_batch_past_its_time_limit_is_transient(flaky_stack, faulty):
    # A byte every 0.5 s keeps the read timeout away; the registry limits a batch to 3 s.
    stack = flaky_stack(max_attempts=2, batch_timeout_seconds=3)
    behaviour = faulty.reset(rows=2500, drip_at_batch=2, drip_every=0.5, drip_for=30)
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed" and detail["attempts"] == 2, detail  # retried once
    assert detail["error"]["code"] == "PROVIDER_TOO_SLOW"
    message = detail["error"]["message"]
    assert message.startswith("fetch: batch 2 (cursor "), message
    assert message.endswith("provider answer took longer than 3 s"), message
    assert {r["version"] for r in behaviour.requests} == {1, 2}
    assert files(stack) == []


def test_the_deadline_interrupts_a_fetch_in_flight(flaky_stack, faulty):
    # The lease is renewed every 20 s; the watchdog's 2 s poll sees the deadline (4 s).
    stack = flaky_stack(
        max_attempts=1, task={"max_duration_minutes": 4 / 60, "heartbeat_seconds": 20}
    )
    faulty.reset(rows=2500, drip_at_batch=2, drip_every=1, drip_for=60)
    client = stack.client(perms=FLAKY)
    created = time.monotonic()
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed" and detail["error"]["code"] == "DEADLINE_PASSED", detail
    assert time.monotonic() - created < 4 + 10  # the 10 s promise, counted from the deadline
    assert detail["error"]["message"].startswith("fetch: batch 2 (cursor ")
    assert files(stack) == []


def test_shutdown_hands_back_an_attempt_waiting_for_a_fetch(flaky_stack, faulty):
    stack, client, task_id = dripping_export(flaky_stack, faulty)
    asked = time.monotonic()
    stack.stop()
    assert time.monotonic() - asked < 10
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
    assert task.status == "PENDING" and task.attempt_count == 0, task
    assert task.dispatch_version == 2 and task.failure_message is None
    assert files(stack) == []


def test_deadline_is_transient_and_checked_with_the_database_clock(flaky_stack, faulty):
    stack = flaky_stack(
        max_attempts=2, task={"max_duration_minutes": 2 / 60, "heartbeat_seconds": 0.3}
    )
    faulty.reset(rows=50_000, sleep_seconds=0.2)
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed" and detail["attempts"] == 2
    assert detail["error"]["code"] == "DEADLINE_PASSED", detail
    assert files(stack) == []


def test_manual_retry_runs_a_failed_export_again(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=1)
    faulty.reset(rows=2500, fail_versions={1}, fail_at_batch=1)
    client = stack.client(perms=FLAKY)
    task_id = flaky(client).json()["taskId"]
    assert wait_state(client, task_id)["state"] == "failed"
    answer = client.post(f"/api/v1/exports/{task_id}/retry")
    assert answer.status_code == 202 and answer.json()["state"] in ("queued", "running")
    assert answer.json()["error"] is None and answer.json()["processed"] == 0
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded" and detail["attempts"] == 1
    with stack.runtime.engine.connect() as conn:
        assert repository.read_task_by_no(conn, task_id).dispatch_version == 2
    again = client.post(f"/api/v1/exports/{task_id}/retry")
    assert again.status_code == 409 and again.json()["code"] == "NOT_RETRYABLE"


def test_cancel_a_queued_task_at_once_and_ack_its_late_command(flaky_stack, faulty):
    stack = flaky_stack(consumer={"enabled": False})
    client = stack.client(perms=FLAKY)
    task_id = flaky(client).json()["taskId"]
    answer = client.post(f"/api/v1/exports/{task_id}/cancel")
    assert answer.status_code == 202 and answer.json()["state"] == "cancelled"
    time.sleep(0.3)  # the publisher has sent the command by now
    runtime = stack.runtime
    delivery = runtime.transport.receive(2)
    assert delivery is not None
    assert runtime.consumer.handle_delivery(delivery) == "terminal"
    assert client.post(f"/api/v1/exports/{task_id}/cancel").status_code == 409
    assert client.post(f"/api/v1/exports/{task_id}/retry").status_code == 409
    assert faulty.behaviour.requests == []


def test_cancel_a_running_export_stops_within_10_seconds(flaky_stack, faulty):
    stack = flaky_stack(task={"heartbeat_seconds": 5})
    behaviour = faulty.reset(rows=400_000, sleep_seconds=0.05)
    client = stack.client(perms=FLAKY)
    task_id = flaky(client).json()["taskId"]
    wait_state(client, task_id, {"running"})
    while client.get(f"/api/v1/exports/{task_id}").json()["processed"] < 3000:
        time.sleep(0.05)
    asked = time.monotonic()
    assert client.post(f"/api/v1/exports/{task_id}/cancel").json()["state"] == "running"
    detail = wait_state(client, task_id, {"cancelled", "succeeded", "failed"}, timeout=15)
    stopped = time.monotonic()
    assert detail["state"] == "cancelled" and stopped - asked < 10
    time.sleep(1.0)
    assert not [r for r in behaviour.requests if r["at"] > stopped]
    assert files(stack) == []


def test_concurrent_creates_with_one_request_id_make_one_task(make_stack):
    stack = make_stack()
    client = stack.client()
    for _ in range(20):
        key = uuid.uuid4().hex
        results: list = []

        def post(results: list = results, key: str = key) -> None:
            results.append(
                create(
                    client,
                    "csv",
                    requestId=key,
                    parameters={"from": "1995-01-01", "to": "1995-01-31"},
                )
            )

        threads = [threading.Thread(target=post) for _ in range(10)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(r.status_code for r in results) == [200] * 9 + [202]
        assert len({r.json()["taskId"] for r in results}) == 1
        assert wait_state(client, results[0].json()["taskId"])["state"] == "succeeded"
    with stack.runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(ExportTask.__table__)).scalar() == 20
        assert conn.execute(select(func.count()).select_from(ExportOutbox.__table__)).scalar() == 20
    assert len([o for o in stack.runtime.storage.list()]) == 20


def test_duplicate_window_and_active_limits(make_stack):
    stack = make_stack(
        limits={"max_active_per_user": 3, "max_active_per_type": 5}, consumer={"enabled": False}
    )
    alice = stack.client("alice")
    first = create(alice, "csv", parameters={"from": "1995-01-01"})
    again = create(alice, "csv", parameters={"from": "1995-01-01"})
    assert first.status_code == 202 and again.status_code == 200
    assert again.json()["taskId"] == first.json()["taskId"]
    for day in ("02", "03"):
        assert create(alice, "csv", parameters={"from": f"1995-01-{day}"}).status_code == 202
    refused = create(alice, "csv", parameters={"from": "1995-01-04"})
    assert refused.status_code == 429 and refused.json()["code"] == "TOO_MANY_ACTIVE_TASKS"
    # All three are queued (no consumer): no rate to go by, so the default pause.
    assert refused.headers["retry-after"] == "10"
    bob = stack.client("bob")
    assert create(bob, "csv", parameters={"from": "1995-01-05"}).status_code == 202
    assert create(bob, "xlsx", parameters={"from": "1995-01-05"}).status_code == 202
    per_type = create(stack.client("carol"), "csv")
    assert (
        per_type.status_code == 429 and per_type.json()["code"] == "TOO_MANY_ACTIVE_TASKS_FOR_TYPE"
    )
    # Cancelling frees a slot.
    alice.post(f"/api/v1/exports/{first.json()['taskId']}/cancel")
    assert create(alice, "csv", parameters={"from": "1995-01-06"}).status_code == 202


def test_a_key_answered_with_a_duplicate_is_remembered_after_the_task_ends(stack):
    # A request without a key starts an export; the same export with a key within the
    # duplicate window is answered with that task. The key must stay bound to it: a
    # retry after the task ended gets the same task, never a second export and file.
    alice = stack.client("alice")
    year = {"from": "1993-01-01", "to": "1993-12-31"}
    first = create(alice, "xlsx", parameters=year)
    assert first.status_code == 202
    task_id = first.json()["taskId"]
    keyed = create(alice, "xlsx", parameters=year, requestId="k-dup-test")
    assert keyed.status_code == 200 and keyed.json()["taskId"] == task_id
    assert keyed.headers["duplicate-of-active-task"] == "true"
    assert wait_state(alice, task_id)["state"] == "succeeded"
    retry = create(alice, "xlsx", parameters=year, requestId="k-dup-test")
    assert retry.status_code == 200 and retry.json()["taskId"] == task_id
    assert retry.headers["idempotent-replayed"] == "true"
    # The key names that export only.
    other = create(alice, "csv", parameters={"from": "1994-01-01"}, requestId="k-dup-test")
    assert other.status_code == 409 and other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert "format and parameters" in other.json()["message"]
    with stack.runtime.engine.connect() as conn:
        tasks = conn.execute(select(func.count()).select_from(ExportTask.__table__)).scalar()
    assert tasks == 1


def test_a_queued_task_past_the_stale_window_still_runs_with_its_version(make_stack):
    stack = make_stack(
        consumer={"enabled": False},
        reconciler={"enabled": False, "sent_stale_seconds": 1, "redispatch_grace_seconds": 0},
    )
    client = stack.client()
    task_id = create(client, "csv", parameters={"from": "1995-01-01", "to": "1995-01-31"}).json()[
        "taskId"
    ]
    time.sleep(1.5)  # the command waits in the queue longer than the stale window
    runtime = stack.runtime
    assert runtime.reconciler.run_once() == 1 and runtime.reconciler.last["redispatch"] == 1
    time.sleep(0.3)
    assert runtime.transport.pending() == 2  # the original and the re-sent command, same version
    runtime.consumer.start()
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded"
    deadline = time.monotonic() + 5
    while len(runtime.consumer.handled) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    outcomes = sorted(o for _, o in runtime.consumer.handled)
    assert outcomes[0] == "executed" and outcomes[1] in ("running_live_lease", "terminal")
    with runtime.engine.connect() as conn:
        assert repository.read_task_by_no(conn, task_id).dispatch_version == 1
    assert len(list(runtime.storage.list())) == 1
