"""The schema answer of the provider contract: Chinese titles, DECIMAL precision and
scale, the chosen keys in a batch request, and a schema request (``limit: 0``) served by
the SDK and read by the client. The client talks to the real SDK through
``httpx.MockTransport`` (no socket); the same over loopback HTTP is in
tests/integration/test_export_type_columns.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from export_center.columns import Column as CenterColumn
from export_center.columns import ColumnType
from export_center.errors import ProviderContractError, ProviderRejected
from export_center.provider_client import ProviderClient, ProviderRequest, Schema
from export_center.registry import RegistryError, parse_registry
from providers.customers import CUSTOMERS_COLUMNS
from providers.samples import ORDERS_COLUMNS
from providers.sdk import BatchRequest, Column, ExportProvider, Page, schema_hash

COLUMNS = [
    Column("id", "Id", "INTEGER", title_zh="编号"),
    Column("amount", "Amount", "DECIMAL", 14, "金额", precision=15, scale=2),
    Column("note", "Note"),
]
TOKEN = "secret-token"
SAMPLE_REGISTRY = Path(__file__).parents[2] / "providers" / "export_types.yaml"


def make_provider(*, estimate: bool = True) -> tuple[ExportProvider, list[BatchRequest]]:
    """A provider whose fetch records its requests; its estimate counts the parameter."""
    seen: list[BatchRequest] = []
    p = ExportProvider("T", COLUMNS, token=TOKEN, secret="signing")

    @p.fetcher
    def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
        seen.append(req)
        return Page(rows=[{"id": 1, "amount": "2.50", "note": "x"}], total_rows=1)

    if estimate:

        @p.estimator
        def count(req: BatchRequest) -> int:
            return int(req.parameters.get("rows", 0))

    return p, seen


def request_body(limit: int, **extra: Any) -> bytes:
    return orjson.dumps(
        {
            "taskId": "preview-1",
            "tenantId": "t",
            "appCode": "PLATFORM",
            "requestedBy": "u",
            "dispatchVersion": 1,
            "parameters": {"rows": 42},
            "limit": limit,
            **extra,
        }
    )


def client_for(answer: Any) -> tuple[ProviderClient, list[dict[str, Any]]]:
    """A client whose transport hands each request to ``answer(body) -> Response``."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        bodies.append(body)
        return answer(request.content, request.headers.get("x-internal-service-token"))

    return (
        ProviderClient(token=TOKEN, attempts=1, transport=httpx.MockTransport(handler)),
        bodies,
    )


def sdk_answer(provider: ExportProvider) -> Any:
    def answer(raw: bytes, token: str | None) -> httpx.Response:
        response = provider.handle(raw, token)
        return httpx.Response(response.status_code, stream=httpx.ByteStream(bytes(response.body)))

    return answer


def raw_answer(body: dict[str, Any], status: int = 200) -> Any:
    return lambda raw, token: httpx.Response(status, stream=httpx.ByteStream(orjson.dumps(body)))


REQUEST = ProviderRequest(
    export_type="T",
    url="http://provider.test/internal/exports/v1/T/batches",
    task_id="preview-1",
    tenant_id="t",
    app_code="PLATFORM",
    requested_by="u",
    dispatch_version=1,
    parameters={"rows": 42},
    limit=1000,
    trace_id="0" * 32,
)


# ---------------------------------------------------------------- the SDK


