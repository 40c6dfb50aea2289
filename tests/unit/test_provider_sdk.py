"""The provider SDK without I/O: token, validation, signed cursors and snapshots,
exact DECIMAL/DATE serialization, one error shape (DESIGN.md "Provider contract")."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import orjson
import pytest

from providers.sdk import BatchRequest, Column, ExportProvider, Page, ProviderFault, schema_hash

COLUMNS = [
    Column("id", "Id", "INTEGER"),
    Column("amount", "Amount", "DECIMAL"),
    Column("day", "Day", "DATE"),
    Column("at", "At", "DATETIME"),
]


def provider(ttl: int = 3600, rows=None) -> ExportProvider:
    p = ExportProvider(
        "T", COLUMNS, token="secret-token", secret="signing", snapshot_ttl_seconds=ttl
    )

    @p.fetcher
    def fetch(req: BatchRequest, cursor, snapshot) -> Page:
        if req.parameters.get("fail"):
            raise ProviderFault(400, "BAD_FILTER", "fail was asked for", "parameters.fail")
        after = cursor or 0
        data = (
            rows
            if rows is not None
            else [
                {
                    "id": i,
                    "amount": Decimal("0.00000001") * i,
                    "day": dt.date(2024, 2, 29),
                    "at": dt.datetime(2024, 3, 1, 12, 0, 0, 500000),
                }
                for i in range(after + 1, after + 3)
            ]
        )
        return Page(
            rows=data, next_cursor=after + 2, has_more=after < 4, snapshot={"max": 6}, total_rows=6
        )

    return p


def body(cursor=None, snapshot=None, task="exp_A", **extra) -> bytes:
    return orjson.dumps(
        {
            "taskId": task,
            "tenantId": "t",
            "appCode": "PLATFORM",
            "requestedBy": "u",
            "dispatchVersion": 1,
            "parameters": extra,
            "cursor": cursor,
            "snapshotToken": snapshot,
            "limit": 100,
        }
    )


def call(p: ExportProvider, raw: bytes, token: str | None = "secret-token"):
    response = p.handle(raw, token)
    return response.status_code, orjson.loads(response.body)


def test_token_is_required():
    for token in (None, "", "secret-token-2", "SECRET-TOKEN"):
        status, answer = call(provider(), body(), token)
        assert status == 401 and answer["code"] == "UNAUTHORIZED"


def test_first_batch_has_columns_hash_and_exact_values():
    status, answer = call(provider(), body())
    assert status == 200
    assert answer["schemaHash"] == schema_hash(COLUMNS) and answer["schemaHash"].startswith(
        "sha256:"
    )
    assert [c["key"] for c in answer["columns"]] == ["id", "amount", "day", "at"]
    assert answer["rowFormat"] == "array"
    assert answer["rows"][0] == [1, "0.00000001", "2024-02-29", "2024-03-01T12:00:00.500000"]
    assert answer["hasMore"] is True and answer["totalRows"] == 6


def test_row_mappings_travel_as_arrays_in_column_order():
    """Mappings with exactly the declared keys (in any order) become arrays; sequences
    and pre-serialized fragments pass as they are."""
    rows = [
        {"at": None, "day": dt.date(2024, 1, 2), "amount": Decimal("1.50"), "id": 7},
        {"id": 8, "amount": Decimal("-0.10"), "day": None, "at": None},
    ]
    _, answer = call(provider(rows=rows), body())
    assert answer["rowFormat"] == "array"
    assert answer["rows"] == [[7, "1.50", "2024-01-02", None], [8, "-0.10", None, None]]
    sequences = [(9, Decimal("2"), None, None), [10, "3.25", "2024-02-01", None]]
    _, answer = call(provider(rows=sequences), body())
    assert answer["rows"] == [[9, "2", None, None], [10, "3.25", "2024-02-01", None]]
    fragments = [orjson.Fragment(b'[11,"4.00",null,null]')]
    _, answer = call(provider(rows=fragments), body())
    assert answer["rows"] == [[11, "4.00", None, None]]


@pytest.mark.parametrize(
    "rows",
    [
        [{"id": 1, "amount": "1", "day": None, "at": None, "x": 1}],  # an undeclared key
        [{"id": 1, "amount": "1", "day": None, "at": None}, {"id": 2}],  # missing in some
        [{"id": 1, "customerAmount": "1", "day": None, "at": None}],  # a renamed key
    ],
)
def test_mappings_without_exactly_the_declared_keys_travel_as_objects(rows):
    """So the export center still names a renamed or undeclared key (no silent empty
    column)."""
    _, answer = call(provider(rows=rows), body())
    assert answer["rowFormat"] == "object" and answer["rows"] == rows


def test_object_row_format_sends_the_mappings():
    p = ExportProvider("T", COLUMNS, token="secret-token", secret="s", row_format="object")
    p.fetcher(lambda req, cursor, snapshot: Page(rows=[{"id": 1, "amount": Decimal("1.0")}]))
    _, answer = call(p, body())
    assert answer["rowFormat"] == "object" and answer["rows"] == [{"id": 1, "amount": "1.0"}]
    with pytest.raises(ValueError, match="row_format"):
        ExportProvider("T", COLUMNS, token="t", secret="s", row_format="csv")


def test_cursor_and_snapshot_are_signed_and_bound_to_the_task():
    p = provider()
    _, first = call(p, body())
    cursor, snapshot = first["nextCursor"], first["snapshotToken"]
    status, second = call(p, body(cursor, snapshot))
    assert status == 200 and "columns" not in second and second["rows"][0][0] == 3
    forged = str(int(cursor.split(".")[0]) + 100) + "." + cursor.split(".")[1]
    assert call(p, body(forged, snapshot))[1]["code"] == "INVALID_CURSOR"
    assert call(p, body(cursor, snapshot, task="exp_B"))[1]["code"] == "INVALID_CURSOR"
    assert call(p, body(cursor, snapshot[:-2] + "xx"))[1]["code"] == "INVALID_SNAPSHOT"


def test_an_expired_snapshot_answers_410():
    p = provider(ttl=-1)
    _, first = call(p, body())
    status, answer = call(p, body(first["nextCursor"], first["snapshotToken"]))
    assert status == 410 and answer["code"] == "SNAPSHOT_EXPIRED"


def test_errors_have_one_shape_4xx_for_the_caller_5xx_for_the_provider():
    status, answer = call(provider(), body(fail=True))
    assert status == 400 and answer == {
        "code": "BAD_FILTER",
        "message": "fail was asked for",
        "field": "parameters.fail",
    }
    status, answer = call(provider(), b'{"taskId": 1}')
    assert status == 422 and answer["code"] == "INVALID_REQUEST" and answer["field"]
    broken = provider(rows=[{"id": 1, "amount": Decimal("NaN")}])
    status, answer = call(broken, body())
    assert status == 500 and answer["code"] == "PROVIDER_ERROR"


def test_a_database_timeout_and_a_page_too_large_have_their_own_answers():
    def answer(fault: ProviderFault):
        p = ExportProvider("T", COLUMNS, token="secret-token", secret="signing")

        @p.fetcher
        def fetch(req: BatchRequest, cursor, snapshot) -> Page:
            raise fault

        return call(p, body())

    assert answer(ProviderFault.db_timeout()) == (
        503,
        {"code": "DB_TIMEOUT", "message": "the database query timed out", "field": None},
    )
    assert answer(ProviderFault.page_too_large(100)) == (
        413,
        {"code": "PAGE_TOO_LARGE", "message": "a page of 100 rows is too large", "field": None},
    )
    assert answer(ProviderFault.page_too_large(100, "rows of 2 MB"))[1]["message"] == (
        "rows of 2 MB"
    )


def test_unknown_column_types_are_refused_at_declaration():
    with pytest.raises(ValueError, match="type must be one of"):
        ExportProvider("T", [Column("x", "X", "MONEY")], token="t", secret="s")


def test_constant_time_compare_is_used(monkeypatch):
    import hmac as real

    calls = []
    original = real.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr("providers.sdk.hmac.compare_digest", spy)
    call(provider(), body(), "wrong")
    assert calls and calls[0][1] == b"secret-token"


def _failing(error: Exception) -> ExportProvider:
    p = ExportProvider("T", COLUMNS, token="secret-token", secret="signing")

    @p.fetcher
    def fetch(req: BatchRequest, cursor, snapshot) -> Page:
        if req.parameters.get("fail"):
            raise error
        return Page(rows=[], has_more=False)

    return p


def _database_errors() -> list[Exception]:
    import sqlite3

    import pymysql
    from sqlalchemy.exc import OperationalError

    refused = pymysql.err.OperationalError(2003, "Can't connect to MySQL server")
    return [
        refused,
        pymysql.err.InterfaceError(0, ""),
        OperationalError("SELECT 1", None, refused),
        sqlite3.OperationalError("database is locked"),
    ]


@pytest.mark.parametrize("error", _database_errors(), ids=lambda e: type(e).__module__)
def test_a_database_that_does_not_answer_is_503_db_timeout(error, caplog):
    caplog.set_level("INFO", logger="providers.sdk")
    p = _failing(error)
    answers = [p.handle(body(fail=True), "secret-token") for _ in range(3)]
    assert [a.status_code for a in answers] == [503] * 3
    assert orjson.loads(answers[0].body)["code"] == "DB_TIMEOUT"
    # One line when the outage starts, one when a request works again; no traceback.
    assert p.handle(body(), "secret-token").status_code == 200
    lines = [r for r in caplog.records if r.name == "providers.sdk"]
    assert [r.levelname for r in lines] == ["WARNING", "INFO"], [r.getMessage() for r in lines]
    assert "does not answer" in lines[0].getMessage() and not lines[0].exc_info
    assert "answers again" in lines[1].getMessage()


@pytest.mark.parametrize(
    "error",
    [
        __import__("sqlite3").OperationalError("no such table: orders"),
        __import__("sqlite3").OperationalError('near "SELEC": syntax error'),
        ValueError("a bug"),
    ],
    ids=["no-such-table", "syntax", "bug"],
)
def test_a_wrong_statement_or_a_bug_stays_a_500(error):
    answer = _failing(error).handle(body(fail=True), "secret-token")
    assert answer.status_code == 500
    assert orjson.loads(answer.body)["code"] == "PROVIDER_ERROR"


def _asgi_post(app, headers: list[tuple[bytes, bytes]], chunks: list[bytes]):
    """POST to the SDK router in memory; returns (status, body, how many chunks were read)."""
    import asyncio

    sent: list[dict] = []
    read = 0

    async def receive():
        nonlocal read
        if read < len(chunks):
            read += 1
            return {
                "type": "http.request",
                "body": chunks[read - 1],
                "more_body": read < len(chunks),
            }
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/internal/exports/v1/T/batches",
        "raw_path": b"/internal/exports/v1/T/batches",
        "query_string": b"",
        "headers": headers,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
    }
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, orjson.loads(payload), read


def _app():
    from fastapi import FastAPI

    app = FastAPI()
    app.include_router(provider().router())
    return app


def test_the_token_is_compared_before_one_byte_of_the_body_is_read():
    chunks = [b"x" * 65536] * 100  # 6.4 MB that would be read
    for headers in ([], [(b"x-internal-service-token", b"wrong")]):
        status, answer, read = _asgi_post(_app(), headers, chunks)
        assert (status, answer["code"], read) == (401, "UNAUTHORIZED", 0)


def test_the_body_is_capped_while_it_is_read():
    from providers.sdk import MAX_BATCH_REQUEST_BYTES

    token = [(b"x-internal-service-token", b"secret-token")]
    declared = token + [(b"content-length", str(MAX_BATCH_REQUEST_BYTES + 1).encode())]
    status, answer, read = _asgi_post(_app(), declared, [b"{}"])
    assert (status, answer["code"], read) == (413, "REQUEST_TOO_LARGE", 0)
    chunks = [b" " * 8192] * 100  # chunked: no Content-Length
    status, answer, read = _asgi_post(_app(), token, chunks)
    assert (status, answer["code"]) == (413, "REQUEST_TOO_LARGE")
    assert read == MAX_BATCH_REQUEST_BYTES // 8192 + 1  # stopped at the cap, not the end
    status, answer, _ = _asgi_post(_app(), token, [body()[:10], body()[10:]])
    assert status == 200 and answer["rows"]
