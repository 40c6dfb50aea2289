"""The OpenAPI description a client is generated from: security, examples, enums, and the
error codes each route can actually return."""

from __future__ import annotations

from typing import Any

import pytest

from export_center.api.app import create_app
from export_center.api.openapi import CATALOGUE
from export_center.settings import Settings


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    settings = Settings(
        environment="test", mount_sample_providers=True, data_dir=tmp_path_factory.mktemp("data")
    )
    return create_app(settings).openapi()


def op(schema: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return schema["paths"][path][method]


def codes(operation: dict[str, Any]) -> dict[str, list[str]]:
    out = {}
    for status, answer in operation["responses"].items():
        examples = answer.get("content", {}).get("application/json", {}).get("examples", {})
        if status.startswith("4"):
            out[status] = sorted(example["value"]["code"] for example in examples.values())
    return out


def test_bearer_security_scheme_makes_authorize_work(schema):
    assert schema["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": schema["components"]["securitySchemes"]["HTTPBearer"]["description"],
    }
    for method, path in (
        ("post", "/api/v1/exports"),
        ("get", "/api/v1/exports"),
        ("get", "/api/v1/exports/{task_id}"),
        ("get", "/api/v1/export-types"),
    ):
        assert op(schema, method, path)["security"] == [{"HTTPBearer": []}]
    # The download also answers a signed link without any token.
    assert op(schema, "get", "/api/v1/exports/{task_id}/download")["security"] == [
        {},
        {"HTTPBearer": []},
    ]
    assert "security" not in op(schema, "get", "/healthz")


def test_enums_for_format_state_and_phase(schema):
    models = schema["components"]["schemas"]
    public = models["ExportPublic"]["properties"]
    assert public["format"]["enum"] == ["csv", "xlsx", "jsonl", "parquet"]
    assert public["state"]["enum"] == [
        "queued",
        "running",
        "succeeded",
        "failed",
        "cancelled",
        "expired",
        "awaiting_approval",
        "rejected",
    ]
    assert public["phase"]["enum"] == ["approval", "queued", "fetch", "render", "store"]
    assert models["ExportCreate"]["properties"]["format"]["enum"] == public["format"]["enum"]
    assert models["ExportAccepted"]["properties"]["state"]["enum"] == public["state"]["enum"]


def test_the_file_choices_are_documented_with_enums_and_examples(schema):
    models = schema["components"]["schemas"]
    create = models["ExportCreate"]["properties"]
    (array, _null) = create["columns"]["anyOf"]
    assert array["items"]["anyOf"][0]["type"] == "string"
    assert create["columns"]["examples"]
    options = models["ExportOptions"]
    props = options["properties"]

    def enum(name: str) -> list[str]:
        # The enum is the string branch's of an optional field, never beside the null.
        (string, null) = props[name]["anyOf"]
        assert null == {"type": "null"} and "enum" not in props[name]
        return string["enum"]

    assert enum("language") == ["en", "zh-CN"]
    assert enum("encoding") == ["utf-8-bom", "utf-8", "gb18030"]
    assert enum("delimiter") == [",", ";", "\t", "|"]
    assert enum("lineEnding") == ["crlf", "lf"]
    assert enum("compression") == ["none", "gzip", "zip"]
    assert options["examples"] and models["SplitOptions"]["examples"]
    for name, prop in props.items():
        assert prop.get("description"), name
    for path, method in (
        ("/api/v1/exports/preview", "post"),
        ("/api/v1/exports/{task_id}/manifest", "get"),
        ("/api/v1/export-types/{export_type}", "get"),
    ):
        assert op(schema, method, path)["responses"]["200"], path
    assert models["ManifestPublic"]["examples"][0]["signature"]["alg"] == "HMAC-SHA256"


def test_examples_for_create_detail_and_errors(schema):
    models = schema["components"]["schemas"]
    create = models["ExportCreate"]["examples"][0]
    assert create["exportType"] == "ORDERS" and create["parameters"]["from"] == "1995-09-01"
    assert models["ExportPublic"]["examples"][0]["state"] == "succeeded"
    assert models["ErrorBody"]["examples"][0]["code"] == "INVALID_DATE_RANGE"
    created = op(schema, "post", "/api/v1/exports")["responses"]
    example = created["422"]["content"]["application/json"]["examples"]["INVALID_DATE_RANGE"]
    assert example["value"] == {
        "code": "INVALID_DATE_RANGE",
        "message": "from (2024-02-01) is after to (2024-01-01)",
        "field": "parameters.from",
    }


ADMIN_ACTION = {"400", "401", "403", "404", "413", "415", "422"}
EXPECTED = {
    ("post", "/api/v1/exports"): {"400", "401", "403", "409", "413", "415", "422", "429"},
    ("get", "/api/v1/exports"): {"400", "401", "403", "422"},
    ("get", "/api/v1/me"): {"400", "401"},
    ("get", "/api/v1/exports/{task_id}"): {"400", "401", "404"},
    ("get", "/api/v1/exports/{task_id}/download"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "410",
        "416",
    },
    # 403: the cross-site guard of every POST (CROSS_SITE_REQUEST).
    ("post", "/api/v1/exports/{task_id}/cancel"): {
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
    },
    ("post", "/api/v1/exports/{task_id}/retry"): {"400", "401", "403", "404", "409", "413", "415"},
    ("get", "/api/v1/export-types"): {"400", "401"},
    ("post", "/api/v1/admin/registry/reload"): {"400", "401", "403", "409", "413", "415"},
    ("get", "/api/v1/admin/overview"): {"400", "401", "403"},
    ("get", "/api/v1/admin/tasks"): {"400", "401", "403", "422"},
    ("get", "/api/v1/admin/tasks/{task_id}"): {"400", "401", "403", "404"},
    ("post", "/api/v1/admin/tasks/{task_id}/retry"): ADMIN_ACTION | {"409"},
    ("post", "/api/v1/admin/tasks/{task_id}/cancel"): ADMIN_ACTION | {"409"},
    ("get", "/api/v1/admin/outbox"): {"400", "401", "403", "422"},
    ("get", "/api/v1/admin/dlq"): {"400", "401", "403", "422"},
    ("get", "/api/v1/admin/dlq/{event_id}"): {"400", "401", "403", "404"},
    ("get", "/api/orders/export/{task_id}"): {"400", "401", "404"},
    ("get", "/healthz"): {"400"},
}


@pytest.mark.parametrize(("method", "path"), sorted(EXPECTED))
def test_each_route_declares_only_the_errors_it_can_return(schema, method, path):
    operation = op(schema, method, path)
    declared = codes(operation)
    assert set(declared) == EXPECTED[method, path]
    for status, names in declared.items():
        assert names, status
        assert set(names) <= set(CATALOGUE)
        assert operation["responses"][status]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorBody"
        }
    assert "HTTPValidationError" not in str(operation)


