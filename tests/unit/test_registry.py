"""Registry validation (DESIGN.md "Registry", seed 002 §10.3): each kind of invalid entry
is refused with a message naming the key and the rule."""

from __future__ import annotations

import pytest
import yaml

from export_center.registry import RegistryError, parse_registry

GOOD = {
    "provider_url": "http://orders.internal:8080",
    "provider_path": "/internal/exports/v1/ORDERS/batches",
    "required_permission": "export:orders:create",
    "app_scope": "PLATFORM",
    "enabled": True,
    "max_rows": 200000,
    "batch_size": 500,
    "max_attempts": 3,
}
HOSTS = {"orders.internal"}


def parse(entry: dict, code: str = "ORDERS", **kw):
    return parse_registry(
        yaml.safe_dump({code: entry}), source="types.yaml", allowed_hosts=HOSTS, **kw
    )


def test_a_good_entry_parses():
    registry = parse(GOOD)
    t = registry.get("ORDERS")
    assert (t.batch_size, t.max_rows, t.max_attempts, t.app_scope) == (500, 200000, 3, "PLATFORM")
    assert t.batch_timeout_seconds is None  # unset: the provider.batch_timeout_seconds setting
    assert parse({**GOOD, "batch_timeout_seconds": 120}).get("ORDERS").batch_timeout_seconds == 120


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"provider_url": "http://evil.example:8080"},
            "ORDERS.provider_url: host 'evil.example' is not in the allow-list",
        ),
        ({"provider_url": "file:///etc/passwd"}, "ORDERS.provider_url: must be an http(s) URL"),
        (
            {"provider_url": "http://orders.internal/x?y=1"},
            "ORDERS.provider_url: must be a bare base URL",
        ),
        ({"provider_url": "self"}, "ORDERS.provider_url: 'self' is only for the embedded default"),
        (
            {"provider_path": "/internal/exports/v1/orders/batches"},
            "ORDERS.provider_path: must match",
        ),
        (
            {"provider_path": "/internal/exports/v1/CUSTOMERS/batches"},
            "ORDERS.provider_path: names type CUSTOMERS, not ORDERS",
        ),
        (
            {"required_permission": "Export:Orders"},
            "ORDERS.required_permission: must match ^[a-z]+:[a-z-]+:[a-z-]+$",
        ),
        ({"app_scope": "ADMIN"}, "ORDERS.app_scope: must be PLATFORM or MERCHANT"),
        ({"enabled": "yes please"}, "ORDERS.enabled: must be true or false"),
        ({"max_rows": 0}, "ORDERS.max_rows: must be an integer in 1..5,000,000"),
        ({"max_rows": 5_000_001}, "ORDERS.max_rows: must be an integer in 1..5,000,000"),
        ({"batch_size": 49}, "ORDERS.batch_size: must be an integer in 50..5,000"),
        ({"batch_size": 5001}, "ORDERS.batch_size: must be an integer in 50..5,000"),
        ({"max_attempts": 0}, "ORDERS.max_attempts: must be an integer in 1..5"),
        ({"max_attempts": 6}, "ORDERS.max_attempts: must be an integer in 1..5"),
        (
            {"batch_timeout_seconds": 0},
            "ORDERS.batch_timeout_seconds: must be an integer in 1..3,600",
        ),
        (
            {"batch_timeout_seconds": 3601},
            "ORDERS.batch_timeout_seconds: must be an integer in 1..3,600",
        ),
        (
            {"batch_timeout_seconds": "60"},
            "ORDERS.batch_timeout_seconds: must be an integer in 1..3,600, got '60'",
        ),
        (
            {"batch_timeout_seconds": True},
            "ORDERS.batch_timeout_seconds: must be an integer in 1..3,600, got True",
        ),
        ({"colour": "red"}, "ORDERS: unknown keys ['colour']"),
        (
            {"parameters": [{"name": "a"}, {"name": "a"}]},
            "ORDERS.parameters[1]: parameter 'a' is declared twice",
        ),
        (
            {"parameters": [{"name": "s", "type": "enum"}]},
            "ORDERS.parameters[0].values: an enum needs values",
        ),
    ],
)
def test_each_invalid_entry_is_refused_naming_key_and_rule(change, message):
    with pytest.raises(RegistryError) as error:
        parse({**GOOD, **change})
    assert message in str(error.value)


def test_required_keys_and_codes():
    for key in ("provider_url", "provider_path", "required_permission", "app_scope"):
        entry = {k: v for k, v in GOOD.items() if k != key}
        with pytest.raises(RegistryError, match=f"ORDERS.{key}"):
            parse(entry)
    with pytest.raises(RegistryError, match="type codes must match"):
        parse({**GOOD, "provider_path": "/internal/exports/v1/ORDERS/batches"}, code="orders")
    with pytest.raises(RegistryError, match="not valid YAML/TOML"):
        parse_registry("ORDERS: [unclosed", source="types.yaml", allowed_hosts=HOSTS)
    with pytest.raises(RegistryError, match="expected a mapping"):
        parse_registry("[]", source="types.yaml", allowed_hosts=HOSTS)


def test_toml_is_accepted():
    text = "[ORDERS]\n" + "\n".join(
        f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, str) else v}"
        for k, v in GOOD.items()
    ).replace("'", '"')
    assert parse_registry(text, source="types.toml", allowed_hosts=HOSTS).get("ORDERS") is not None
