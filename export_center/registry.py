"""The export-type registry (DESIGN.md "Registry").

Export types come from a YAML or TOML file. Every entry is validated at start-up and
any invalid entry stops start-up with a message naming the key and the rule; a
reload keeps the old registry when the new file is invalid.

An entry::

    ORDERS:
      title: Orders
      provider_url: self            # or http://orders-service:8080 (host allow-listed)
      provider_path: /internal/exports/v1/ORDERS/batches
      required_permission: export:orders:create
      app_scope: PLATFORM           # PLATFORM | MERCHANT
      enabled: true
      max_rows: 5000000             # 1..5,000,000
      batch_size: 1000              # 50..5000
      max_attempts: 3               # 1..5
      batch_timeout_seconds: 120    # optional, 1..3600: overrides provider.batch_timeout_seconds
      parameters:                   # what a create request may carry
        - {name: from, type: date}
        - {name: to, type: date}
        - name: status
          type: enum
          values: [O, F, P]
          title: Order status       # the label of the form field (title_zh: in Chinese)
          value_titles: {O: Open, F: Fulfilled, P: Partly fulfilled}   # optional
          value_titles_zh: {O: 未完成, F: 已完成, P: 部分完成}
      date_range: [from, to]        # from <= to, both inclusive
      columns:                      # optional: the columns, known before any export
        - {key: o_orderkey, title: Order key, title_zh: 订单号, type: INTEGER}
        - {key: o_totalprice, title: Total price, title_zh: 订单总额, type: DECIMAL,
           precision: 15, scale: 2}

``columns`` declares the type's columns (keys unique, contract types, ``precision`` 1..38 and
``scale`` 0..precision on DECIMAL only, titles of at most 200 characters); without them a schema
request (``limit: 0``) asks the provider. The file is written from the columns it answers.
Governance keys (``links``, ``trace_footer``, ``row_ceilings``, ``approval``) are parsed by
:mod:`export_center.link_limits` and :mod:`export_center.governance_rules`.

YAML is read with the YAML 1.2 core schema (:class:`Yaml12Loader`): only ``true`` / ``false``
are booleans and only digits are numbers, so ``NO`` (Norway), ``on``, ``y`` and ``2024-01-01``
stay text, as YAML 1.2 and TOML read them (YAML 1.1 loaders would turn ``NO`` into false). Every
field that holds text must be text in the file: a number, a boolean or a null where text is
expected is refused with a sentence that says to quote it, never converted silently.

``provider_url: self`` means the export center's own base URL (the embedded default mounts the
sample providers there). Which values are read when: permission, ``enabled`` and scope at
creation and manual retry; ``max_attempts`` is copied into the task at creation; provider
address, batch size and max rows at execution, and so is ``batch_timeout_seconds`` (the total
time one batch may take, retries included; unset: ``provider.batch_timeout_seconds``).
"""

from __future__ import annotations

import re
import threading
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from export_center import governance_rules as gov
from export_center.columns import Column, ColumnType
from export_center.link_limits import FileRules, file_rules

__all__ = [
    "ExportType",
    "Yaml12Loader",
    "ParameterSpec",
    "Registry",
    "ShardSpec",
    "RegistryError",
    "load_registry",
    "parse_registry",
]

