"""End to end over real HTTP on loopback: create -> outbox -> transport -> provider -> file.

Runs on SQLite and on MariaDB with the TPC-H sample at scale 0.01 (15,000 orders).
"""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import func, select

from export_center import repository
from export_center.models import ExportOutbox, ExportTask
from providers import tpch
from tests.conftest import SAMPLE_SCALE
from tests.support.helpers import create, download, in_shard_order, read_csv, read_xlsx, wait_state

ORDERS = int(SAMPLE_SCALE * tpch.ORDERS_PER_SCALE)


def _source(sample_dir: Path) -> list[dict]:
    return list(tpch.read_source_orders(tpch.generate(SAMPLE_SCALE, sample_dir)))


def _guarded(text: str) -> str:
    # CSV formula guard (CASES E06): cells starting with these get a ' prefix.
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r", "\n") else text


def test_orders_csv_equals_source(stack, sample_dir):
    client = stack.client()
    answer = create(client, "csv")
    assert answer.status_code == 202
    body = answer.json()
    assert body["taskId"].startswith("exp_") and len(body["taskId"]) == 30
    assert body["state"] == "queued"
    assert body["progressUrl"] == f"/api/v1/exports/{body['taskId']}"
    detail = wait_state(client, body["taskId"])
    assert detail["state"] == "succeeded", detail
    assert detail["processed"] == ORDERS and detail["total"] == ORDERS
    assert detail["phase"] == "store" and detail["error"] is None
    data = download(client, detail)
    assert data.count(b"\xef\xbb\xbf") == 1
    rows = read_csv(data)
    assert rows[0][:3] == ["Order key", "Customer key", "Customer name"]
    body_rows = rows[1:]
    assert len(body_rows) == ORDERS
    assert len({r[0] for r in body_rows}) == ORDERS
    for got, src in zip(body_rows, _source(sample_dir), strict=True):
        assert int(got[0]) == src["o_orderkey"]
        assert int(got[1]) == src["o_custkey"]
        assert got[2] == src["c_name"]
        assert Decimal(got[6]) == src["o_totalprice"]
        assert dt.date.fromisoformat(got[7]) == src["o_orderdate"]
        assert got[11] == _guarded(src["o_comment"])
    assert b"\r\n" in data[:200]


def test_orders_xlsx_equals_source(stack, sample_dir):
    client = stack.client()
    detail = wait_state(client, create(client, "xlsx").json()["taskId"])
    assert detail["state"] == "succeeded", detail
    data = download(client, detail)
    rows = read_xlsx(data)
    assert rows[0][0] == "Order key"
    body_rows = rows[1:]
    assert len(body_rows) == ORDERS
    assert len({r[0] for r in body_rows}) == ORDERS
    for got, src in zip(body_rows, _source(sample_dir), strict=True):
        assert got[0] == src["o_orderkey"]
        assert got[2] == src["c_name"]
        assert isinstance(got[6], (int, float)) and Decimal(str(got[6])) == src["o_totalprice"]
        assert isinstance(got[7], dt.datetime) and got[7].date() == src["o_orderdate"]
        assert got[11] == src["o_comment"]  # XLSX keeps text exact (quotePrefix, no ' added)


def test_date_filter_is_inclusive(stack, sample_dir):
    client = stack.client()
    params = {"from": "1995-03-01", "to": "1995-03-31", "status": "F"}
    detail = wait_state(client, create(client, "csv", parameters=params).json()["taskId"])
    assert detail["state"] == "succeeded", detail
    keys = [int(r[0]) for r in read_csv(download(client, detail))[1:]]
    # ORDERS with both dates runs as day shards (16 for 31 days): the file is in shard
    # order, each shard in order-key order.
    expected = in_shard_order(
        stack,
        params,
        (
            (s["o_orderdate"], s["o_orderkey"])
            for s in _source(sample_dir)
            if dt.date(1995, 3, 1) <= s["o_orderdate"] <= dt.date(1995, 3, 31)
            and s["o_orderstatus"] == "F"
        ),
    )
    assert detail["shardsDone"] == detail["shardsTotal"] == 16
    assert keys == expected and len(expected) > 0
    assert any(
        s["o_orderdate"] == dt.date(1995, 3, 31)
        for s in _source(sample_dir)
        if s["o_orderkey"] in set(keys)
    )


