"""The manifest's HMAC-SHA256 signature and its control totals (no I/O)."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import hmac
import json
from decimal import Decimal

import pytest

from export_center.columns import Column, ColumnType
from export_center.packaging.manifest import (
    ArchiveEntry,
    FileEntry,
    build_manifest,
    canonical_json,
    check_signature,
    key_id,
    sign_manifest,
)
from export_center.packaging.totals import ControlTotals

KEY = "k" * 40
COLUMNS = [
    Column("id", "Id", ColumnType.INTEGER),
    Column("amount", "Amount", ColumnType.DECIMAL),
    Column("day", "Day", ColumnType.DATE),
    Column("at", "At", ColumnType.DATETIME),
    Column("name", "名称", ColumnType.STRING),
]
UTC = dt.UTC
SHANGHAI = dt.timezone(dt.timedelta(hours=8))


def _totals() -> ControlTotals:
    totals = ControlTotals(COLUMNS)
    totals.add(
        [
            [1, 2, None],
            ["1.10", Decimal("2.2"), None],
            [dt.date(2024, 1, 2), None, dt.date(2023, 12, 31)],
            [
                dt.datetime(2024, 1, 1, 7, 0, tzinfo=SHANGHAI),  # 2023-12-31T23:00Z
                dt.datetime(2024, 1, 1, 0, 0, tzinfo=UTC),
                dt.datetime(2024, 1, 1, 0, 0, 0, 5, tzinfo=UTC),
            ],
            ["a", "b", "c"],
        ]
    )
    return totals


def _manifest() -> dict[str, object]:
    body = build_manifest(
        task_id="exp_01",
        export_type="ORDERS",
        parameters={"from": "2024-01-01"},
        file_format="csv",
        options={"compression": "zip"},
        time_zone="Asia/Shanghai",
        columns=COLUMNS,
        files=[FileEntry("orders-part-0001.csv", 3, 120, "ab" * 32)],
        archive=ArchiveEntry("orders.zip", 99, "cd" * 32),
        control_totals=_totals().as_json(),
        snapshot_token="snap",
        created_at=dt.datetime(2024, 1, 1, tzinfo=UTC),
        finished_at=dt.datetime(2024, 1, 1, 0, 1, tzinfo=UTC),
    )
    return sign_manifest(body, KEY)


def test_totals_are_exact_text_and_instants():
    totals = _totals().as_json()
    assert totals["rowCount"] == 3
    cols = totals["columns"]
    assert cols["id"] == {"sum": "3", "nulls": 1}
    assert cols["amount"] == {"sum": "3.30", "nulls": 1}
    assert cols["day"] == {"min": "2023-12-31", "max": "2024-01-02", "nulls": 1}
    assert cols["at"] == {
        "min": "2023-12-31T23:00:00Z",
        "max": "2024-01-01T00:00:00.000005Z",
        "nulls": 0,
    }
    assert "name" not in cols


def test_sums_never_round():
    totals = ControlTotals([Column("amount", "A", ColumnType.DECIMAL)])
    big = "9" * 40 + ".000000000000000000001"
    totals.add([[big, big, "-0.000000000000000000001"]])
    # 81 significant digits: the default decimal context (28) would round this sum
    expected = "1" + "9" * 39 + "8.000000000000000000001"
    assert totals.as_json()["columns"]["amount"]["sum"] == expected
    with pytest.raises(ValueError):
        totals.add([[0.1]])  # a float is never summed


def test_merge_equals_one_pass_and_dict_round_trips():
    rows = [[1, 2, 3, 4], ["1.5", None, "2.25", "-1"], [None] * 4, [None] * 4, ["x"] * 4]
    whole = ControlTotals(COLUMNS)
    whole.add(rows)
    first, second = ControlTotals(COLUMNS), ControlTotals(COLUMNS)
    first.add([c[:1] for c in rows])
    second.add([c[1:] for c in rows])
    stored = json.loads(json.dumps(second.to_dict()))
    merged = first.merge(ControlTotals.from_dict(stored))
    assert merged == whole
    assert merged.as_json()["columns"]["amount"] == {"sum": "2.75", "nulls": 1}
    assert merged.as_json()["columns"]["day"] == {"min": None, "max": None, "nulls": 4}
    with pytest.raises(ValueError):
        ControlTotals.from_dict({"rows": 1})


def test_signature_is_hmac_of_the_canonical_json():
    manifest = _manifest()
    signature = manifest["signature"]
    assert isinstance(signature, dict)
    assert signature["alg"] == "HMAC-SHA256"
    assert signature["keyId"] == hashlib.sha256(KEY.encode()).hexdigest()[:8] == key_id(KEY)
    unsigned = {k: v for k, v in manifest.items() if k != "signature"}
    text = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(manifest) == text.encode("utf-8")
    assert "名称" in text  # non-ASCII as itself
    expected = hmac.new(KEY.encode(), text.encode("utf-8"), hashlib.sha256).hexdigest()
    assert signature["value"] == expected
    assert check_signature(manifest, KEY)
    # the JSON text a client receives checks the same
    assert check_signature(json.loads(json.dumps(manifest, indent=2)), KEY)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda m: m["files"][0].__setitem__("rows", 4),
        lambda m: m["files"][0].__setitem__("sha256", "00" * 32),
        lambda m: m["controlTotals"]["columns"]["amount"].__setitem__("sum", "3.31"),
        lambda m: m.__setitem__("totalRows", 2),
        lambda m: m.__setitem__("extra", True),
        lambda m: m["signature"].__setitem__("alg", "none"),
        lambda m: m["signature"].__setitem__("value", "0" * 64),
        lambda m: m.pop("signature"),
    ],
)
def test_any_change_breaks_the_signature(tamper):
    manifest = copy.deepcopy(_manifest())
    tamper(manifest)
    assert not check_signature(manifest, KEY)


def test_another_key_is_refused():
    manifest = _manifest()
    assert not check_signature(manifest, "x" * 40)
    assert not check_signature(manifest, "")
    with pytest.raises(ValueError):
        sign_manifest({"a": 1}, "")


def test_build_refuses_totals_that_disagree_with_the_files():
    with pytest.raises(ValueError, match="control totals count 3 rows"):
        build_manifest(
            task_id="t",
            export_type="T",
            parameters={},
            file_format="csv",
            options={},
            time_zone="UTC",
            columns=COLUMNS,
            files=[FileEntry("a.csv", 2, 1, "0" * 64)],
            archive=None,
            control_totals=_totals().as_json(),
            snapshot_token=None,
            created_at=None,
            finished_at=None,
        )