PATH_PATTERN = re.compile(r"^/internal/exports/v1/([A-Z0-9_]+)/batches$")
PERMISSION_PATTERN = re.compile(r"^[a-z]+:[a-z-]+:[a-z-]+$")
TYPE_PATTERN = re.compile(r"^[A-Z0-9_]{1,64}$")
APP_SCOPES = ("PLATFORM", "MERCHANT")
PARAM_TYPES = ("date", "string", "integer", "enum", "boolean")
_TEXT_KEYS = (
    "title",
    "title_zh",
    "provider_url",
    "provider_path",
    "required_permission",
    "app_scope",
)
_PARAMETER_KEYS = {
    "name",
    "type",
    "required",
    "values",
    "value_titles",
    "value_titles_zh",
    "max_length",
    "title",
    "title_zh",
}
_KNOWN_KEYS = {
    *_TEXT_KEYS,
    "enabled",
    "max_rows",
    "batch_size",
    "max_attempts",
    "batch_timeout_seconds",
    "parameters",
    "date_range",
    "shards",
    "columns",
    *("links", "trace_footer", *gov.GOVERNANCE_KEYS),
}
_SHARD_KEYS = {"by", "max_shards", "parallel"}
_COLUMN_KEYS = {"key", "title", "title_zh", "type", "width", "precision", "scale"}
MAX_COLUMNS = 100
"""Most columns a type may declare (the provider contract's limit)."""
MAX_TITLE_CHARS = 200
"""Longest column title, in characters (either language)."""
RegistryError = gov.RegistryError  # an invalid registry file (key and rule named)


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with the implicit types of the YAML 1.2 core schema.

    Plain scalars resolve to null (``null``, ``Null``, ``NULL``, ``~``, empty), booleans
    (``true``/``false`` in those three spellings), integers (decimal, ``0o``, ``0x``) and
    floats (decimal, exponent, ``.inf``, ``.nan``); everything else is a string. YAML
    1.1's ``yes``/``no``/``on``/``off``/``y``/``n`` booleans, sexagesimal numbers and
    timestamps are strings, as in YAML 1.2.
    """


Yaml12Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
):
    Yaml12Loader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first)
    )


def _construct_yaml12_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    value = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    return int(value, 0) if value[:2] in ("0o", "0x") else int(value)


Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_yaml12_int)


def _text(value: Any, path: str) -> str:
    """``value`` when it is text; otherwise a :class:`RegistryError` saying to quote it.

    Raises:
        RegistryError: ``"<path>: must be text, got the boolean false; quote it ..."``.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        kind = f"the boolean {str(value).lower()}"
    elif isinstance(value, int | float):
        kind = f"the number {value!r}"
    elif value is None:
        kind = "null"
    else:
        raise RegistryError(f"{path}: must be text, got {type(value).__name__}")
    raise RegistryError(
        f'{path}: must be text, got {kind}; quote it in the file (for example "NO", '
        '"1", "on"), so that no YAML or TOML reader turns it into another type'
    )


@dataclass(frozen=True, slots=True)
class ParameterSpec:
    """One parameter a create request may pass for a type.

    Attributes:
        name: the key in ``parameters``.
        type: date, string, integer, enum or boolean.
        required: whether a create must give it.
        values: the allowed values of an enum.
        max_length: longest string value.
        title: the label people read (English; default: the name).
        title_zh: the label in Chinese (default: ``title``).
        value_titles: ``(value, label)`` pairs: what people read for an enum's codes
            (``O`` -> ``Open``); a value without one is shown as it is.
        value_titles_zh: the same in Chinese (default: ``value_titles``).
    """

    name: str
    type: str = "string"
    required: bool = False
    values: tuple[str, ...] = ()
    max_length: int = 256
    title: str = ""
    title_zh: str = ""
    value_titles: tuple[tuple[str, str], ...] = ()
    value_titles_zh: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """How a type splits one export into shards (the registry's ``shards`` mapping).

    Attributes:
        by: the unit of a shard window; only ``day`` (whole days of the type's
            ``date_range`` in the export's time zone, half-open ``[start, end)``).
        max_shards: most shards of one task (1..1,000); a longer range groups
            consecutive days per shard so there are at most this many.
        parallel: shards of one task fetched at once (1..16), further capped by the
            worker setting ``task.shard_parallel_cap``.
    """

    by: str = "day"
    max_shards: int = 64
    parallel: int = 4


@dataclass(frozen=True, slots=True)
class ExportType:
    """One registered export type."""

    code: str
    title: str
    provider_url: str
    provider_path: str
    required_permission: str
    app_scope: str
    enabled: bool
    max_rows: int
    batch_size: int
    max_attempts: int
    parameters: tuple[ParameterSpec, ...] = ()
    date_range: tuple[str, str] | None = None
    batch_timeout_seconds: int | None = None
    title_zh: str = ""
    shards: ShardSpec | None = None
    columns: tuple[Column, ...] = ()  # declared columns (empty: ask with a schema request)
    files: FileRules = FileRules()  # links and trace_footer: export_center.link_limits
    row_ceilings: gov.RowCeilings = gov.RowCeilings()  # per permission (governance_rules)
    approval: gov.ApprovalRule | None = None  # when exports wait for approval

    def base_url(self, self_url: str | None) -> str:
        """The provider base URL, with ``self`` resolved to the service's own URL."""
        if self.provider_url == "self":
            if not self_url:
                raise RegistryError(f"{self.code}.provider_url: 'self' needs a running API")
            return self_url.rstrip("/")
        return self.provider_url.rstrip("/")


