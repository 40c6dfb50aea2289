"""A second export type (CUSTOMERS) on the provider SDK, with no change in export_center/."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

from providers import tpch
from tests.conftest import SAMPLE_SCALE
from tests.support.helpers import create, download, read_csv, wait_state

ROOT = Path(__file__).resolve().parents[2]


def test_customers_export_equals_the_source(stack, sample_dir):
    client = stack.client(perms=["export:customers:create"])
    types = client.get("/api/v1/export-types").json()
    assert [t["exportType"] for t in types] == ["CUSTOMERS"]
    answer = create(client, "csv", exportType="CUSTOMERS", parameters={"segment": "BUILDING"})
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"])
    assert detail["state"] == "succeeded", detail
    rows = read_csv(download(client, detail))
    assert rows[0] == [
        "Customer key",
        "Name",
        "Address",
        "Nation",
        "Phone",
        "Account balance",
        "Market segment",
        "Comment",
    ]
    with open(tpch.generate(SAMPLE_SCALE, sample_dir) / "customer.csv", newline="") as fh:
        source = [r for r in csv.DictReader(fh) if r["c_mktsegment"] == "BUILDING"]
    assert len(rows) - 1 == len(source) > 100
    for got, src in zip(rows[1:], source, strict=True):
        assert int(got[0]) == int(src["c_custkey"]) and got[1] == src["c_name"]
        assert Decimal(got[5]) == Decimal(src["c_acctbal"])
        comment = src["c_comment"]
        assert got[7] == ("'" + comment if comment[:1] in "=+-@" else comment)
    # ORDERS is not offered to a token without its permission.
    refused = create(client, "csv")
    assert refused.status_code == 403 and refused.json()["code"] == "PERMISSION_DENIED"


def test_the_second_type_needs_no_code_in_export_center():
    mentions = [p for p in (ROOT / "export_center").rglob("*.py") if "CUSTOMERS" in p.read_text()]
    assert mentions == []
    assert "CUSTOMERS:" in (ROOT / "providers" / "export_types.yaml").read_text()
