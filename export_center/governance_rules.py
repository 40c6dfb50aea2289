"""The governance keys of a registry entry: ``row_ceilings`` and ``approval``.

An entry may carry::

    ORDERS:
      ...
      row_ceilings:                       # per permission: most rows one export may have
        export:orders:create: 100000
        export:orders:bulk: 5000000
      approval:                           # exports that wait for a person's sign-off
        rows_over: 100000                 # or always: true, or columns: [phone, address]
        approver_permission: export:orders:approve

``row_ceilings`` maps permissions (``^[a-z]+:[a-z-]+:[a-z-]+$``) to 1..5,000,000 rows;
the ceiling of a caller is the highest among the permissions they hold
(:meth:`RowCeilings.for_permissions`); a caller holding none of them has no ceiling (the
type's ``max_rows`` still applies).

``approval`` takes ``always: true``, ``rows_over: N`` (0..5,000,000: an estimate above N,
or no estimate, needs approval) and ``columns: [keys]`` (a request writing one of them
needs approval), alone or together (any rule that matches asks), directly or nested
under ``when:`` (``approval: {when: {rows_over, columns}, approver_permission}``);
``approver_permission`` is required. The parsers raise :class:`RegistryError` with the key
and the rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GOVERNANCE_KEYS",
    "ApprovalRule",
    "RegistryError",
    "RowCeilings",
    "governance_of",
    "parse_approval",
    "parse_row_ceilings",
    "reason_text",
]

_PERMISSION = re.compile(r"^[a-z]+:[a-z-]+:[a-z-]+$")
_MAX_ROWS = 5_000_000
_RULE_KEYS = {"always", "rows_over", "columns"}
GOVERNANCE_KEYS = ("row_ceilings", "approval")
"""The registry entry keys this module reads."""


class RegistryError(ValueError):
    """An invalid registry file; the message names the key and the broken rule."""


@dataclass(frozen=True, slots=True)
class RowCeilings:
    """A type's ``row_ceilings``: ``(permission, rows)`` pairs, sorted by permission."""

    pairs: tuple[tuple[str, int], ...] = ()

    def for_permissions(self, held: Iterable[str]) -> int | None:
        """The ceiling of a caller holding ``held``: the highest ceiling among the
        permissions they hold, None when they hold none of them (or none is set)."""
        have = set(held)
        found = [rows for permission, rows in self.pairs if permission in have]
        return max(found) if found else None


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """When an export of a type waits for approval, and who may decide.

    Attributes:
        approver_permission: the permission an approver holds (same tenant and app).
        always: every export waits.
        rows_over: an estimate above this many rows (or no estimate) waits; None: no
            row rule.
        columns: a request that writes one of these column keys waits (all columns
            are written when the request chooses none).
    """

    approver_permission: str
    always: bool = False
    rows_over: int | None = None
    columns: tuple[str, ...] = ()

    def matches(self, estimate: int | None, written: Sequence[str] | None) -> list[dict[str, Any]]:
        """The rules that make an export wait, as JSON-able facts (the page words them
        in its language): ``{"rule": "always"}``, ``{"rule": "rows_over", "limit": N,
        "estimate": E}`` (E None: unknown), ``{"rule": "columns", "columns": [...]}``;
        empty: it does not need approval.

        Args:
            estimate: the provider's row estimate (None: unknown).
            written: the column keys the file writes; None: every column (then any
                approval column matches).
        """
        found: list[dict[str, Any]] = []
        if self.always:
            found.append({"rule": "always"})
        if self.rows_over is not None and (estimate is None or estimate > self.rows_over):
            found.append({"rule": "rows_over", "limit": self.rows_over, "estimate": estimate})
        if self.columns:
            hit = (
                list(self.columns) if written is None else [c for c in written if c in self.columns]
            )
            if hit:
                found.append({"rule": "columns", "columns": hit})
        return found

    def reasons(self, estimate: int | None, written: Sequence[str] | None) -> list[str]:
        """:meth:`matches` as short English clauses (:func:`reason_text`)."""
        return [reason_text(m) for m in self.matches(estimate, written)]


