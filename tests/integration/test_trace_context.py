"""A caller's W3C trace follows its export: the task keeps the trace id, which its
commands (payload and message properties), the worker's log lines and every provider
call carry, each call with a span id of its own."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import orjson
import pytest

from export_center import repository
from export_center.logs import JsonFormatter
from export_center.publisher import message_for_row
from tests.support.fault_provider import FLAKY
from tests.support.helpers import wait_state

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{TRACE}-00f067aa0ba902b7-01"
BODY = {"exportType": "FLAKY", "format": "csv", "parameters": {}}


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """Every log line of the process, as the service writes them (JSON)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


def test_the_callers_trace_reaches_commands_logs_and_every_provider_call(
    flaky_stack, faulty, json_log
):
    stack = flaky_stack(max_attempts=2)
    faulty.reset(rows=2500, fail_versions={1}, fail_at_batch=2)  # version 1 fails, 2 runs
    client = stack.client(perms=FLAKY)
    created = client.post("/api/v1/exports", json=BODY, headers={"traceparent": CALLER})
    task_id = created.json()["taskId"]
    assert wait_state(client, task_id)["state"] == "succeeded"

    admin = stack.client("root", perms=["platform:export:admin"])
    assert admin.get(f"/api/v1/admin/tasks/{task_id}").json()["task"]["traceId"] == TRACE
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
        commands = repository.outbox_rows(conn, task.id)
    assert [c.dispatch_version for c in commands] == [1, 2]
    for row in commands:
        assert orjson.loads(row.payload_json)["traceId"] == TRACE
        assert message_for_row(row).properties["traceId"] == TRACE

    calls = list(faulty.behaviour.traceparents)
    assert len(calls) >= 5  # v1: batch 1, batch 2 three times; v2: three batches
    parsed = [re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01", c or "") for c in calls]
    assert all(parsed), calls
    assert {m.group(1) for m in parsed} == {TRACE}
    spans = [m.group(2) for m in parsed]
    assert len(set(spans)) == len(spans) and "00f067aa0ba902b7" not in spans

    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    mine = [line for line in lines if line.get("taskId") == task_id]
    retries = [line for line in mine if line["logger"] == "export_center.provider_client"]
    assert len(retries) >= 2, mine
    assert all(r["traceId"] == TRACE and r["spanId"] in spans for r in retries)
    failed = [line for line in mine if line["message"].startswith("attempt failed")]
    assert failed and all(line["traceId"] == TRACE for line in failed)
    assert all(line.get("traceId") == TRACE for line in mine), mine


@pytest.mark.parametrize(
    "header",
    ["00-not-a-trace", f"00-{'0' * 32}-00f067aa0ba902b7-01", f"ff-{TRACE}-00f067aa0ba902b7-01"],
)
def test_an_unusable_traceparent_starts_a_new_trace(make_stack, header):
    stack = make_stack(consumer={"enabled": False})
    client = stack.client("alice")
    created = client.post(
        "/api/v1/exports",
        json={"exportType": "ORDERS", "format": "csv", "parameters": {}},
        headers={"traceparent": header},
    )
    assert created.status_code == 202
    admin = stack.client("root", perms=["platform:export:admin"])
    trace = admin.get(f"/api/v1/admin/tasks/{created.json()['taskId']}").json()["task"]["traceId"]
    assert re.fullmatch(r"[0-9a-f]{32}", trace) and trace not in (TRACE, "0" * 32)
