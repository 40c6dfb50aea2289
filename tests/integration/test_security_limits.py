"""Input limits, permissions, provider-answer checks and file retention."""

from __future__ import annotations

import time

import orjson
import pytest
from sqlalchemy import func, select, update

from export_center import repository
from export_center.db import db_now_plus
from export_center.models import ExportTask
from tests.support.cases_provider import CASES_TOKEN as TOKEN
from tests.support.cases_provider import cases_registry
from tests.support.helpers import create, wait_state

T = ExportTask.__table__


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"parameters": {f"k{i}": "x" for i in range(21)}}, "TOO_MANY_PARAMETERS", "parameters"),
        ({"parameters": {"from": "x" * 4100}}, "PARAMETERS_TOO_LARGE", "parameters"),
        ({"parameters": {"status": "O" * 257}}, "PARAMETER_TOO_LONG", "parameters.status"),
        ({"parameters": {"a": {"b": {"c": 1}}}}, "PARAMETERS_TOO_DEEP", "parameters.a.b"),
        ({"parameters": {"status": "X"}}, "INVALID_VALUE", "parameters.status"),
        ({"parameters": {"tenantId": "other"}}, "UNKNOWN_PARAMETER", "parameters.tenantId"),
        ({"taskName": "n" * 101}, "TOO_LONG", "taskName"),
        ({"taskName": "a\x00b"}, "INVALID_VALUE", "taskName"),  # NUL, line breaks, C1
        ({"taskName": "two\nlines"}, "INVALID_VALUE", "taskName"),
        ({"taskName": "tab\there"}, "INVALID_VALUE", "taskName"),
        ({"taskName": "c1\x85"}, "INVALID_VALUE", "taskName"),
        ({"requestId": "r" * 129}, "TOO_LONG", "requestId"),
        ({"callbackUrl": "http://x"}, "UNKNOWN_FIELD", "callbackUrl"),
    ],
)
def test_each_input_limit_answers_422_with_code_and_path(stack, body, code, field):
    answer = create(stack.client(), "csv", **body)
    assert answer.status_code == 422, answer.text
    assert (answer.json()["code"], answer.json()["field"]) == (code, field)


