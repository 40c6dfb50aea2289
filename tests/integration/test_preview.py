"""``POST /api/v1/exports/preview`` over real HTTP on SQLite and MariaDB: the estimate
and the first rows equal a real export of the same body, the header language and
renames, parts and warnings, the create's 422 codes, and no task is created."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from export_center.api.preview import Preview
from export_center.api.preview_render import render_preview
from export_center.api.type_columns import forget_schemas
from export_center.columns import Column, ColumnType
from export_center.filespec import MAX_PARTS, FileSpec, Split
from export_center.registry_source import default_registry_path
from export_center.writers.formats import FORMATS
from tests.support.helpers import Stack, create, download, read_csv, wait_state

SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}
ALL_DATES = {"from": "1992-01-01", "to": "1998-12-31"}


@pytest.fixture(autouse=True)
def _fresh_schemas() -> None:
    forget_schemas()


def preview(client: Any, fmt: str = "csv", **body: Any) -> Any:
    payload = {"exportType": "ORDERS", "format": fmt, "parameters": SEPTEMBER, **body}
    return client.post("/api/v1/exports/preview", json=payload)


def test_the_estimate_and_first_rows_equal_a_real_export(stack: Stack) -> None:
    client = stack.client()
    chosen = ["o_orderkey", {"key": "o_totalprice", "title": "Amount"}, "o_orderdate", "c_name"]
    answer = preview(client, columns=chosen, options={"language": "zh-CN"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [c["title"] for c in body["columns"]] == ["订单号", "Amount", "下单日期", "客户名称"]
    assert [c["type"] for c in body["columns"]] == ["INTEGER", "DECIMAL", "DATE", "STRING"]
    created = create(client, parameters=SEPTEMBER)
    assert created.status_code == 202, created.text
    detail = wait_state(client, created.json()["taskId"])
    assert detail["state"] == "succeeded", detail
    records = read_csv(download(client, detail))
    header, rows = records[0], records[1:]
    assert body["estimatedRows"] == len(rows) > 20
    at = [header.index(t) for t in ("Order key", "Total price", "Order date", "Customer name")]
    assert body["sampleRows"] == [[row[i] for i in at] for row in rows[:20]]
    assert body["files"] == 1 and body["sheets"] == 1 and body["warnings"] == []
    # the head and 20 rows scaled to the whole: within 25 % of the real file's bytes
    # of these four columns
    real = sum(len(",".join(row[i] for i in at)) + 2 for row in rows)
    assert abs(body["estimatedBytes"] - real) < 0.25 * real
    # English headers by default (Accept-Language), Chinese by the locale
    english = preview(client, columns=["o_orderkey"]).json()
    assert english["columns"][0]["title"] == "Order key"
    zh = client.post(
        "/api/v1/exports/preview",
        json={"exportType": "ORDERS", "format": "csv", "parameters": SEPTEMBER},
        headers={"accept-language": "zh-CN,zh;q=0.9"},
    ).json()
    assert zh["columns"][0]["title"] == "订单号" and len(zh["columns"]) == 12


@pytest.mark.parametrize("fmt", ["xlsx", "jsonl", "parquet"])
@pytest.mark.parametrize("options", [{}, {"compression": "zip"}, {"split": {"maxRowsPerFile": 7}}])
def test_every_format_previews_the_cells_csv_shows(
    stack: Stack, fmt: str, options: dict[str, Any]
) -> None:
    # Every column (a DECIMAL among them), read back by each format's own reader.
    client = stack.client()
    csv_rows = preview(client).json()
    answer = preview(client, fmt, options=options)
    assert answer.status_code == 200, answer.text
    assert answer.json()["sampleRows"] == csv_rows["sampleRows"]


def test_split_parts_and_the_size_and_row_cap_warnings(
    make_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    registry = tmp_path / "export_types.yaml"
    text = default_registry_path().read_text(encoding="utf-8")
    registry.write_text(text.replace("max_rows: 5000000", "max_rows: 10000"), encoding="utf-8")
    stack = make_stack(export_types_file=str(registry), task={"max_file_size_mb": 0.25})
    client = stack.client()
    cap = stack.settings.file_size_cap_bytes
    parts = preview(client, parameters=ALL_DATES, options={"split": {"maxRowsPerFile": 1000}})
    assert parts.status_code == 200, parts.text
    body = parts.json()
    assert body["estimatedRows"] == 15_000
    assert body["files"] == 15
    codes = [w["code"] for w in body["warnings"]]
    assert codes == ["OVER_ROW_CAP"]  # 1,000-row parts are each under the size cap
    whole = preview(client, "xlsx", parameters=ALL_DATES).json()
    codes = [w["code"] for w in whole["warnings"]]
    assert codes == ["OVER_ROW_CAP", "OVER_SIZE_CAP", "SPLIT_SUGGESTED"], whole["warnings"]
    assert whole["files"] == 1 and whole["sheets"] == 1
    suggested = whole["warnings"][2]["suggestedMaxRowsPerFile"]
    assert suggested * whole["estimatedBytes"] / whole["estimatedRows"] < cap
    assert all(w["messageZh"] and w["message"] for w in whole["warnings"])


def test_many_rows_in_xlsx_warn_of_sheets_and_suggest_a_split(stack: Stack) -> None:
    etype = stack.runtime.registry.get("ORDERS")
    assert etype is not None
    columns = [Column("k", "Key", ColumnType.INTEGER), Column("p", "Price", ColumnType.DECIMAL)]
    found = Preview(
        etype=etype,
        file_format=FORMATS["xlsx"],
        spec=FileSpec(),
        time_zone="UTC",
        columns=columns,
        rows=[[1, 2], [Decimal("1.50"), Decimal("2.25")]],
        estimated_rows=3_000_000,
    )
    answer = render_preview(found, byte_cap=2**40)
    assert answer.sheets == math.ceil(3_000_000 / 1_048_575) == 3
    assert [w.code for w in answer.warnings] == ["XLSX_SHEETS", "SPLIT_SUGGESTED"]
    assert answer.warnings[0].message.startswith("this becomes 3 sheets")
    assert answer.warnings[1].suggestedMaxRowsPerFile == 1_000_000
    assert answer.sampleRows == [["1", "1.50"], ["2", "2.25"]]


def test_a_split_into_more_than_a_thousand_files_warns_with_the_rows_that_fit(
    stack: Stack,
) -> None:
    etype = stack.runtime.registry.get("ORDERS")
    assert etype is not None
    columns = [Column("k", "Key", ColumnType.INTEGER)]

    def answer(rows_per_file: int, estimated: int) -> Any:
        found = Preview(
            etype=etype,
            file_format=FORMATS["csv"],
            spec=FileSpec(split=Split(max_rows_per_file=rows_per_file)),
            time_zone="UTC",
            columns=columns,
            rows=[[1, 2]],
            estimated_rows=estimated,
        )
        return render_preview(found, byte_cap=2**40)

    over = answer(10, 20_001)
    assert over.files == 2_001
    assert [w.code for w in over.warnings] == ["TOO_MANY_PARTS"]
    assert over.warnings[0].suggestedMaxRowsPerFile == 21  # ceil(20,001 / 1,000)
    assert "2,001 files" in over.warnings[0].message and over.warnings[0].messageZh
    at_limit = answer(21, 20_001)
    assert at_limit.files == 953 and at_limit.warnings == []
    exactly = answer(20, 20_000)
    assert exactly.files == MAX_PARTS and exactly.warnings == []


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        ({"columns": ["o_orderkey", "o_price"]}, "UNKNOWN_COLUMN", "columns[1]"),
        ({"columns": ["o_orderkey", {"key": "o_orderkey"}]}, "DUPLICATE_COLUMN", "columns[1]"),
        ({"options": {"encoding": "latin-1"}}, "INVALID_OPTION", "options.encoding"),
        ({"format": "xlsx", "options": {"delimiter": ";"}}, "OPTION_NOT_SUPPORTED", None),
        ({"options": {"split": {"maxRowsPerFile": 0}}}, "INVALID_SPLIT", None),
        ({"options": {"split": {"maxRowsPerFile": 5_000_001}}}, "INVALID_SPLIT", None),
    ],
)
def test_bad_file_choices_are_422_with_their_codes(
    stack: Stack, change: dict[str, Any], code: str, field: str | None
) -> None:
    client = stack.client()
    answer = client.post(
        "/api/v1/exports/preview",
        json={"exportType": "ORDERS", "format": "csv", "parameters": SEPTEMBER, **change},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == code
    if field is not None:
        assert answer.json()["field"] == field


def test_bad_input_gives_the_create_answer_and_no_task_is_made(stack: Stack) -> None:
    client = stack.client()
    bodies = [
        {"parameters": {"from": "1995-09-30", "to": "1995-09-01"}},
        {"parameters": {"colour": "red"}},
        {"format": "pdf"},
        {"exportType": "NOPE"},
        {"timeZone": "Mars/Olympus"},
        {"parameters": {"from": "1995-13-01"}},
    ]
    for change in bodies:
        payload = {"exportType": "ORDERS", "format": "csv", "parameters": {}, **change}
        previewed = client.post("/api/v1/exports/preview", json=payload)
        created = client.post("/api/v1/exports", json=payload)
        assert previewed.status_code == created.status_code == 422, (previewed.text, change)
        assert previewed.json() == created.json()
    for _ in range(3):
        assert preview(client).status_code == 200
    assert client.get("/api/v1/exports").json()["items"] == []
    other = stack.client(perms=[])
    assert preview(other).json()["code"] == "PERMISSION_DENIED"