@dataclass(slots=True)
class Registry:
    """A validated set of export types; :meth:`replace` swaps it atomically."""

    types: dict[str, ExportType] = field(default_factory=dict)
    source: str = "<empty>"
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, code: str) -> ExportType | None:
        """The type with this code, or None."""
        return self.types.get(code)

    def __iter__(self) -> Iterator[ExportType]:
        return iter(sorted(self.types.values(), key=lambda t: t.code))

    def replace(self, other: Registry) -> None:
        """Take ``other``'s types (after it validated)."""
        with self._lock:
            self.types = dict(other.types)
            self.source = other.source


def _int_in(entry: Mapping[str, Any], code: str, key: str, lo: int, hi: int, default: int) -> int:
    """The integer ``entry[key]`` (``default`` when absent), checked to be in ``lo..hi``."""
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RegistryError(f"{code}.{key}: must be an integer in {lo}..{hi:,}, got {value!r}")
    return value


def _value_titles(raw: Any, values: tuple[str, ...], path: str) -> tuple[tuple[str, str], ...]:
    """``{value: label}`` of an enum, each value one of ``values``, as sorted pairs."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise RegistryError(f"{path}: must be a mapping of value: label")
    if not values:
        raise RegistryError(f"{path}: only an enum's values have titles")
    pairs = []
    for value, label in raw.items():
        key = _text(value, f"{path} key {value!r}")
        if key not in values:
            raise RegistryError(f"{path}: {key!r} is not one of the values {list(values)}")
        pairs.append((key, _text(label, f"{path}.{key}")))
    return tuple(sorted(pairs))


def _parameters(code: str, raw: Any) -> tuple[ParameterSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RegistryError(f"{code}.parameters: must be a list of parameter specs")
    specs = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        path = f"{code}.parameters[{i}]"
        if not isinstance(item, Mapping) or "name" not in item:
            raise RegistryError(f"{path}: needs a 'name'")
        unknown = set(item) - _PARAMETER_KEYS
        if unknown:
            raise RegistryError(f"{path}: unknown keys {sorted(map(str, unknown))}")
        name = _text(item["name"], f"{path}.name")
        if not name:
            raise RegistryError(f"{path}.name: must not be empty")
        if name in names:
            raise RegistryError(f"{path}: parameter {name!r} is declared twice")
        names.add(name)
        ptype = _text(item.get("type", "string"), f"{path}.type")
        if ptype not in PARAM_TYPES:
            raise RegistryError(f"{path}.type: must be one of {PARAM_TYPES}")
        raw_values = item.get("values", [])
        if not isinstance(raw_values, list):
            raise RegistryError(f"{path}.values: must be a list")
        values = tuple(_text(v, f"{path}.values[{j}]") for j, v in enumerate(raw_values))
        if ptype == "enum" and not values:
            raise RegistryError(f"{path}.values: an enum needs values")
        if len(set(values)) != len(values):
            raise RegistryError(f"{path}.values: a value is listed twice")
        required = item.get("required", False)
        if not isinstance(required, bool):
            raise RegistryError(f"{path}.required: must be true or false, got {required!r}")
        value_titles = _value_titles(item.get("value_titles"), values, f"{path}.value_titles")
        value_titles_zh = _value_titles(
            item.get("value_titles_zh"), values, f"{path}.value_titles_zh"
        )
        specs.append(
            ParameterSpec(
                name=name,
                type=ptype,
                required=required,
                values=values,
                max_length=_int_in(item, path, "max_length", 1, 256, 256),
                title=_text(item.get("title", name), f"{path}.title"),
                title_zh=_text(item.get("title_zh", item.get("title", name)), f"{path}.title_zh"),
                value_titles=value_titles,
                value_titles_zh=value_titles_zh or value_titles,
            )
        )
    return tuple(specs)


def _column(path: str, item: Any) -> Column:
    """One entry of a type's ``columns``: ``{key, title, title_zh, type, width,
    precision, scale}`` (``key`` required; ``title`` defaults to the key, ``type`` to
    STRING).

    Raises:
        RegistryError: unknown keys, text that is not text, an unknown type, a width
            outside 1..255, precision/scale on another type than DECIMAL, one without
            the other, precision outside 1..38 or scale outside 0..precision.
    """
    if not isinstance(item, Mapping) or "key" not in item:
        raise RegistryError(f"{path}: needs a 'key'")
    unknown = set(item) - _COLUMN_KEYS
    if unknown:
        raise RegistryError(f"{path}: unknown keys {sorted(map(str, unknown))}")
    key = _text(item["key"], f"{path}.key")
    if not 0 < len(key) <= 128:
        raise RegistryError(f"{path}.key: must be 1..128 characters")
    titles = {}
    for name in ("title", "title_zh"):
        value = item.get(name)
        if value is not None:
            value = _text(value, f"{path}.{name}")
            if not 0 < len(value) <= MAX_TITLE_CHARS:
                raise RegistryError(f"{path}.{name}: must be 1..{MAX_TITLE_CHARS} characters")
        titles[name] = value
    kind = _text(item.get("type", "STRING"), f"{path}.type")
    try:
        ctype = ColumnType(kind)
    except ValueError:
        raise RegistryError(
            f"{path}.type: must be one of {', '.join(ColumnType)}, got {kind!r}"
        ) from None
    width = _int_in(item, path, "width", 1, 255, 1) if item.get("width") is not None else None
    precision = scale = None
    if item.get("precision") is not None or item.get("scale") is not None:
        if ctype is not ColumnType.DECIMAL:
            raise RegistryError(f"{path}: only a DECIMAL column has a precision and a scale")
        if item.get("precision") is None or item.get("scale") is None:
            raise RegistryError(f"{path}: give precision and scale together")
        precision = _int_in(item, path, "precision", 1, 38, 1)
        scale = _int_in(item, path, "scale", 0, precision, 0)
    return Column(
        key=key,
        title=titles["title"] or key,
        type=ctype,
        width=width,
        title_zh=titles["title_zh"],
        precision=precision,
        scale=scale,
    )


def _columns(code: str, raw: Any) -> tuple[Column, ...]:
    """A type's ``columns`` list (absent: none declared).

    Raises:
        RegistryError: not a non-empty list, more than 100, a key declared twice, or an
            invalid column (:func:`_column`).
    """
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise RegistryError(f"{code}.columns: must be a non-empty list of columns")
    if len(raw) > MAX_COLUMNS:
        raise RegistryError(f"{code}.columns: {len(raw)} columns, at most {MAX_COLUMNS}")
    columns: list[Column] = []
    for i, item in enumerate(raw):
        column = _column(f"{code}.columns[{i}]", item)
        if any(c.key == column.key for c in columns):
            raise RegistryError(f"{code}.columns[{i}]: column {column.key!r} is declared twice")
        columns.append(column)
    return tuple(columns)


def _entry(code: str, entry: Any, allowed_hosts: frozenset[str], allow_self: bool) -> ExportType:
    if not TYPE_PATTERN.match(code):
        raise RegistryError(f"{code}: type codes must match ^[A-Z0-9_]{{1,64}}$")
    if not isinstance(entry, Mapping):
        raise RegistryError(f"{code}: must be a mapping of settings")
    unknown = set(entry) - _KNOWN_KEYS
    if unknown:
        raise RegistryError(f"{code}: unknown keys {sorted(unknown)}")
    for key in _TEXT_KEYS:
        if key in entry:
            _text(entry[key], f"{code}.{key}")
    url = entry.get("provider_url")
    if not isinstance(url, str) or not url:
        raise RegistryError(f"{code}.provider_url: required")
    if url == "self":
        if not allow_self:
            raise RegistryError(f"{code}.provider_url: 'self' is only for the embedded default")
    else:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RegistryError(f"{code}.provider_url: must be an http(s) URL, got {url!r}")
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
            raise RegistryError(f"{code}.provider_url: must be a bare base URL, got {url!r}")
        if parts.hostname.lower() not in allowed_hosts:
            raise RegistryError(
                f"{code}.provider_url: host {parts.hostname!r} is not in the allow-list "
                f"(EXPORT_CENTER_PROVIDER_ALLOWED_HOSTS)"
            )
    path = entry.get("provider_path")
    match = PATH_PATTERN.match(path) if isinstance(path, str) else None
    if match is None or not isinstance(path, str):
        raise RegistryError(
            f"{code}.provider_path: must match ^/internal/exports/v1/[A-Z0-9_]+/batches$"
        )
    if match.group(1) != code:
        raise RegistryError(f"{code}.provider_path: names type {match.group(1)}, not {code}")
    permission = entry.get("required_permission")
    if not isinstance(permission, str) or not PERMISSION_PATTERN.match(permission):
        raise RegistryError(
            f"{code}.required_permission: must match ^[a-z]+:[a-z-]+:[a-z-]+$, got {permission!r}"
        )
    scope = entry.get("app_scope")
    if scope not in APP_SCOPES:
        raise RegistryError(f"{code}.app_scope: must be PLATFORM or MERCHANT, got {scope!r}")
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise RegistryError(f"{code}.enabled: must be true or false, got {enabled!r}")
    params = _parameters(code, entry.get("parameters"))
    date_range = entry.get("date_range")
    if date_range is not None:
        names = {p.name for p in params if p.type == "date"}
        if not isinstance(date_range, list) or len(date_range) != 2:
            raise RegistryError(f"{code}.date_range: must name two date parameters")
        first, last = (_text(v, f"{code}.date_range[{j}]") for j, v in enumerate(date_range))
        if not {first, last} <= names or first == last:
            raise RegistryError(f"{code}.date_range: must name two date parameters")
        date_range = (first, last)
    shards = _shards(code, entry.get("shards"), date_range)
    return ExportType(
        code=code,
        title=_text(entry.get("title", code), f"{code}.title"),
        title_zh=_text(entry.get("title_zh", entry.get("title", code)), f"{code}.title_zh"),
        provider_url=url,
        provider_path=match.group(0),  # the whole path (a str, as mypy can see)
        required_permission=permission,
        app_scope=scope,
        enabled=enabled,
        max_rows=_int_in(entry, code, "max_rows", 1, 5_000_000, 1_000_000),
        batch_size=_int_in(entry, code, "batch_size", 50, 5000, 1000),
        max_attempts=_int_in(entry, code, "max_attempts", 1, 5, 3),
        batch_timeout_seconds=(
            _int_in(entry, code, "batch_timeout_seconds", 1, 3600, 60)
            if entry.get("batch_timeout_seconds") is not None
            else None
        ),
        parameters=params,
        date_range=date_range,
        shards=shards,
        columns=_columns(code, entry.get("columns")),
        files=file_rules(code, entry, RegistryError),
        **gov.governance_of(code, entry),
    )


def _shards(code: str, raw: Any, date_range: tuple[str, str] | None) -> ShardSpec | None:
    """The ``shards`` mapping of a type: ``{by: day, max_shards: 64, parallel: 4}``.

    Raises:
        RegistryError: not a mapping, unknown keys, ``by`` other than ``day``, numbers
            out of range, or no ``date_range`` to split.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise RegistryError(f"{code}.shards: must be a mapping (by, max_shards, parallel)")
    unknown = set(raw) - _SHARD_KEYS
    if unknown:
        raise RegistryError(f"{code}.shards: unknown keys {sorted(unknown)}")
    by = raw.get("by", "day")
    if by != "day":
        raise RegistryError(f"{code}.shards.by: only 'day' is supported, got {by!r}")
    if date_range is None:
        raise RegistryError(f"{code}.shards: needs a date_range to split into days")
    return ShardSpec(
        by=by,
        max_shards=_int_in(raw, f"{code}.shards", "max_shards", 1, 1000, 64),
        parallel=_int_in(raw, f"{code}.shards", "parallel", 1, 16, 4),
    )