def test_big_bodies_and_anonymous_posts_are_refused_before_parsing(stack):
    client = stack.client()
    big = client.post(
        "/api/v1/exports",
        content=b"{" + b" " * 70_000 + b"}",
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413 and big.json()["code"] == "BODY_TOO_LARGE"
    anonymous = stack.client(None).post("/api/v1/exports", content=b"{not json")
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith(
        "Bearer"
    )

    def chunks(total: int):  # no Content-Length: Transfer-Encoding: chunked
        for _ in range(total // 10_000):
            yield b" " * 10_000

    chunked = client.post(
        "/api/v1/exports", content=chunks(70_000), headers={"content-type": "application/json"}
    )
    assert "content-length" not in chunked.request.headers
    assert chunked.status_code == 413 and chunked.json()["code"] == "BODY_TOO_LARGE"
    small = client.post(
        "/api/v1/exports", content=chunks(20_000), headers={"content-type": "application/json"}
    )
    assert small.status_code in (400, 422) and small.json()["code"] != "BODY_TOO_LARGE"
    not_utf8 = client.post(
        "/api/v1/exports",
        content=b'{"exportType": "\xff\xfe"}',
        headers={"content-type": "application/json"},
    )
    assert not_utf8.status_code == 400, not_utf8.text
    assert not_utf8.json()["code"] == "INVALID_BODY" and not_utf8.json()["message"]


def test_permission_and_app_scope_gate_create_and_retry(stack):
    nobody = stack.client("nobody", perms=[])
    refused = create(nobody, "csv")
    assert refused.status_code == 403 and refused.json()["code"] == "PERMISSION_DENIED"
    merchant = stack.client("alice", app_code="MERCHANT")
    assert create(merchant, "csv").status_code == 403
    alice = stack.client("alice")
    task_id = create(alice, "csv", parameters={"from": "1995-01-01", "to": "1995-01-31"}).json()[
        "taskId"
    ]
    wait_state(alice, task_id)
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(T).where(T.c.task_no == task_id).values(status="FAILED"))
    revoked = stack.client("alice", perms=[])
    assert revoked.post(f"/api/v1/exports/{task_id}/retry").json()["code"] == "PERMISSION_DENIED"
    # The merchant app of the same user does not even see the platform task.
    assert merchant.get(f"/api/v1/exports/{task_id}").status_code == 404


def test_files_past_retention_answer_410_and_are_deleted(stack):
    client = stack.client()
    detail = wait_state(
        client,
        create(client, "csv", parameters={"from": "1995-01-01", "to": "1995-01-31"}).json()[
            "taskId"
        ],
    )
    link = detail["downloadUrl"]  # link lifetime (24 h) is separate from retention
    with stack.runtime.engine.begin() as conn:
        conn.execute(
            update(T).where(T.c.task_no == detail["taskId"]).values(expires_at=db_now_plus(-1))
        )
    assert stack.client(None).get(link).status_code == 410
    stack.runtime.reconciler.run_once()
    expired = client.get(f"/api/v1/exports/{detail['taskId']}").json()
    assert expired["state"] == "expired" and expired["downloadUrl"] is None
    assert expired["expiresAt"] is not None  # still says when the file went
    assert list(stack.runtime.storage.list()) == []
    assert stack.client(None).get(link).status_code == 410


def _page(rows_json: str, columns: list[tuple[str, str]], more: bool = False) -> str:
    body = {
        "schemaVersion": 1,
        "schemaHash": "sha256:x",
        "snapshotToken": "s",
        "columns": [{"key": k, "title": k, "type": t} for k, t in columns],
        "rows": [],
        "nextCursor": "1" if more else None,
        "hasMore": more,
    }
    return orjson.dumps(body).decode().replace('"rows":[]', f'"rows":{rows_json}')


@pytest.mark.parametrize(
    ("make_page", "fragment"),
    [
        (
            lambda: _page('[{"s":"' + "x" * (4 * 1024 * 1024) + '"}]', [("s", "STRING")]),
            "at most 4 MB allowed",
        ),
        (
            lambda: (
                "STREAM:" + _page('[{"s":"' + "x" * (4 * 1024 * 1024) + '"}]', [("s", "STRING")])
            ),
            "answer larger than 4 MB",
        ),
        (
            lambda: _page(orjson.dumps([{"s": "x"}] * 51).decode(), [("s", "STRING")]),
            "51 rows in a batch of limit 50",
        ),
        (
            lambda: _page("[]", [(f"c{i}", "STRING") for i in range(101)]),
            "101 columns, at most 100",
        ),
        (lambda: '{"rows": "nope"}', "rows must be a list"),
    ],
)
def test_provider_answers_are_checked_while_read(make_stack, cases, tmp_path, make_page, fragment):
    stack = make_stack(
        export_types_file=str(cases_registry(tmp_path, cases.url)),
        provider={"internal_token": TOKEN},
    )
    cases.pages = [make_page()]
    client = stack.client(perms=["export:cases:create"])
    detail = wait_state(client, create(client, "csv", exportType="CASES").json()["taskId"])
    assert detail["state"] == "failed" and detail["error"]["code"] == "PROVIDER_CONTRACT"
    assert fragment in detail["error"]["message"], detail["error"]
    assert detail["attempts"] == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v1/exports?x=1"),
        ("POST", "/api/v1/exports?requestId=abc"),
        ("GET", "/api/v1/export-types?all=1"),
        ("GET", "/api/v1/me?debug=1"),
        ("POST", "/api/orders/export?format=xlsx"),
        ("GET", "/api/v1/exports?limt=5"),
        ("GET", "/healthz?verbose=1"),
    ],
)
def test_every_route_refuses_query_parameters_it_does_not_take(stack, method, path):
    client = stack.client()
    body = {"exportType": "ORDERS", "format": "csv", "parameters": {}}
    answer = client.request(method, path, json=body if method == "POST" else None)
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "UNKNOWN_PARAMETER"
    assert answer.json()["field"] == path.split("?")[1].split("=")[0]
    with stack.runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(T)).scalar() == 0  # nothing made