def test_same_request_id_returns_same_task_and_one_file(stack):
    client = stack.client()
    first = create(client, "csv", requestId="req-42")
    second = create(client, "csv", requestId="req-42")
    assert first.status_code == 202 and second.status_code == 200
    assert first.json()["taskId"] == second.json()["taskId"]
    assert second.headers["Idempotent-Replayed"] == "true"
    header = client.post(
        "/api/v1/exports",
        json={"exportType": "ORDERS", "format": "csv"},
        headers={"Idempotency-Key": "req-42"},
    )
    assert header.json()["taskId"] == first.json()["taskId"]
    detail = wait_state(client, first.json()["taskId"])
    assert detail["state"] == "succeeded"
    runtime = stack.runtime
    with runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(ExportTask.__table__)).scalar() == 1
        assert conn.execute(select(func.count()).select_from(ExportOutbox.__table__)).scalar() == 1
    files = [o for o in runtime.storage.list() if not o.key.endswith(".part")]
    assert len(files) == 1
    # Another user's identical key is a different task.
    other = create(stack.client("bob"), "csv", requestId="req-42")
    assert other.status_code == 202 and other.json()["taskId"] != first.json()["taskId"]
    # The same key for another export is refused, naming what differs and where the key was.
    reused = create(client, "xlsx", requestId="req-42")
    assert reused.status_code == 409 and reused.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert reused.json()["field"] == "requestId"
    assert "differs in format;" in reused.json()["message"], reused.json()
    by_header = client.post(
        "/api/v1/exports",
        json={"exportType": "ORDERS", "format": "csv", "parameters": {"status": "F"}},
        headers={"Idempotency-Key": "req-42"},
    )
    assert by_header.status_code == 409 and by_header.json()["field"] == "Idempotency-Key"
    assert "differs in parameters;" in by_header.json()["message"], by_header.json()


def test_other_users_get_404_like_a_missing_task(stack):
    alice = stack.client("alice")
    detail = wait_state(alice, create(alice, "csv").json()["taskId"])
    task_id = detail["taskId"]
    missing_id = "exp_" + "0" * 26
    for intruder in (stack.client("bob"), stack.client("alice", tenant="t2")):
        for path in (
            f"/api/v1/exports/{task_id}",
            f"/api/v1/exports/{task_id}/download",
            f"/api/v1/exports/{task_id}/cancel",
            f"/api/v1/exports/{task_id}/retry",
        ):
            method = intruder.post if path.endswith(("cancel", "retry")) else intruder.get
            theirs, nothing = method(path), method(path.replace(task_id, missing_id))
            assert theirs.status_code == 404 == nothing.status_code
            assert theirs.json() == nothing.json()
        assert intruder.get("/api/v1/exports").json()["items"] == []
    anonymous = stack.client(None)
    assert anonymous.get(f"/api/v1/exports/{task_id}").status_code == 401
    assert anonymous.get(f"/api/v1/exports/{task_id}/download").status_code == 401
    # The owner's bearer download redirects to a signed link that serves the file.
    redirect = alice.get(f"/api/v1/exports/{task_id}/download")
    assert redirect.status_code == 307
    served = alice.get(redirect.headers["location"])
    assert served.status_code == 200
    # HEAD (download managers ask it first): the same headers, no body.
    head = alice.head(redirect.headers["location"])
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(served.content))
    assert head.headers["content-disposition"] == served.headers["content-disposition"]
    assert alice.head(f"/api/v1/exports/{task_id}/download").status_code == 307
    assert anonymous.head(redirect.headers["location"] + "0").status_code == 403
    assert anonymous.head("/healthz").status_code == 200
    # A tenant-wide downloader sees it.
    auditor = stack.client("carol", perms=["platform:download:all"])
    assert auditor.get(f"/api/v1/exports/{task_id}").status_code == 200
    assert [t["taskId"] for t in auditor.get("/api/v1/exports").json()["items"]] == [task_id]
    # The same user, or a tenant-wide downloader, in another app sees nothing of it:
    # not in the list (no links handed out) and not by id.
    for other_app in (
        stack.client("alice", app_code="MERCHANT"),
        stack.client("mallory", perms=["platform:download:all"], app_code="MERCHANT"),
    ):
        assert other_app.get("/api/v1/exports").json()["items"] == []
        assert other_app.get(f"/api/v1/exports/{task_id}").status_code == 404
        assert other_app.get(f"/api/v1/exports/{task_id}/download").status_code == 404