def test_no_generic_validation_schema_is_left(schema):
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert "ValidationError" not in schema["components"]["schemas"]


def test_specific_codes_sit_where_they_belong(schema):
    assert codes(op(schema, "get", "/api/v1/exports/{task_id}/download"))["403"] == [
        "LINK_EXPIRED",
        "LINK_INVALID",
        "LINK_NOT_YOURS",
    ]
    assert codes(op(schema, "post", "/api/v1/exports"))["429"] == [
        "QUOTA_EXCEEDED",
        "TOO_MANY_ACTIVE_TASKS",
        "TOO_MANY_ACTIVE_TASKS_FOR_TYPE",
    ]
    assert "TASK_NOT_FOUND" not in str(op(schema, "get", "/api/v1/exports"))
    assert "TOKEN_WRONG_KEY" in codes(op(schema, "get", "/api/v1/exports"))["401"]


def test_download_200_is_a_file_and_create_declares_the_replayed_200(schema):
    download = op(schema, "get", "/api/v1/exports/{task_id}/download")["responses"]
    content = download["200"]["content"]
    binary = {"schema": {"type": "string", "format": "binary"}}
    assert content["text/csv"] == binary
    assert content["application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"] == binary
    assert "Location" in download["307"]["headers"]
    create = op(schema, "post", "/api/v1/exports")["responses"]
    assert set(create) >= {"200", "202"}
    assert create["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ExportAccepted"
    }
    assert set(create["200"]["headers"]) == {"Idempotent-Replayed", "Duplicate-Of-Active-Task"}


def test_every_route_declares_the_query_parameter_errors(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            names = codes(operation).get("400", [])
            assert {"UNKNOWN_PARAMETER", "REPEATED_PARAMETER"} <= set(names), (method, path)
    create = codes(op(schema, "post", "/api/v1/exports"))["400"]
    assert {"MALFORMED_JSON", "DUPLICATE_KEY", "UNKNOWN_PARAMETER"} <= set(create)


def test_the_detail_documents_who_cancelled_and_the_last_retry(schema):
    models = schema["components"]["schemas"]
    public = models["ExportPublic"]["properties"]
    for name in ("cancelledBy", "lastRetry", "retryUnlikelyToHelp", "downloadExpiresAt"):
        assert public[name].get("description"), name
    assert "finished before the cancel arrived" in public["cancelRequested"]["description"]
    assert "copied link" in public["downloadExpiresAt"]["description"]
    assert public["cancelledBy"]["anyOf"][0] == {"$ref": "#/components/schemas/ActorPublic"}
    assert public["lastRetry"]["anyOf"][0] == {"$ref": "#/components/schemas/RetryPublic"}
    actor = models["ActorPublic"]["properties"]
    assert actor["role"]["enum"] == ["owner", "administrator", "operator", "system"]
    assert set(models["RetryPublic"]["required"]) == {"at", "by"}
    example = models["ExportPublic"]["examples"][0]
    assert example["retryUnlikelyToHelp"] is False and example["cancelRequested"] is False


def test_a_failing_download_declares_the_page_a_browser_gets(schema):
    download = op(schema, "get", "/api/v1/exports/{task_id}/download")["responses"]
    for status in ("401", "403", "404", "409", "410", "503"):
        assert download[status]["content"]["text/html"] == {"schema": {"type": "string"}}
        assert "Sec-Fetch-Mode: navigate" in download[status]["description"], status
    assert (
        "text/html"
        not in op(schema, "get", "/api/v1/exports/{task_id}")["responses"]["404"]["content"]
    )
