"""The file a user asked for, in Chromium: the column picker (choose, reorder by keyboard,
rename), the options, the preview with its warnings and one-click fixes, the download
read back with a real CSV reader, the manifest's SHA-256 against hashlib's, and "Verify a
file" on the downloaded file and on a changed copy; in English and in Chinese.

The first test runs the whole way against the real server. The others route the file
endpoints to fixed answers (tests/support/page_doubles.py) to test what the page does
with each answer, also on an older server that has none of them."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from typing import Any

import pytest
import yaml

from export_center.registry_source import default_registry_path
from tests.browser.seeding import seeded
from tests.support.page_doubles import ORDERS_COLUMNS, FileApiDouble, manifest_of

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

ROW_CAP = 10_000  # below the 15,000 orders of the test sample: all dates is over the cap
SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}

#: What each language's page says, and the CSV options each run chooses.
RUNS: dict[str, dict[str, Any]] = {
    "en-US": {
        "lang": "en",
        "rename": "Order number",
        "encoding": "utf-8-bom",
        "delimiter": ";",
        "codec": "utf-8-sig",
        "over_cap": "more than the 10,000 one export of this type may have",
        "narrow": "Narrow the date range",
        "done": "Completed",
        "manifest": "Manifest",
        "match": "matches file {name} of the manifest",
        "no_match": "does not match any file of this export",
    },
    "zh-CN": {
        "lang": "zh-CN",
        "rename": "订单编号",
        "encoding": "gb18030",
        "delimiter": ",",
        "codec": "gb18030",
        "over_cap": "超过了该类型单次导出的上限 10,000 行",
        "narrow": "缩小日期范围",
        "done": "已完成",
        "manifest": "文件清单",
        "match": "与清单中的文件 {name} 一致",
        "no_match": "与本次导出的任何文件都不一致",
    },
}


@pytest.fixture
def stack(make_stack, tmp_path):
    """A stack whose ORDERS row cap is 10,000 (a whole-sample export is over it)."""
    registry = yaml.safe_load(default_registry_path().read_text())
    registry["ORDERS"]["max_rows"] = ROW_CAP
    path = tmp_path / "export_types.yaml"
    path.write_text(yaml.safe_dump(registry, allow_unicode=True))
    return make_stack(api={"dev_sign_in": True}, export_types_file=str(path))


def _pick_columns(page: Any, order: list[str]) -> None:
    """Choose exactly ``order`` (keys) in that order, with the keyboard on the arrows."""
    page.click("#c-columns-none")
    for key in order:
        page.locator(f'#c-column-list li[data-key="{key}"] input[type="checkbox"]').check()
    for position, key in enumerate(order):
        keys = page.eval_on_selector_all("#c-column-list li", "els => els.map(e => e.dataset.key)")
        up = page.locator(f'#c-column-list li[data-key="{key}"] button[data-move="-1"]')
        up.focus()
        for _ in range(keys.index(key) - position):
            page.keyboard.press("Enter")
            # The arrow keeps the focus: the next Enter moves the same column again.
            expect(
                page.locator(f'#c-column-list li[data-key="{key}"] button[data-move="-1"]')
            ).to_be_focused()
    keys = page.eval_on_selector_all("#c-column-list li", "els => els.map(e => e.dataset.key)")
    assert keys[: len(order)] == order


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_pick_columns_preview_fix_create_download_and_verify(stack, ui, tmp_path, locale):
    run = RUNS[locale]
    declared = stack.client("alice").get("/api/v1/export-types/ORDERS").json()["columns"]
    title = {c["key"]: c["titles"][run["lang"]] for c in declared}
    view = ui(stack, locale=locale).open().sign_in()
    page = view.page
    name = f"Picked columns {locale}"
    view.new_export(name=name, fmt="csv")
    expect(page.locator("#c-columns")).to_be_visible()
    expect(page.locator("#c-column-list li")).to_have_count(len(declared))
    order = ["o_totalprice", "o_orderkey", "o_orderdate"]
    _pick_columns(page, order)
    page.locator('#c-column-list li[data-key="o_orderkey"] .column-title').fill(run["rename"])
    header = [title["o_totalprice"], run["rename"], title["o_orderdate"]]
    expect(page.locator("#c-csv-options")).to_be_visible()
    page.select_option("#c-encoding", run["encoding"])
    page.select_option("#c-delimiter", run["delimiter"])
    # All dates: more rows than the type allows. The preview says so, with the fix.
    page.click("#create-preview")
    warning = page.locator('#c-preview-warnings li[data-code="OVER_ROW_CAP"]')
    expect(warning).to_contain_text(run["over_cap"])
    expect(page.locator("#c-preview-sample thead th")).to_have_text(header)
    assert page.locator("#c-preview-sample tbody tr").count() > 0
    warning.get_by_role("button", name=run["narrow"]).click()
    expect(page.locator("#c-param-from")).to_be_focused()
    page.fill("#c-param-from", SEPTEMBER["from"])
    page.fill("#c-param-to", SEPTEMBER["to"])
    expect(page.locator("#c-preview")).to_have_class(re.compile(r"\bis-stale\b"))
    page.click("#create-preview")
    expect(page.locator("#c-preview-facts")).to_be_visible()
    expect(page.locator("#c-preview")).not_to_have_class(re.compile(r"\bis-stale\b"))
    expect(page.locator('#c-preview-warnings li[data-code="OVER_ROW_CAP"]')).to_have_count(0)
    sample = page.locator("#c-preview-sample tbody tr").first.locator("td").all_inner_texts()
    assert SEPTEMBER["from"] <= sample[2] <= SEPTEMBER["to"]
    page.click("#create-submit")
    row = view.row(name)
    expect(row.locator(".badge")).to_have_text(run["done"], timeout=60_000)
    with page.expect_download() as caught:
        row.locator('a[data-action="download"]').click()
    saved = tmp_path / caught.value.suggested_filename
    caught.value.save_as(saved)
    data = saved.read_bytes()
    rows = list(
        csv.reader(io.StringIO(data.decode(run["codec"]), newline=""), delimiter=run["delimiter"])
    )
    assert rows[0] == header
    assert len(rows) > 100 and all(len(r) == 3 for r in rows)
    assert all(SEPTEMBER["from"] <= r[2] <= SEPTEMBER["to"] for r in rows[1:])
    # The manifest shows this file's SHA-256; Verify says it matches, and a changed copy not.
    row.locator('button[data-action="manifest"]').click()
    files = page.locator("#manifest-files tbody tr")
    expect(files).to_have_count(1)
    assert files.first.locator(".m-sha").inner_text().strip() == hashlib.sha256(data).hexdigest()
    shown_name = files.first.locator(".m-name").inner_text().strip()
    page.set_input_files("#verify-file", str(saved))
    expect(page.locator("#verify-result")).to_contain_text(run["match"].format(name=shown_name))
    changed = tmp_path / f"changed-{saved.name}"
    changed.write_bytes(data.replace(b"1995-09-", b"1995-08-", 1))
    page.set_input_files("#verify-file", str(changed))
    expect(page.locator("#verify-result")).to_contain_text(run["no_match"])
    # "Export again" brings back the columns, their order and renames, and the options.
    page.keyboard.press("Escape")
    row.locator('[data-action="again"]').click()
    expect(page.locator("#c-column-list li")).to_have_count(len(declared))
    keys = page.eval_on_selector_all("#c-column-list li", "els => els.map(e => e.dataset.key)")
    assert keys[:3] == order
    checked = page.eval_on_selector_all(
        '#c-column-list li input[type="checkbox"]', "els => els.map(e => e.checked)"
    )
    assert checked == [True] * 3 + [False] * (len(declared) - 3)
    rename = page.locator('#c-column-list li[data-key="o_orderkey"] .column-title')
    expect(rename).to_have_value(run["rename"])
    expect(page.locator("#c-encoding")).to_have_value(run["encoding"])
    expect(page.locator("#c-delimiter")).to_have_value(run["delimiter"])


def _sheets(body: dict[str, Any]) -> dict[str, Any]:
    """A preview answer: 2,500,000 rows; as one XLSX, three sheets and a warning."""
    options = body.get("options") or {}
    split = (options.get("split") or {}).get("maxRowsPerFile")
    xlsx = body["format"] == "xlsx"
    warnings = []
    if xlsx and not split:
        warnings.append({"code": "XLSX_SHEETS", "message": "this becomes 3 sheets"})
        warnings.append(
            {"code": "SPLIT_SUGGESTED", "message": "split", "suggestedMaxRowsPerFile": 5_000}
        )
    titles = [c.get("title") if isinstance(c, dict) else c for c in body.get("columns") or []]
    return {
        "estimatedRows": 2_500_000,
        "columns": [{"key": str(t), "title": str(t), "type": "STRING"} for t in titles],
        "sampleRows": [["1", "2", "3"], ["4", "5", "6"]],
        "estimatedBytes": 300_000_000,
        "files": -(-2_500_000 // split) if split else 1,
        "sheets": 3 if xlsx and not split else (1 if xlsx else 0),
        "warnings": warnings,
    }


def test_the_chosen_file_is_sent_and_each_fix_changes_the_form_zh(stack, ui):
    double = FileApiDouble(
        detail={"exportType": "ORDERS", "columns": ORDERS_COLUMNS},
        preview=_sheets,
        formats=["csv", "xlsx", "jsonl", "parquet"],
    )
    view = ui(stack, locale="zh-CN").open()
    double.install(view.page)
    view.sign_in()
    view.allow(422)
    page = view.page
    view.new_export(name="选列导出", fmt="xlsx", params=SEPTEMBER)
    expect(page.locator('input[name="format"]')).to_have_count(4)
    expect(page.locator("#c-format")).to_contain_text("JSON Lines（.jsonl）")
    expect(page.locator("#c-csv-options")).to_be_hidden()  # CSV options for CSV only
    _pick_columns(page, ["o_totalprice", "o_orderkey", "c_name"])
    expect(page.locator("#c-columns-count")).to_have_text("已选 3 / 4 列")
    page.locator('#c-column-list li[data-key="o_totalprice"] .column-title').fill("金额")
    page.click("#create-preview")
    expect(page.locator("#c-preview-sample thead th")).to_have_text(
        ["金额", "o_orderkey", "c_name"]
    )
    first = double.sent[-1]
    assert first["columns"] == [{"key": "o_totalprice", "title": "金额"}, "o_orderkey", "c_name"]
    assert first["options"] == {"language": "zh-CN", "compression": "none"}  # no CSV options
    assert "taskName" not in first and first["parameters"] == SEPTEMBER
    warning = page.locator('#c-preview-warnings li[data-code="XLSX_SHEETS"]')
    expect(warning).to_contain_text("会分成同一工作簿的 3 个工作表")
    expect(page.locator("#c-preview-facts")).to_contain_text("约 2,500,000 行")
    # "Switch to CSV": the format changes, the CSV options appear, the preview is asked again.
    warning.get_by_role("button", name="改为 CSV").click()
    expect(page.locator('input[name="format"][value="csv"]')).to_be_checked()
    expect(page.locator("#c-csv-options")).to_be_visible()
    expect(page.locator("#c-preview-warnings")).to_have_count(0)
    csv_body = double.sent[-1]
    assert csv_body["format"] == "csv"
    assert csv_body["options"] == {
        "language": "zh-CN", "compression": "none", "encoding": "utf-8-bom",
        "delimiter": ",", "header": True, "lineEnding": "crlf",
    }  # fmt: skip
    # "Split into files of N rows": N is the server's suggestion (5,000); split is on,
    # and the preview counts the files.
    page.check('input[name="format"][value="xlsx"]')
    page.click("#create-preview")
    split_fix = page.locator('#c-preview-warnings button[data-fix="split"]')
    expect(split_fix.first).to_have_text("拆分为每个 5,000 行的文件")
    split_fix.first.click()
    expect(page.locator("#c-split")).to_be_checked()
    expect(page.locator("#c-split-rows")).to_have_value("5000")
    expect(page.locator("#c-preview-facts")).to_contain_text("500 个文件")
    assert double.sent[-1]["options"]["split"] == {"maxRowsPerFile": 5_000}
    # gzip does not apply to a split or an XLSX file: it cannot be chosen.
    assert page.eval_on_selector('#c-compression option[value="gzip"]', "o => o.disabled")
    # A refusal naming a column shows at the picker, in Chinese, naming the column.
    page.route(
        "**/api/v1/exports",
        lambda route: route.fulfill(
            status=422,
            content_type="application/json",
            body=json.dumps(
                {"code": "UNKNOWN_COLUMN", "message": "unknown column", "field": "columns[1]"}
            ),
        ),
    )
    page.click("#create-submit")
    expect(page.locator("#c-columns-error")).to_have_text(
        "该导出类型没有（或已不再有）「订单号」这一列，请刷新页面后重新选择导出列。"
    )
    expect(page.locator("#c-column-list li").first.locator("input").first).to_be_focused()
    # The page's own check: no column at all is refused before sending.
    page.click("#c-columns-none")
    page.click("#create-submit")
    expect(page.locator("#c-columns-error")).to_have_text("请至少选择一列。")


def test_the_manifest_shows_the_files_and_verify_tells_a_match_from_a_changed_file(
    stack, ui, tmp_path
):
    task_id = seeded(stack, "alice", "succeeded", "Signed orders")
    content = b"\xef\xbb\xbfOrder key,Order date\r\n1,1995-09-01\r\n2,1995-09-02\r\n"
    double = FileApiDouble(manifest=manifest_of(task_id, {"orders.csv": content}))
    view = ui(stack).open()
    double.install(view.page)
    view.sign_in()
    page = view.page
    button = view.row("Signed orders").get_by_role("button", name="Manifest of Signed orders")
    button.click()
    expect(page.locator("#manifest-title")).to_have_text("Manifest of “Signed orders”")
    sha = page.locator("#manifest-files tbody tr .m-sha")
    expect(sha).to_have_text(hashlib.sha256(content).hexdigest())
    expect(page.locator("#manifest-totals")).to_contain_text("12345.67")  # exact, as sent
    expect(page.locator("#manifest-signature")).to_have_text("HMAC-SHA256, key k1")
    original = tmp_path / "orders.csv"
    original.write_bytes(content)
    page.set_input_files("#verify-file", str(original))
    expect(page.locator("#verify-result")).to_have_text(
        "orders.csv matches file orders.csv of the manifest."
    )
    expect(page.locator("#verify-result")).to_have_class(re.compile(r"\bis-ok\b"))
    changed = tmp_path / "orders-edited.csv"
    changed.write_bytes(content.replace(b"1995-09-02", b"1995-09-03"))
    page.set_input_files("#verify-file", str(changed))
    expect(page.locator("#verify-result")).to_contain_text(
        "orders-edited.csv does not match any file of this export."
    )
    expect(page.locator("#verify-result")).to_have_class(re.compile(r"\bis-bad\b"))
    # In Chinese, the same answer reads in Chinese.
    page.click("#manifest-close")
    expect(button).to_be_focused()
    page.click("#lang-switch")
    view.row("Signed orders").get_by_role("button", name="「Signed orders」的文件清单").click()
    page.set_input_files("#verify-file", str(original))
    expect(page.locator("#verify-result")).to_have_text(
        "orders.csv 与清单中的文件 orders.csv 一致。"
    )


def test_an_older_server_keeps_the_dialog_as_it_was_and_the_preview_says_so(stack, ui):
    double = FileApiDouble(detail=None, preview=None, manifest=None)
    view = ui(stack).open()
    double.install(view.page)
    view.sign_in()
    view.allow(404)
    page = view.page
    created: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda r: (
            r.method == "POST"
            and r.url.endswith("/api/v1/exports")
            and created.append(json.loads(r.post_data))
        ),
    )
    view.new_export(name="Old server", fmt="csv", params=SEPTEMBER)
    page.wait_for_timeout(300)
    expect(page.locator("#c-columns")).to_be_hidden()
    expect(page.locator("#c-options")).to_be_hidden()
    page.click("#create-preview")
    expect(page.locator("#c-preview-message")).to_have_text(
        "This export center cannot show a preview (it is an older version). "
        "You can still create the export."
    )
    page.click("#create-submit")
    expect(view.row("Old server")).to_have_count(1)
    assert len(created) == 1 and "columns" not in created[0] and "options" not in created[0]
