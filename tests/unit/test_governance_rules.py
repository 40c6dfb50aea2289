"""The registry's governance keys: row_ceilings and approval (issue 25 items 3 and 5)."""

from __future__ import annotations

import pytest

from export_center.registry import RegistryError, parse_registry

BASE = """
ORDERS:
  provider_url: self
  provider_path: /internal/exports/v1/ORDERS/batches
  required_permission: export:orders:create
  app_scope: PLATFORM
"""


def parse(extra: str):
    return parse_registry(BASE + extra, source="t.yaml", allowed_hosts=set(), allow_self=True)


def test_the_strongest_ceiling_held_applies():
    etype = parse(
        "  row_ceilings:\n    export:orders:create: 100000\n    export:orders:bulk: 5000000\n"
    ).types["ORDERS"]
    ceilings = etype.row_ceilings
    assert ceilings.for_permissions(["export:orders:create"]) == 100000
    assert ceilings.for_permissions(["export:orders:create", "export:orders:bulk"]) == 5000000
    assert ceilings.for_permissions(["export:orders:view"]) is None
    assert parse("").types["ORDERS"].row_ceilings.for_permissions(["x:y:z"]) is None


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("  row_ceilings: 5\n", "ORDERS.row_ceilings: must be a mapping"),
        ("  row_ceilings:\n    Orders: 5\n", "must be a permission"),
        ("  row_ceilings:\n    export:orders:create: 0\n", "1..5,000,000"),
        ("  row_ceilings:\n    export:orders:create: true\n", "1..5,000,000"),
        ("  approval: {always: true}\n", "ORDERS.approval.approver_permission: required"),
        ("  approval: {approver_permission: export:orders:approve}\n", "needs a rule"),
        ("  approval: {always: yes, approver_permission: a:b:c}\n", "true or false"),
        ("  approval: {rows_over: -1, approver_permission: a:b:c}\n", "0..5,000,000"),
        ("  approval: {columns: [], approver_permission: a:b:c}\n", "non-empty list"),
        ("  approval: {columns: [1], approver_permission: a:b:c}\n", "column key"),
        ("  approval: {often: true, approver_permission: a:b:c}\n", "unknown keys ['often']"),
        ("  approval: {always: true, approver_permission: Boss}\n", "must be a permission"),
        (
            "  approval: {rows_over: 1, when: {rows_over: 2}, approver_permission: a:b:c}\n",
            "give each rule once",
        ),
    ],
)
def test_invalid_governance_keys_name_the_key_and_rule(extra, fragment):
    with pytest.raises(RegistryError) as caught:
        parse(extra)
    assert fragment in str(caught.value)


def test_approval_rules_both_spellings_and_their_reasons():
    flat = parse(
        "  approval: {rows_over: 100, columns: [phone],"
        " approver_permission: export:orders:approve}\n"
    ).types["ORDERS"]
    nested = parse(
        "  approval:\n    when: {rows_over: 100, columns: [phone]}\n"
        "    approver_permission: export:orders:approve\n"
    ).types["ORDERS"]
    assert flat.approval == nested.approval
    rule = flat.approval
    assert rule is not None and rule.approver_permission == "export:orders:approve"
    assert rule.reasons(100, ["id"]) == []
    assert rule.reasons(101, ["id"]) == ["about 101 rows, more than 100"]
    assert rule.reasons(None, ["id"]) == ["the row count is unknown (approval above 100)"]
    assert rule.reasons(5, ["id", "phone"]) == ["it writes the column(s) phone"]
    assert rule.reasons(5, None) == ["it writes the column(s) phone"]  # all columns
    always = parse("  approval: {always: true, approver_permission: a:b:c}\n").types["ORDERS"]
    assert always.approval is not None and always.approval.reasons(0, ["id"]) == [
        "every export of this type needs approval"
    ]