def test_task_routes_refuse_unknown_or_repeated_query_parameters(stack):
    client = stack.client()
    task_id = create(client, "csv", parameters={"from": "1995-01-01"}).json()["taskId"]
    wait_state(client, task_id)
    for method, path in (
        ("POST", f"/api/v1/exports/{task_id}/cancel?force=1"),
        ("POST", f"/api/v1/exports/{task_id}/retry?restart=1"),
        ("GET", f"/api/orders/export/{task_id}?x=1"),
        ("GET", f"/api/v1/exports/{task_id}/download?file=../../etc/passwd"),
    ):
        answer = client.request(method, path)
        assert answer.status_code == 400 and answer.json()["code"] == "UNKNOWN_PARAMETER", path
    known = client.post(f"/api/v1/exports/{task_id}/retry?fresh=true")  # a known parameter
    assert known.status_code == 409 and known.json()["code"] == "NOT_RETRYABLE"
    repeated = client.get("/api/v1/exports?state=queued&state=running")
    assert repeated.status_code == 400 and repeated.json()["code"] == "REPEATED_PARAMETER"
    assert "comma-separated" in repeated.json()["message"]
    link = client.get(f"/api/v1/exports/{task_id}").json()["downloadUrl"]
    twice = client.get(link + "&user=alice")
    assert twice.status_code == 400 and twice.json()["code"] == "REPEATED_PARAMETER"
    assert "comma-separated" not in twice.json()["message"]


def test_bodies_must_say_they_are_json(stack):
    client = stack.client()
    body = b'{"exportType": "ORDERS", "format": "csv"}'
    for kind in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"content-type": kind} if kind else {}
        answer = client.post("/api/v1/exports", content=body, headers=headers)
        assert answer.status_code == 415, (kind, answer.text)
        assert answer.json() == {
            "code": "UNSUPPORTED_MEDIA_TYPE",
            "message": "send the body as JSON with the header content-type: application/json",
            "field": None,
        }
    ok = client.post(
        "/api/v1/exports", content=body, headers={"content-type": "application/json; charset=utf-8"}
    )
    assert ok.status_code == 202
    # The guard's own answers are compact JSON like every other error body.
    anonymous = stack.client(None).post("/api/v1/exports", json={})
    assert anonymous.status_code == 401
    assert anonymous.content == (
        b'{"code":"UNAUTHORIZED","message":"a bearer token is required","field":null}'
    )


def test_the_legacy_alias_names_its_own_fields(stack):
    client = stack.client()
    answer = client.post("/api/orders/export", json={"from": "1995-02-01", "to": "1995-01-01"})
    assert answer.status_code == 422
    assert (answer.json()["code"], answer.json()["field"]) == ("INVALID_DATE_RANGE", "from")
    bad = client.post("/api/orders/export", json={"to": "yesterday"})
    assert (bad.json()["code"], bad.json()["field"]) == ("INVALID_DATE", "to")


def test_default_task_names_and_cancel_requested(make_stack):
    stack = make_stack(consumer={"enabled": False})
    client = stack.client()
    for month, given in enumerate(("", "   ", None), start=1):
        body = {
            "exportType": "ORDERS",
            "format": "csv",
            "parameters": {"from": f"1995-0{month}-01"},
        }
        if given is not None:
            body["taskName"] = given
        task_id = client.post("/api/v1/exports", json=body).json()["taskId"]
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        assert detail["taskName"] == "Orders export", given
        assert detail["cancelRequested"] is False
        client.post(f"/api/v1/exports/{task_id}/cancel")
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(T).values(status="RUNNING", cancel_requested=False))
    task_id = create(client, "xlsx").json()["taskId"]
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(T).where(T.c.task_no == task_id).values(status="RUNNING"))
    answer = client.post(f"/api/v1/exports/{task_id}/cancel")
    assert answer.status_code == 202
    assert answer.json()["state"] == "running" and answer.json()["cancelRequested"] is True


