"""The file a user asked for, end to end over real HTTP on SQLite and MariaDB: chosen
columns in the chosen order with renamed headers and the header language, single-stream
and sharded, read back with real readers; bad choices refused with a code and a field
before a task exists; an idempotency key reused with other columns is a conflict naming
them."""

from __future__ import annotations

from typing import Any

import pytest

from export_center import repository
from providers.samples import ORDERS_COLUMNS
from tests.support.helpers import Stack, create, download, read_csv, read_xlsx, wait_state

SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-03"}
CHOSEN: list[Any] = [
    {"key": "o_totalprice", "title": "Amount"},
    "o_orderkey",
    "o_orderdate",
]


def _rows(fmt: str, data: bytes) -> list[list[Any]]:
    return read_csv(data) if fmt == "csv" else read_xlsx(data)


def _full(stack: Stack, fmt: str, parameters: dict[str, Any]) -> list[list[Any]]:
    client = stack.client()
    answer = create(client, fmt, parameters=parameters, taskName="all columns")
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"])
    assert detail["state"] == "succeeded", detail
    return _rows(fmt, download(client, detail))


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_chosen_columns_come_in_the_chosen_order_with_their_titles(
    stack: Stack, fmt: str, sharded: bool
) -> None:
    # ORDERS with a date range runs in day shards; without, as one stream.
    parameters = SEPTEMBER if sharded else {}
    full = _full(stack, fmt, parameters)
    header = full[0]
    index = {title: i for i, title in enumerate(header)}
    client = stack.client()
    answer = create(client, fmt, parameters=parameters, columns=CHOSEN, taskName="chosen")
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"])
    assert detail["state"] == "succeeded", detail
    rows = _rows(fmt, download(client, detail))
    assert rows[0] == ["Amount", "Order key", "Order date"]
    picks = [index["Total price"], index["Order key"], index["Order date"]]
    assert rows[1:] == [[row[i] for i in picks] for row in full[1:]]
    assert len(rows) == len(full) > 1
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, detail["taskId"])
    assert task is not None and task.file_spec_json is not None
    assert '"key":"o_totalprice"' in task.file_spec_json


def test_the_header_language_follows_the_option_and_the_locale(stack: Stack) -> None:
    client = stack.client()
    english_rows = _full(stack, "csv", {})
    english = english_rows[0]
    assert english == [c.title for c in ORDERS_COLUMNS]
    for how in ({"options": {"language": "zh-CN"}}, {}):
        headers = {"accept-language": "zh-CN,zh;q=0.9,en;q=0.5"} if not how else {}
        body = {
            "exportType": "ORDERS",
            "format": "csv",
            "taskName": "中文表头",
            "parameters": {},
            **how,
        }
        answer = client.post("/api/v1/exports", json=body, headers=headers)
        assert answer.status_code == 202, answer.text
        detail = wait_state(client, answer.json()["taskId"])
        assert detail["state"] == "succeeded", detail
        rows = read_csv(download(client, detail))
        assert rows[0] == [c.title_zh for c in ORDERS_COLUMNS]
        assert len(rows[0]) == len(english)
        # Data cells never change with the language.
        assert rows[1:] == english_rows[1:]


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"columns": ["o_orderkey", "o_orderkey"]}, "DUPLICATE_COLUMN", "columns[1]"),
        ({"columns": [{"key": "o_orderkey", "x": 1}]}, "UNKNOWN_FIELD", "columns[0]"),
        ({"columns": ["o_price"]}, "UNKNOWN_COLUMN", "columns[0]"),
        ({"columns": [{"key": "o_orderkey", "title": ""}]}, "INVALID_VALUE", "columns[0]"),
        ({"columns": [7]}, "INVALID_VALUE", "columns[0]"),
        ({"options": {"encoding": "latin-1"}}, "INVALID_OPTION", "options.encoding"),
        ({"options": {"delimiter": "::"}}, "INVALID_OPTION", "options.delimiter"),
        ({"options": {"lineEnding": "cr"}}, "INVALID_OPTION", "options.lineEnding"),
        ({"options": {"language": "fr"}}, "INVALID_OPTION", "options.language"),
        ({"options": {"compression": "rar"}}, "INVALID_OPTION", "options.compression"),
        ({"options": {"colour": "red"}}, "UNKNOWN_FIELD", "options.colour"),
        ({"options": {"header": "no"}}, "INVALID_VALUE", "options.header"),
        (
            {"format": "xlsx", "options": {"header": False}},
            "OPTION_NOT_SUPPORTED",
            "options.header",
        ),
        (
            {"format": "xlsx", "options": {"compression": "gzip"}},
            "OPTION_NOT_SUPPORTED",
            "options.compression",
        ),
        (
            {"options": {"split": {"maxRowsPerFile": 0}}},
            "INVALID_SPLIT",
            "options.split.maxRowsPerFile",
        ),
        (
            {"options": {"split": {"maxRowsPerFile": 10**12}}},
            "INVALID_SPLIT",
            "options.split.maxRowsPerFile",
        ),
        (
            {"options": {"split": {"maxBytesPerFile": 10}}},
            "INVALID_SPLIT",
            "options.split.maxBytesPerFile",
        ),
        ({"options": {"split": {}}}, "INVALID_SPLIT", "options.split"),
        ({"options": []}, "INVALID_TYPE", "options"),
        ({"columns": []}, "INVALID_VALUE", "columns"),
    ],
)
def test_bad_choices_are_refused_before_a_task_exists(
    stack: Stack, body: dict[str, Any], code: str, field: str | None
) -> None:
    client = stack.client()
    body = dict(body)  # the parameters are shared by the SQLite and MariaDB runs
    fmt = body.pop("format", "csv")
    answer = create(client, fmt, **body)
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert error["code"] == code, error
    assert error["message"]
    if field is not None:
        assert error["field"] == field
    assert client.get("/api/v1/exports").json()["items"] == []


def test_an_idempotency_key_reused_with_other_columns_is_a_conflict(stack: Stack) -> None:
    client = stack.client()
    first = create(client, requestId="k-1", columns=["o_orderkey"])
    assert first.status_code == 202, first.text
    again = create(client, requestId="k-1", columns=["o_orderkey"])
    assert again.status_code == 200 and again.json()["taskId"] == first.json()["taskId"]
    other = create(client, requestId="k-1", columns=["o_custkey"])
    assert other.status_code == 409, other.text
    assert other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert "columns and options" in other.json()["message"]
    # The same export with other columns is not a duplicate of the active one.
    plain = create(client, columns=["o_custkey", "o_orderkey"])
    assert plain.status_code == 202, plain.text
    assert plain.json()["taskId"] != first.json()["taskId"]