def reason_text(match: Mapping[str, Any]) -> str:
    """One fact of :meth:`ApprovalRule.matches` as an English clause."""
    if match.get("rule") == "always":
        return "every export of this type needs approval"
    if match.get("rule") == "rows_over":
        limit = int(match.get("limit") or 0)
        if match.get("estimate") is None:
            return f"the row count is unknown (approval above {limit:,})"
        return f"about {int(match['estimate']):,} rows, more than {limit:,}"
    return f"it writes the column(s) {', '.join(map(str, match.get('columns') or []))}"


def _rows(value: Any, path: str, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= _MAX_ROWS:
        raise RegistryError(f"{path}: must be an integer in {lo}..{_MAX_ROWS:,}, got {value!r}")
    return value


def _permission(value: Any, path: str) -> str:
    if not isinstance(value, str) or not _PERMISSION.match(value):
        raise RegistryError(
            f"{path}: must be a permission like export:orders:create, got {value!r}"
        )
    return value


def parse_row_ceilings(code: str, raw: Any) -> RowCeilings:
    """``row_ceilings`` of entry ``code`` (absent: none).

    Raises:
        RegistryError: not a non-empty mapping, a key that is not a permission, a value
            outside 1..5,000,000.
    """
    if raw is None:
        return RowCeilings()
    if not isinstance(raw, Mapping) or not raw:
        raise RegistryError(f"{code}.row_ceilings: must be a mapping of permission: rows")
    pairs = [
        (
            _permission(key, f"{code}.row_ceilings key {key!r}"),
            _rows(value, f"{code}.row_ceilings.{key}", 1),
        )
        for key, value in raw.items()
    ]
    return RowCeilings(tuple(sorted(pairs)))


def parse_approval(code: str, raw: Any) -> ApprovalRule | None:
    """``approval`` of entry ``code`` (absent: none).

    Raises:
        RegistryError: not a mapping, unknown keys, no rule, ``always`` not true/false,
            ``rows_over`` outside 0..5,000,000, ``columns`` not a non-empty list of text,
            ``approver_permission`` missing or not a permission.
    """
    if raw is None:
        return None
    path = f"{code}.approval"
    if not isinstance(raw, Mapping):
        raise RegistryError(
            f"{path}: must be a mapping (always, rows_over, columns, approver_permission)"
        )
    rules: dict[Any, Any] = {k: v for k, v in raw.items() if k != "when"}
    when = raw.get("when")
    if when is not None:
        if not isinstance(when, Mapping):
            raise RegistryError(f"{path}.when: must be a mapping (always, rows_over, columns)")
        if set(when) & set(rules):
            raise RegistryError(f"{path}: give each rule once, in when: or beside it")
        rules.update(when)
    unknown = set(rules) - _RULE_KEYS - {"approver_permission"}
    if unknown:
        raise RegistryError(f"{path}: unknown keys {sorted(map(str, unknown))}")
    always = rules.get("always", False)
    if not isinstance(always, bool):
        raise RegistryError(f"{path}.always: must be true or false, got {always!r}")
    rows_over = rules.get("rows_over")
    if rows_over is not None:
        rows_over = _rows(rows_over, f"{path}.rows_over", 0)
    columns = rules.get("columns", [])
    if not isinstance(columns, list) or ("columns" in rules and not columns):
        raise RegistryError(f"{path}.columns: must be a non-empty list of column keys")
    for i, key in enumerate(columns):
        if not isinstance(key, str) or not key:
            raise RegistryError(f"{path}.columns[{i}]: must be a column key (text)")
    if not always and rows_over is None and not columns:
        raise RegistryError(f"{path}: needs a rule: always: true, rows_over: N or columns: [...]")
    if "approver_permission" not in rules:
        raise RegistryError(f"{path}.approver_permission: required")
    return ApprovalRule(
        approver_permission=_permission(
            rules["approver_permission"], f"{path}.approver_permission"
        ),
        always=always,
        rows_over=rows_over,
        columns=tuple(columns),
    )


def governance_of(code: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Both governance keys of entry ``code``, as :class:`ExportType` fields
    (``row_ceilings``, ``approval``).

    Raises:
        RegistryError: as :func:`parse_row_ceilings` and :func:`parse_approval`.
    """
    return {
        "row_ceilings": parse_row_ceilings(code, entry.get("row_ceilings")),
        "approval": parse_approval(code, entry.get("approval")),
    }