def parse_registry(
    text: str,
    *,
    source: str,
    allowed_hosts: frozenset[str] | set[str],
    allow_self: bool = False,
) -> Registry:
    """Parse and validate a registry document (YAML, or TOML when ``source`` ends .toml).

    Raises:
        RegistryError: naming the first invalid key and its rule.
    """
    try:
        data = (
            tomllib.loads(text)
            if source.endswith(".toml")
            else yaml.load(text, Loader=Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
        )
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        detail = str(exc).replace('"<unicode string>"', source)
        raise RegistryError(f"{source}: not valid YAML/TOML: {detail}") from None
    if isinstance(data, Mapping) and "export_types" in data:
        data = data["export_types"]
    if not isinstance(data, Mapping) or not data:
        raise RegistryError(f"{source}: expected a mapping of export types")
    hosts = frozenset(h.lower() for h in allowed_hosts)
    types = {}
    for code, entry in data.items():
        name = _text(code, f"{source}: export type code {code!r}")
        types[name] = _entry(name, entry, hosts, allow_self)
    return Registry(types=types, source=source)


def load_registry(
    path: Path, *, allowed_hosts: frozenset[str] | set[str], allow_self: bool = False
) -> Registry:
    """Read and validate a registry file.

    Raises:
        RegistryError: the file is missing, unreadable or invalid.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise RegistryError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_registry(
        text, source=str(path), allowed_hosts=allowed_hosts, allow_self=allow_self
    )
