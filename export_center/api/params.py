"""Validation of create-request parameters against the registry (DESIGN.md "API").

General limits: at most 20 keys, 4 KB of JSON, strings of at most 256
characters, nesting depth at most 2. Then the type's own spec: known names, value
types, enums, required names, and ``date_range`` (from <= to, both inclusive).
Each violation raises :class:`ValidationFailed` naming the field path.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache
from typing import Any
from zoneinfo import available_timezones

import orjson

from export_center.errors import ValidationFailed
from export_center.registry import ExportType, ParameterSpec

__all__ = ["validate_parameters", "validate_time_zone"]

_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

MAX_KEYS = 20
MAX_JSON_BYTES = 4096
MAX_STRING = 256
MAX_DEPTH = 2


def _depth_and_strings(value: Any, path: str, depth: int) -> None:
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise ValidationFailed(
                f"parameters may nest at most {MAX_DEPTH} levels",
                code="PARAMETERS_TOO_DEEP",
                field=path,
            )
        for key, item in value.items():
            _depth_and_strings(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise ValidationFailed(
                f"parameters may nest at most {MAX_DEPTH} levels",
                code="PARAMETERS_TOO_DEEP",
                field=path,
            )
        for i, item in enumerate(value):
            _depth_and_strings(item, f"{path}[{i}]", depth + 1)
    elif isinstance(value, str) and len(value) > MAX_STRING:
        raise ValidationFailed(
            f"strings in parameters may have at most {MAX_STRING} characters",
            code="PARAMETER_TOO_LONG",
            field=path,
        )


def _check_value(spec: ParameterSpec, value: Any, path: str) -> Any:
    if value is None:
        return None
    if spec.type == "date":
        if not isinstance(value, str):
            raise ValidationFailed(
                f"{spec.name} must be a date YYYY-MM-DD", code="INVALID_DATE", field=path
            )
        try:
            if not _ISO_DAY.fullmatch(value):  # no ISO week dates ("1995-W02-1")
                raise ValueError
            return date.fromisoformat(value)
        except ValueError:
            raise ValidationFailed(
                f"{spec.name} must be a date YYYY-MM-DD, got {value!r}",
                code="INVALID_DATE",
                field=path,
            ) from None
    if spec.type == "enum":
        if not isinstance(value, str) or value not in spec.values:
            raise ValidationFailed(
                f"{spec.name} must be one of {', '.join(spec.values)}",
                code="INVALID_VALUE",
                field=path,
            )
        return value
    if spec.type == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationFailed(
                f"{spec.name} must be an integer", code="INVALID_VALUE", field=path
            )
        return value
    if spec.type == "boolean":
        if not isinstance(value, bool):
            raise ValidationFailed(
                f"{spec.name} must be true or false", code="INVALID_VALUE", field=path
            )
        return value
    if not isinstance(value, str):
        raise ValidationFailed(f"{spec.name} must be a string", code="INVALID_VALUE", field=path)
    if len(value) > spec.max_length:
        raise ValidationFailed(
            f"{spec.name} may have at most {spec.max_length} characters",
            code="PARAMETER_TOO_LONG",
            field=path,
        )
    return value


def validate_parameters(etype: ExportType, parameters: dict[str, Any]) -> dict[str, Any]:
    """Check ``parameters`` for ``etype``; returns them with null values dropped.

    Raises:
        ValidationFailed: with a code and the field path (``parameters.from``).
    """
    if len(parameters) > MAX_KEYS:
        raise ValidationFailed(
            f"parameters may have at most {MAX_KEYS} keys",
            code="TOO_MANY_PARAMETERS",
            field="parameters",
        )
    if len(orjson.dumps(parameters)) > MAX_JSON_BYTES:
        raise ValidationFailed(
            "parameters may take at most 4 KB of JSON",
            code="PARAMETERS_TOO_LARGE",
            field="parameters",
        )
    _depth_and_strings(parameters, "parameters", 0)
    specs = {spec.name: spec for spec in etype.parameters}
    parsed: dict[str, Any] = {}
    for name, value in parameters.items():
        spec = specs.get(name)
        if spec is None:
            raise ValidationFailed(
                f"{etype.code} has no parameter {name!r}"
                + (f"; known: {', '.join(sorted(specs))}" if specs else ""),
                code="UNKNOWN_PARAMETER",
                field=f"parameters.{name}",
            )
        parsed[name] = _check_value(spec, value, f"parameters.{name}")
    for spec in etype.parameters:
        if spec.required and parsed.get(spec.name) is None:
            raise ValidationFailed(
                f"{spec.name} is required for {etype.code}",
                code="MISSING_FIELD",
                field=f"parameters.{spec.name}",
            )
    if etype.date_range:
        lo, hi = (parsed.get(name) for name in etype.date_range)
        if lo is not None and hi is not None and lo > hi:
            raise ValidationFailed(
                f"{etype.date_range[0]} ({lo}) is after {etype.date_range[1]} ({hi})",
                code="INVALID_DATE_RANGE",
                field=f"parameters.{etype.date_range[0]}",
            )
    return {k: v for k, v in parameters.items() if v is not None}


#: Names in the zone database that are not zones a person lives in: the machine's own
#: zone (it differs from host to host), the POSIX default rules, a placeholder.
_NOT_PLACES = frozenset({"localtime", "posixrules", "Factory"})


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(
        zone
        for zone in available_timezones()
        if zone not in _NOT_PLACES and not zone.startswith(("posix/", "right/"))
    )


def validate_time_zone(value: str | None, default: str) -> str:
    """The export's time zone: ``value`` when it is an IANA zone name, else ``default``.

    Names are exact (``Asia/Shanghai``; ``asia/shanghai`` and offsets such as ``+08:00``
    are refused), so one zone is always stored under one name.

    Raises:
        ValidationFailed: ``INVALID_TIME_ZONE`` on field ``timeZone``.
    """
    if value is None:
        return default
    if value not in _zones():
        raise ValidationFailed(
            f"timeZone must be an IANA time zone name such as Asia/Shanghai or UTC, got {value!r}",
            code="INVALID_TIME_ZONE",
            field="timeZone",
        )
    return value