def test_column_json_carries_the_chinese_title_and_precision_only_when_set() -> None:
    assert COLUMNS[0].as_json() == {
        "key": "id",
        "title": "Id",
        "type": "INTEGER",
        "titleZh": "编号",
    }
    assert COLUMNS[1].as_json() == {
        "key": "amount",
        "title": "Amount",
        "type": "DECIMAL",
        "width": 14,
        "titleZh": "金额",
        "precision": 15,
        "scale": 2,
    }
    assert COLUMNS[2].as_json() == {"key": "note", "title": "Note", "type": "STRING"}


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"type": "STRING", "precision": 10, "scale": 2}, "only DECIMAL"),
        ({"type": "DECIMAL", "precision": 39, "scale": 2}, "precision must be 1..38"),
        ({"type": "DECIMAL", "precision": 5, "scale": 6}, "precision must be 1..38"),
        ({"type": "DECIMAL", "precision": 5}, "together"),
        ({"title_zh": "名" * 201}, "title_zh must be 1..200"),
    ],
)
def test_a_column_with_an_impossible_declaration_is_refused(kwargs: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Column("c", "C", **kwargs)


def test_schema_hash_ignores_chinese_titles_and_precision_and_keeps_its_old_value() -> None:
    # The hashes of the sample types before titleZh/precision/scale existed: a running
    # export of an earlier release must not see SCHEMA_CHANGED after an upgrade.
    assert schema_hash(ORDERS_COLUMNS) == (
        "sha256:4180ae1756b19dd5da8f5523b00d1935e3be7fe8cda45c6b91caa1ebc1c565a1"
    )
    assert schema_hash(CUSTOMERS_COLUMNS) == (
        "sha256:4cce3a539ae0b5097b7efe0db2a2cd75e9dbd8e63a382394e7e4a46a521f7df8"
    )
    retitled = [Column(c.key, c.title, c.type, c.width, "另一个标题") for c in ORDERS_COLUMNS]
    assert schema_hash(retitled) == schema_hash(ORDERS_COLUMNS)
    renamed = [Column("o_orderkey", "Order number", "INTEGER"), *ORDERS_COLUMNS[1:]]
    assert schema_hash(renamed) != schema_hash(ORDERS_COLUMNS)


def test_every_sample_column_has_a_chinese_title_and_prices_have_precision() -> None:
    for column in [*ORDERS_COLUMNS, *CUSTOMERS_COLUMNS]:
        assert column.title_zh and column.title_zh != column.title, column.key
        if column.type == "DECIMAL":
            assert (column.precision, column.scale) == (15, 2), column.key
    titles = {c.key: c.title_zh for c in ORDERS_COLUMNS}
    assert titles["o_orderkey"] == "订单号"
    assert titles["o_totalprice"] == "订单总额"
    assert titles["o_clerk"] == "业务员"


def test_a_schema_request_answers_columns_and_the_estimate_without_calling_fetch() -> None:
    provider, seen = make_provider()
    response = provider.handle(request_body(0), TOKEN)
    assert response.status_code == 200
    body = orjson.loads(bytes(response.body))
    assert body["columns"] == [c.as_json() for c in COLUMNS]
    assert body["totalRows"] == 42
    assert body["rows"] == []
    assert body["hasMore"] is False
    assert body["nextCursor"] is None
    assert body["snapshotToken"] is None
    assert body["schemaHash"] == schema_hash(COLUMNS)
    assert seen == []


def test_a_schema_request_without_an_estimate_hook_answers_null_rows() -> None:
    provider, _ = make_provider(estimate=False)
    body = orjson.loads(bytes(provider.handle(request_body(0), TOKEN).body))
    assert body["totalRows"] is None
    assert len(body["columns"]) == 3


def test_a_schema_request_with_a_cursor_is_refused() -> None:
    provider, _ = make_provider()
    response = provider.handle(request_body(0, cursor="1.abc"), TOKEN)
    assert response.status_code == 422
    assert orjson.loads(bytes(response.body))["field"] == "cursor"


def test_a_schema_request_needs_the_token_like_any_batch() -> None:
    provider, _ = make_provider()
    assert provider.handle(request_body(0), "wrong").status_code == 401


def test_the_chosen_keys_reach_fetch() -> None:
    provider, seen = make_provider()
    assert provider.handle(request_body(5, columns=["amount", "id"]), TOKEN).status_code == 200
    assert provider.handle(request_body(5), TOKEN).status_code == 200
    assert [r.columns for r in seen] == [["amount", "id"], None]


# ---------------------------------------------------------------- the client


def test_the_client_asks_the_schema_with_limit_zero_and_maps_the_columns() -> None:
    provider, _ = make_provider()
    client, bodies = client_for(sdk_answer(provider))
    schema = client.schema(REQUEST, columns=["id"])
    assert schema == Schema(
        columns=[
            CenterColumn("id", "Id", ColumnType.INTEGER, title_zh="编号"),
            CenterColumn(
                "amount", "Amount", ColumnType.DECIMAL, 14, title_zh="金额", precision=15, scale=2
            ),
            CenterColumn("note", "Note", ColumnType.STRING),
        ],
        total_rows=42,
    )
    assert bodies[0]["limit"] == 0
    assert bodies[0]["cursor"] is None and bodies[0]["snapshotToken"] is None
    assert bodies[0]["columns"] == ["id"]


def test_fetch_sends_the_chosen_keys_only_when_given() -> None:
    provider, seen = make_provider()
    client, bodies = client_for(sdk_answer(provider))
    batch = client.fetch(REQUEST, cursor=None, snapshot_token=None, columns=["note", "id"])
    assert batch.rows == [[1, "2.50", "x"]]
    client.fetch(REQUEST, cursor=None, snapshot_token=None)
    assert bodies[0]["columns"] == ["note", "id"]
    assert "columns" not in bodies[1]
    assert [r.columns for r in seen] == [["note", "id"], None]


def test_an_old_provider_that_refuses_limit_zero_is_a_rejection() -> None:
    answer = raw_answer({"code": "INVALID_REQUEST", "message": "limit: >= 1"}, status=422)
    client, _ = client_for(answer)
    with pytest.raises(ProviderRejected):
        client.schema(REQUEST)


def schema_body(columns: Any, rows: Any = ()) -> dict[str, Any]:
    return {"schemaHash": "h", "columns": columns, "rows": list(rows), "hasMore": False}


@pytest.mark.parametrize(
    ("column", "words"),
    [
        ({"key": "a", "type": "STRING", "titleZh": "名" * 201}, "titleZh must be text of 1..200"),
        ({"key": "a", "type": "STRING", "titleZh": ""}, "titleZh must be text"),
        ({"key": "a", "type": "STRING", "titleZh": 5}, "titleZh must be text"),
        ({"key": "a", "type": "DECIMAL", "precision": 39, "scale": 2}, "1..38"),
        ({"key": "a", "type": "DECIMAL", "precision": 0, "scale": 0}, "1..38"),
        ({"key": "a", "type": "DECIMAL", "precision": 10, "scale": 11}, "0..precision"),
        ({"key": "a", "type": "DECIMAL", "precision": 10, "scale": -1}, "0..precision"),
        ({"key": "a", "type": "DECIMAL", "precision": 10}, "0..precision"),
        ({"key": "a", "type": "DECIMAL", "precision": 10.0, "scale": 2}, "an integer"),
        ({"key": "a", "type": "STRING", "precision": 10, "scale": 2}, "only a DECIMAL"),
    ],
)
def test_a_bad_column_declaration_is_a_contract_error(column: Any, words: str) -> None:
    client, _ = client_for(raw_answer(schema_body([column])))
    with pytest.raises(ProviderContractError, match=words):
        client.schema(REQUEST)


def test_a_schema_answer_with_rows_or_without_columns_is_a_contract_error() -> None:
    client, _ = client_for(raw_answer(schema_body([{"key": "a"}], rows=[{"a": 1}])))
    with pytest.raises(ProviderContractError, match="1 rows in a batch of limit 0"):
        client.schema(REQUEST)
    client, _ = client_for(raw_answer({"schemaHash": "h", "rows": [], "hasMore": False}))
    with pytest.raises(ProviderContractError, match="has no columns"):
        client.schema(REQUEST)


def test_null_chinese_title_and_precision_read_as_undeclared() -> None:
    column = {"key": "a", "type": "DECIMAL", "titleZh": None, "precision": None, "scale": None}
    client, _ = client_for(raw_answer(schema_body([column])))
    assert client.schema(REQUEST).columns == [CenterColumn("a", "a", ColumnType.DECIMAL)]


# ---------------------------------------------------------------- the registry

REGISTRY_ENTRY = {
    "provider_url": "http://orders.internal:8080",
    "provider_path": "/internal/exports/v1/ORDERS/batches",
    "required_permission": "export:orders:create",
    "app_scope": "PLATFORM",
}


def registry_columns(columns: Any) -> tuple[CenterColumn, ...]:
    text = yaml.safe_dump({"ORDERS": {**REGISTRY_ENTRY, "columns": columns}}, allow_unicode=True)
    registry = parse_registry(text, source="types.yaml", allowed_hosts={"orders.internal"})
    etype = registry.get("ORDERS")
    assert etype is not None
    return etype.columns


def test_registry_columns_are_read_with_both_titles_and_precision() -> None:
    columns = registry_columns(
        [
            {"key": "o_orderkey", "title": "Order key", "title_zh": "订单号", "type": "INTEGER"},
            {
                "key": "o_totalprice",
                "title": "Total price",
                "type": "DECIMAL",
                "precision": 15,
                "scale": 2,
                "width": 14,
            },
            {"key": "o_comment"},
        ]
    )
    assert columns == (
        CenterColumn("o_orderkey", "Order key", ColumnType.INTEGER, title_zh="订单号"),
        CenterColumn("o_totalprice", "Total price", ColumnType.DECIMAL, 14, precision=15, scale=2),
        CenterColumn("o_comment", "o_comment", ColumnType.STRING),
    )


@pytest.mark.parametrize(
    ("columns", "words"),
    [
        ([{"key": "a"}, {"key": "a"}], r"columns\[1\]: column 'a' is declared twice"),
        ([{"key": "a", "type": "MONEY"}], r"columns\[0\].type: must be one of STRING"),
        ([{"key": "a", "type": "STRING", "precision": 5, "scale": 1}], "only a DECIMAL"),
        ([{"key": "a", "type": "DECIMAL", "precision": 39, "scale": 1}], r"precision: .*1..38"),
        ([{"key": "a", "type": "DECIMAL", "precision": 5, "scale": 6}], r"scale: .*0..5"),
        ([{"key": "a", "type": "DECIMAL", "precision": 5}], "together"),
        ([{"key": "a", "colour": "red"}], "unknown keys"),
        ([{"title": "A"}], "needs a 'key'"),
        ([{"key": 5}], "must be text"),
        ([{"key": "a", "title_zh": "名" * 201}], "1..200 characters"),
        ([], "non-empty list"),
        ({"key": "a"}, "non-empty list"),
        ([{"key": f"c{i}"} for i in range(101)], "at most 100"),
    ],
)
def test_invalid_registry_columns_stop_the_load(columns: Any, words: str) -> None:
    with pytest.raises(RegistryError, match=words):
        registry_columns(columns)


def test_the_sample_registry_declares_the_customers_columns_the_provider_answers() -> None:
    registry = parse_registry(
        SAMPLE_REGISTRY.read_text(encoding="utf-8"),
        source=str(SAMPLE_REGISTRY),
        allowed_hosts=set(),
        allow_self=True,
    )
    customers, orders = registry.get("CUSTOMERS"), registry.get("ORDERS")
    assert customers is not None and orders is not None
    answered = [c.as_json() for c in CUSTOMERS_COLUMNS]
    client, _ = client_for(
        raw_answer({"schemaHash": "h", "columns": answered, "rows": [], "hasMore": False})
    )
    assert list(customers.columns) == client.schema(REQUEST).columns
    assert orders.columns == ()  # ORDERS is asked with a schema request