def test_signed_links_refuse_tampering_and_expiry(make_stack):
    stack = make_stack(api={"download_link_ttl_seconds": 2})
    alice = stack.client("alice")
    detail = wait_state(alice, create(alice, "csv").json()["taskId"])
    link = detail["downloadUrl"]
    anonymous = stack.client(None)
    ok = anonymous.get(link)
    assert ok.status_code == 200 and ok.content[:3] == b"\xef\xbb\xbf"
    disposition = ok.headers["content-disposition"]
    assert (
        disposition.startswith('attachment; filename="orders.csv"')
        and "filename*=UTF-8''orders.csv" in disposition
    )
    signature = link.split("signature=")[1]
    altered = link.replace(signature, ("0" if signature[0] != "0" else "1") + signature[1:])
    assert anonymous.get(altered).status_code == 403
    expires = int(link.split("expires=")[1].split("&")[0])
    assert (
        anonymous.get(link.replace(f"expires={expires}", f"expires={expires + 86400}")).status_code
        == 403
    )
    assert anonymous.get(link.replace("user=alice", "user=bob")).status_code == 403
    bob = stack.client("bob")
    refused = bob.get(link)
    assert refused.status_code == 403 and refused.json()["code"] == "LINK_NOT_YOURS"
    for bad in ("file=../../etc/passwd", "file=..%2f..%2fetc%2fpasswd", "file=/etc/passwd"):
        answer = anonymous.get(f"{link}&{bad}")
        assert answer.status_code == 400 and b"root:" not in answer.content
    import time

    time.sleep(2.5)
    expired = anonymous.get(link)
    assert expired.status_code == 403 and expired.json()["code"] == "LINK_EXPIRED"


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        (b"{not json", 400, "MALFORMED_JSON", None),
        ({"format": "csv"}, 422, "MISSING_FIELD", "exportType"),
        ({"exportType": "ORDERS"}, 422, "MISSING_FIELD", "format"),
        ({"exportType": "NOPE", "format": "csv"}, 422, "UNKNOWN_EXPORT_TYPE", "exportType"),
        ({"exportType": "ORDERS", "format": "pdf"}, 422, "INVALID_FORMAT", "format"),
        (
            {
                "exportType": "ORDERS",
                "format": "csv",
                "parameters": {"from": "2024-02-01", "to": "2024-01-01"},
            },
            422,
            "INVALID_DATE_RANGE",
            "parameters.from",
        ),
        (
            {"exportType": "ORDERS", "format": "csv", "parameters": {"from": "2024-02-30"}},
            422,
            "INVALID_DATE",
            "parameters.from",
        ),
        (
            {"exportType": "ORDERS", "format": "csv", "parameters": {"to": "yesterday"}},
            422,
            "INVALID_DATE",
            "parameters.to",
        ),
        (
            {"exportType": "ORDERS", "format": "csv", "parameters": {"tenantId": "t2"}},
            422,
            "UNKNOWN_PARAMETER",
            "parameters.tenantId",
        ),
        (
            {"exportType": "ORDERS", "format": "csv", "colour": "red"},
            422,
            "UNKNOWN_FIELD",
            "colour",
        ),
        (
            {"exportType": "ORDERS", "format": "csv", "taskName": "x" * 101},
            422,
            "TOO_LONG",
            "taskName",
        ),
    ],
)
def test_bad_requests_get_4xx_and_write_nothing(stack, body, status, code, field):
    client = stack.client()
    if isinstance(body, bytes):
        answer = client.post(
            "/api/v1/exports", content=body, headers={"content-type": "application/json"}
        )
    else:
        answer = client.post("/api/v1/exports", json=body)
    assert answer.status_code == status, answer.text
    payload = answer.json()
    assert payload["code"] == code and payload["field"] == field
    assert isinstance(payload["message"], str) and len(payload["message"]) > 5
    with stack.runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(ExportTask.__table__)).scalar() == 0
        assert conn.execute(select(func.count()).select_from(ExportOutbox.__table__)).scalar() == 0