def test_idempotency_keys_are_utf8_in_the_header_and_the_body(stack):
    client = stack.client()
    body = {"exportType": "ORDERS", "format": "csv", "parameters": {"from": "1993-03-02"}}
    first = client.post("/api/v1/exports", json=body, headers={"Idempotency-Key": "新键".encode()})
    assert first.status_code == 202, first.text
    again = client.post("/api/v1/exports", json={**body, "requestId": "新键"})
    assert again.status_code == 200 and again.json()["taskId"] == first.json()["taskId"]
    both = client.post(
        "/api/v1/exports",
        json={**body, "requestId": "新键"},
        headers={"Idempotency-Key": "新键".encode()},
    )
    assert both.status_code == 200 and both.json()["taskId"] == first.json()["taskId"]
    twice = client.post(
        "/api/v1/exports", json=body, headers=[("Idempotency-Key", "a1"), ("Idempotency-Key", "a2")]
    )
    assert twice.status_code == 400 and twice.json()["code"] == "REPEATED_HEADER"
    dup = client.post(
        "/api/v1/exports",
        content=b'{"exportType": "ORDERS", "format": "csv", "exportType": "CUSTOMERS"}',
        headers={"content-type": "application/json"},
    )
    assert dup.status_code == 400
    assert dup.json() == {
        "code": "DUPLICATE_KEY",
        "message": "the JSON body names 'exportType' twice",
        "field": None,
    }


@pytest.mark.parametrize("day", ["1995-W02-1", "1995-W02", "19950105", "1995-1-5", "1995-01-5"])
def test_dates_are_calendar_dates_only(stack, day):
    answer = create(stack.client(), "csv", parameters={"from": day})
    assert answer.status_code == 422
    assert (answer.json()["code"], answer.json()["field"]) == ("INVALID_DATE", "parameters.from")


def test_no_trailing_slash_redirect_carries_a_signed_link_elsewhere(stack):
    client = stack.client()
    detail = wait_state(
        client, create(client, "csv", parameters={"from": "1995-01-01"}).json()["taskId"]
    )
    path, query = detail["downloadUrl"].split("?")
    # A trusted name: no redirect to the path without its slash (it would copy the
    # signed query to whatever host the Host header names).
    answer = stack.client(None).get(f"{path}/?{query}", headers={"Host": "localhost"})
    assert answer.status_code == 404 and "location" not in answer.headers
    # Any other name is not answered at all.
    foreign = stack.client(None).get(f"{path}/?{query}", headers={"Host": "evil.example"})
    assert foreign.status_code == 421 and "location" not in foreign.headers
    assert foreign.json()["code"] == "UNTRUSTED_HOST"


def test_commands_lost_with_an_in_process_transport_are_sent_again_at_start(make_stack):
    first = make_stack(consumer={"enabled": False})
    client = first.client()
    task_id = create(client, "csv", parameters={"from": "1995-01-01"}).json()["taskId"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the publisher sent it into this process's queue
        with first.runtime.engine.connect() as conn:
            rows = repository.outbox_rows(conn, repository.read_task_by_no(conn, task_id).id)
        if rows[0].status == "SENT":
            break
        time.sleep(0.05)
    assert rows[0].status == "SENT"
    first.stop()  # the queue and its command are gone with the process
    second = make_stack()  # same database; the reconciler's stale window is 10 minutes
    detail = wait_state(second.client(), task_id, timeout=30)
    assert detail["state"] == "succeeded"


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_json_numbers_no_parser_agrees_on_are_refused_not_stored(stack, literal):
    # Python's json reads NaN, Infinity and 1e999 (as inf); no other JSON reader does.
    body = b'{"exportType": "ORDERS", "format": "csv", "parameters": {"status": ' + literal + b"}}"
    answer = stack.client().post(
        "/api/v1/exports", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code in (400, 422), answer.text
    assert answer.json()["code"] in ("MALFORMED_JSON", "INVALID_VALUE", "INVALID_TYPE")
    assert stack.client().get("/api/v1/exports").json()["items"] == []
