"""Per-type rules of download links and traceable files, from the registry.

An export type may say, in the registry file::

    ORDERS:
      links: {max_uses: 3, minutes: 30}   # each link serves its file 3 times, for 30 min
      trace_footer: true                  # XLSX sheets print a footer naming task and user

``links.max_uses`` (1..1000) counts the answers that serve the file (the file, a range,
or a presigned hop; a refusal is not a use); ``links.minutes`` (1..10080) shortens the
lifetime of links signed for the type (never lengthens ``api.download_link_ttl_seconds``).
Both are optional; without them a link serves its file until it expires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["FileRules", "LinkLimits", "file_rules", "link_limits_of", "link_ttl"]

_LINK_KEYS = {"max_uses", "minutes"}


@dataclass(frozen=True, slots=True)
class LinkLimits:
    """How many times (``max_uses``) and how long (``minutes``) a link of a type works;
    None: no limit beyond the link's expiry."""

    max_uses: int | None = None
    minutes: int | None = None


@dataclass(frozen=True, slots=True)
class FileRules:
    """A type's link limits and whether its XLSX files print a trace footer."""

    links: LinkLimits = LinkLimits()
    trace_footer: bool = False


class _HasRules(Protocol):
    @property
    def files(self) -> FileRules: ...


def _bounded(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{where}: must be a whole number from {low} to {high}, got {value!r}")
    return value


def file_rules(
    code: str, entry: Mapping[str, Any], error: type[Exception] = ValueError
) -> FileRules:
    """Read ``links`` and ``trace_footer`` of the registry entry of type ``code``.

    Raises:
        error: (the registry's error) a sentence naming the key, for unknown keys or
            values out of range.
    """
    try:
        return _file_rules(code, entry)
    except ValueError as exc:
        raise error(str(exc)) from None


def _file_rules(code: str, entry: Mapping[str, Any]) -> FileRules:
    links = entry.get("links")
    limits = LinkLimits()
    if links is not None:
        if not isinstance(links, Mapping):
            raise ValueError(f"{code}.links: must be a mapping (max_uses, minutes)")
        unknown = set(links) - _LINK_KEYS
        if unknown:
            raise ValueError(f"{code}.links: unknown keys {sorted(map(str, unknown))}")
        uses, minutes = links.get("max_uses"), links.get("minutes")
        limits = LinkLimits(
            max_uses=None if uses is None else _bounded(uses, f"{code}.links.max_uses", 1, 1000),
            minutes=(
                None if minutes is None else _bounded(minutes, f"{code}.links.minutes", 1, 10080)
            ),
        )
    footer = entry.get("trace_footer", False)
    if not isinstance(footer, bool):
        raise ValueError(f"{code}.trace_footer: must be true or false, got {footer!r}")
    return FileRules(links=limits, trace_footer=footer)


def link_limits_of(export_type: _HasRules | None) -> LinkLimits:
    """The link limits of a registered type (none for an unknown type)."""
    return LinkLimits() if export_type is None else export_type.files.links


def link_ttl(ttl_seconds: int, export_type: _HasRules | None) -> int:
    """The lifetime (s) of a link signed now for a task of ``export_type``: the
    configured ``ttl_seconds``, cut to the type's ``links.minutes``."""
    minutes = link_limits_of(export_type).minutes
    return ttl_seconds if minutes is None else min(ttl_seconds, minutes * 60)