def test_list_is_newest_first_and_paginated(stack):
    client = stack.client()
    ids = [
        create(client, fmt, parameters={"from": f"1995-01-0{i + 1}"}).json()["taskId"]
        for i, fmt in enumerate(["csv", "xlsx", "csv"])
    ]
    for task_id in ids:
        wait_state(client, task_id)
    page1 = client.get("/api/v1/exports", params={"limit": 2}).json()
    assert [t["taskId"] for t in page1["items"]] == ids[::-1][:2]
    page2 = client.get("/api/v1/exports", params={"limit": 2, "cursor": page1["nextCursor"]}).json()
    assert [t["taskId"] for t in page2["items"]] == [ids[0]] and page2["nextCursor"] is None
    done = client.get("/api/v1/exports", params={"state": "succeeded"}).json()["items"]
    assert len(done) == 3
    assert client.get("/api/v1/exports", params={"state": "bogus"}).status_code == 422
    # Parameters the list does not have, or given twice, are refused, not ignored.
    unknown = client.get("/api/v1/exports", params={"colour": "red"})
    assert unknown.status_code == 400
    assert (unknown.json()["code"], unknown.json()["field"]) == ("UNKNOWN_PARAMETER", "colour")
    twice = client.get("/api/v1/exports?state=succeeded&state=failed")
    assert twice.status_code == 400 and twice.json()["code"] == "REPEATED_PARAMETER"
    both = client.get("/api/v1/exports", params={"state": "succeeded,failed"}).json()
    assert len(both["items"]) == 3
    detail = client.get(f"/api/v1/exports/{ids[0]}", params={"x": "1"})
    assert detail.status_code == 400 and detail.json()["field"] == "x"
    # A well-formed cursor that is not from this list is a bad cursor, not a missing task.
    bob = stack.client("bob")
    for cursor in (ids[0], "exp_" + "0" * 26):
        wrong = bob.get("/api/v1/exports", params={"cursor": cursor})
        assert wrong.status_code == 422, wrong.text
        assert (wrong.json()["code"], wrong.json()["field"]) == ("INVALID_CURSOR", "cursor")


def test_progress_is_written_per_batch(make_stack):
    stack = make_stack()
    client = stack.client()
    task_id = create(client, "csv").json()["taskId"]
    seen = set()
    detail = {}
    while True:
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        if detail["state"] == "running":
            seen.add(detail["processed"])
        if detail["state"] in ("succeeded", "failed"):
            break
    assert detail["state"] == "succeeded"
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_id)
    assert task.processed_rows == task.total_rows == task.row_count == ORDERS
    assert all(p % 1000 == 0 for p in seen)


def test_create_dispatches_at_once_not_at_the_next_publisher_tick(make_stack):
    """The publisher runs every 60 s here; a create brings its pass forward, so the
    export starts within seconds and finishes long before the first tick."""
    stack = make_stack(publisher={"loop_seconds": 60})
    client = stack.client()
    started = time.monotonic()
    task_id = create(client, "csv").json()["taskId"]
    running = wait_state(client, task_id, {"running", "succeeded"}, timeout=20)
    picked_up = time.monotonic() - started
    done = wait_state(client, task_id, timeout=30)
    assert done["state"] == "succeeded", done
    assert picked_up < 5, f"dispatch took {picked_up:.2f} s ({running['state']})"
    # a second create while the first is done also goes at once (the nudge is not one-shot)
    second = create(client, "xlsx").json()["taskId"]
    assert wait_state(client, second, timeout=30)["state"] == "succeeded"
    assert time.monotonic() - started < 45


def test_a_provider_request_cut_off_by_its_caller_is_a_normal_event(stack, caplog):
    # A dying worker cuts its provider request off mid-body: the SDK logs one INFO line,
    # no ASGI traceback.
    import logging
    import socket
    from urllib.parse import urlsplit

    caplog.set_level(logging.INFO)
    parts = urlsplit(stack.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
        sock.sendall(
            b"POST /internal/exports/v1/ORDERS/batches HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            + f"x-internal-service-token: {stack.settings.internal_token}\r\n".encode()
            + b'content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"taskId":'
        )
        time.sleep(0.3)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
        "disconnected" in r.getMessage() for r in caplog.records
    ):
        time.sleep(0.05)
    disconnects = [r for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(disconnects) == 1 and disconnects[0].levelno == logging.INFO
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
    ]
