"""Registry validation (DESIGN.md "Registry"): each kind of invalid entry
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


NORDIC = """
ORDERS:
  provider_url: http://orders.internal:8080
  provider_path: /internal/exports/v1/ORDERS/batches
  required_permission: export:orders:create
  app_scope: PLATFORM
  parameters:
    - {name: country, type: enum, values: [SE, NO, DK, FI]}
    - {name: switch, type: enum, values: [on, off, yes, n, Y, ~x]}
    - {name: day, type: enum, values: [2024-01-01, "1:20"]}
"""


def test_yaml_reads_yaml_1_2_so_no_stays_norway():
    from export_center.api.params import validate_parameters

    etype = parse_registry(NORDIC, source="types.yaml", allowed_hosts=HOSTS).get("ORDERS")
    specs = {p.name: p.values for p in etype.parameters}
    assert specs == {
        "country": ("SE", "NO", "DK", "FI"),
        "switch": ("on", "off", "yes", "n", "Y", "~x"),
        "day": ("2024-01-01", "1:20"),
    }
    assert validate_parameters(etype, {"country": "NO"}) == {"country": "NO"}
    with pytest.raises(Exception, match="must be one of SE, NO, DK, FI"):
        validate_parameters(etype, {"country": "False"})


# Every field that holds text, and a YAML value of another type for it.
TEXT_FIELDS = [
    ("title: 1", "ORDERS.title", "the number 1"),
    ("title: true", "ORDERS.title", "the boolean true"),
    ("title: ~", "ORDERS.title", "null"),
    ("provider_url: 8080", "ORDERS.provider_url", "the number 8080"),
    ("provider_path: 1.5", "ORDERS.provider_path", "the number 1.5"),
    ("required_permission: false", "ORDERS.required_permission", "the boolean false"),
    ("app_scope: 0x10", "ORDERS.app_scope", "the number 16"),
    ("parameters: [{name: 1}]", "ORDERS.parameters[0].name", "the number 1"),
    ("parameters: [{name: x, type: true}]", "ORDERS.parameters[0].type", "the boolean true"),
    (
        "parameters: [{name: x, type: enum, values: [SE, false]}]",
        "ORDERS.parameters[0].values[1]",
        "the boolean false",
    ),
    (
        "parameters: [{name: x, type: enum, values: [1, 2]}]",
        "ORDERS.parameters[0].values[0]",
        "the number 1",
    ),
    (
        "parameters: [{name: x, type: enum, values: [a, ~]}]",
        "ORDERS.parameters[0].values[1]",
        "null",
    ),
    (
        "parameters: [{name: a, type: date}, {name: b, type: date}]\n  date_range: [a, 2]",
        "ORDERS.date_range[1]",
        "the number 2",
    ),
]


@pytest.mark.parametrize(("line", "path", "kind"), TEXT_FIELDS)
def test_every_text_field_refuses_other_yaml_types_saying_to_quote(line, path, kind):
    base = {
        "provider_url": "http://orders.internal:8080",
        "provider_path": "/internal/exports/v1/ORDERS/batches",
        "required_permission": "export:orders:create",
        "app_scope": "PLATFORM",
    }
    key = line.split(":")[0]
    body = "".join(f"  {k}: {v}\n" for k, v in base.items() if k != key)
    with pytest.raises(RegistryError) as error:
        parse_registry(f"ORDERS:\n{body}  {line}\n", source="types.yaml", allowed_hosts=HOSTS)
    message = str(error.value)
    assert message.startswith(f"{path}: must be text, got {kind}"), message
    assert "quote it" in message


def test_toml_values_of_the_wrong_type_are_refused_too():
    text = (
        '[ORDERS]\nprovider_url = "http://orders.internal:8080"\n'
        'provider_path = "/internal/exports/v1/ORDERS/batches"\n'
        'required_permission = "export:orders:create"\napp_scope = "PLATFORM"\n'
        '[[ORDERS.parameters]]\nname = "country"\ntype = "enum"\nvalues = ["SE", false]\n'
    )
    with pytest.raises(RegistryError, match=r"ORDERS.parameters\[0\].values\[1\]: must be text"):
        parse_registry(text, source="types.toml", allowed_hosts=HOSTS)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("enabled: yes", "ORDERS.enabled: must be true or false, got 'yes'"),
        ("parameters: [{name: x, required: yes}]", "ORDERS.parameters[0].required: must be true"),
        (
            "parameters: [{name: x, max_lenght: 5}]",
            "ORDERS.parameters[0]: unknown keys ['max_lenght']",
        ),
        ("parameters: [{name: x, max_length: 0}]", "ORDERS.parameters[0].max_length: must be an"),
        ("parameters: [{name: x, type: enum, values: [a, a]}]", "a value is listed twice"),
        (
            "parameters: [{name: x, type: enum, values: SE}]",
            "ORDERS.parameters[0].values: must be a list",
        ),
    ],
)
def test_yaml_1_1_words_and_misspelt_keys_are_refused(line, message):
    body = (
        "ORDERS:\n  provider_url: http://orders.internal:8080\n"
        "  provider_path: /internal/exports/v1/ORDERS/batches\n"
        "  required_permission: export:orders:create\n  app_scope: PLATFORM\n"
    )
    with pytest.raises(RegistryError) as error:
        parse_registry(body + f"  {line}\n", source="types.yaml", allowed_hosts=HOSTS)
    assert message in str(error.value)


def test_enum_values_may_have_titles_in_english_and_chinese():
    status = {
        "name": "status",
        "type": "enum",
        "values": ["O", "F", "NO"],
        "value_titles": {"O": "Open", "NO": "Norway"},
    }
    etype = parse({**GOOD, "parameters": [status]}).get("ORDERS")
    assert etype is not None
    [spec] = etype.parameters
    assert spec.value_titles == (("NO", "Norway"), ("O", "Open"))
    assert spec.value_titles_zh == spec.value_titles  # Chinese falls back to English
    chinese = {**status, "value_titles_zh": {"O": "未完成"}}
    [spec] = parse({**GOOD, "parameters": [chinese]}).get("ORDERS").parameters
    assert spec.value_titles_zh == (("O", "未完成"),)


@pytest.mark.parametrize(
    ("param", "message"),
    [
        (
            {"name": "s", "type": "enum", "values": ["O"], "value_titles": {"X": "Ex"}},
            "ORDERS.parameters[0].value_titles: 'X' is not one of the values ['O']",
        ),
        (
            {"name": "s", "type": "string", "value_titles": {"X": "Ex"}},
            "ORDERS.parameters[0].value_titles: only an enum's values have titles",
        ),
        (
            {"name": "s", "type": "enum", "values": ["O"], "value_titles_zh": ["O"]},
            "ORDERS.parameters[0].value_titles_zh: must be a mapping of value: label",
        ),
        (
            {"name": "s", "type": "enum", "values": ["O"], "value_titles": {"O": 1}},
            "ORDERS.parameters[0].value_titles.O: must be text",
        ),
    ],
)
def test_value_titles_are_checked(param, message):
    with pytest.raises(RegistryError) as error:
        parse({**GOOD, "parameters": [param]})
    assert message in str(error.value)


def test_registry_check_command_says_to_quote(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from export_center.cli import app

    monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EXPORT_CENTER_PROVIDER_ALLOWED_HOSTS", '["orders.internal"]')
    good = tmp_path / "good.yaml"
    good.write_text(NORDIC)
    result = CliRunner().invoke(app, ["registry", "check", str(good)])
    assert result.exit_code == 0, result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(NORDIC.replace("[SE, NO, DK, FI]", "[SE, NO, false]"))
    result = CliRunner().invoke(app, ["registry", "check", str(bad)])
    assert result.exit_code == 1
    assert "ORDERS.parameters[0].values[2]: must be text, got the boolean false; quote it" in (
        " ".join(result.output.split())
    )
