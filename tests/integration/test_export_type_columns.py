"""``GET /api/v1/export-types/{type}`` over real HTTP on SQLite and MariaDB: the columns
of a type from the registry (CUSTOMERS) and from the provider's schema answer (ORDERS),
titles in both languages; the list's visibility rule; a provider that does not answer is
a 503 with a code, never a 500."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from export_center.api.type_columns import forget_schemas
from export_center.embedded import free_port
from export_center.registry_source import default_registry_path
from providers.customers import CUSTOMERS_COLUMNS
from providers.samples import ORDERS_COLUMNS
from tests.support.helpers import ORDERS_PERMISSION, Stack

CUSTOMERS_PERMISSION = "export:customers:create"
DOWN_PERMISSION = "export:down:create"


def down_registry(directory: Path) -> Path:
    """The sample registry plus DOWN, whose provider address nothing listens on."""
    text = (
        default_registry_path().read_text(encoding="utf-8")
        + f"""
DOWN:
  title: Down
  provider_url: http://127.0.0.1:{free_port()}
  provider_path: /internal/exports/v1/DOWN/batches
  required_permission: {DOWN_PERMISSION}
  app_scope: PLATFORM
"""
    )
    path = directory / "export_types.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def expected(columns: Any) -> list[dict[str, Any]]:
    return [
        {
            "key": c.key,
            "title": c.title,
            "titles": {"en": c.title, "zh-CN": c.title_zh},
            "type": c.type,
            "precision": c.precision,
            "scale": c.scale,
        }
        for c in columns
    ]


@pytest.fixture(autouse=True)
def _fresh_schemas() -> None:
    forget_schemas()


def test_columns_come_from_the_provider_and_from_the_registry_in_both_languages(
    stack: Stack,
) -> None:
    client = stack.client(perms=[ORDERS_PERMISSION, CUSTOMERS_PERMISSION])
    orders = client.get("/api/v1/export-types/ORDERS")
    assert orders.status_code == 200, orders.text
    body = orders.json()
    assert body["columnsSource"] == "provider"
    assert body["columns"] == expected(ORDERS_COLUMNS)
    by_key = {c["key"]: c for c in body["columns"]}
    assert by_key["o_orderkey"]["titles"] == {"en": "Order key", "zh-CN": "订单号"}
    assert (by_key["o_totalprice"]["precision"], by_key["o_totalprice"]["scale"]) == (15, 2)
    listed = {t["exportType"]: t for t in client.get("/api/v1/export-types").json()}
    assert {k: v for k, v in body.items() if k not in ("columns", "columnsSource")} == (
        listed["ORDERS"]
    )
    customers = client.get("/api/v1/export-types/CUSTOMERS").json()
    assert customers["columnsSource"] == "registry"
    assert customers["columns"] == expected(CUSTOMERS_COLUMNS)


def test_a_type_the_caller_may_not_use_is_not_found(stack: Stack) -> None:
    client = stack.client(perms=[ORDERS_PERMISSION])
    for code in ("CUSTOMERS", "NOPE", "orders"):
        answer = client.get(f"/api/v1/export-types/{code}")
        assert answer.status_code == 404, answer.text
        assert answer.json()["code"] == "UNKNOWN_EXPORT_TYPE"
    assert stack.client(user=None).get("/api/v1/export-types/ORDERS").status_code == 401


def test_a_provider_that_does_not_answer_is_a_503_with_a_code(
    make_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    stack = make_stack(
        export_types_file=str(down_registry(tmp_path)), provider={"request_attempts": 1}
    )
    client = stack.client(perms=[ORDERS_PERMISSION, DOWN_PERMISSION])
    answer = client.get("/api/v1/export-types/DOWN")
    assert answer.status_code == 503, answer.text
    assert answer.json()["code"] == "PROVIDER_UNAVAILABLE"
    assert "DOWN provider does not answer" in answer.json()["message"]
    preview = client.post("/api/v1/exports/preview", json={"exportType": "DOWN", "format": "csv"})
    assert preview.status_code == 503, preview.text
    assert preview.json()["code"] == "PROVIDER_UNAVAILABLE"
    # The other types still answer.
    assert client.get("/api/v1/export-types/ORDERS").status_code == 200
