"""Failures as a person reads them: one sentence per failure code in the page's language
(the row limit with its number), no Retry where a retry meets the same end, a task
waiting for its automatic retry says when, and attempts that do not mislead."""

from __future__ import annotations

import re
import time
from datetime import datetime

import pytest

from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

ROW_LIMIT = {
    "en-US": "There are more than 1,500 rows, the most one export of this type may have. "
    "Narrow the date range or the filters and export again.",
    "zh-CN": "数据超过 1,500 条，超出了该类型单次导出的上限。请缩小日期范围或筛选条件后再次导出。",
}


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_row_limit_failure_names_the_limit_and_offers_export_again_not_retry(
    flaky_stack, faulty, ui, locale
):
    stack = flaky_stack(max_rows=1500, api={"dev_sign_in": True})
    faulty.reset(rows=2500)
    alice = stack.client("alice", perms=FLAKY)
    failed = wait_state(alice, flaky(alice, taskName="Too many rows").json()["taskId"])
    assert (failed["error"]["code"], failed["retryable"]) == ("ROW_LIMIT_EXCEEDED", False)
    view = ui(stack, locale=locale).open().sign_in()
    row = view.row("Too many rows")
    expect(row.locator(".note")).to_have_text(ROW_LIMIT[locale])
    expect(row.locator("[data-action=retry]")).to_have_count(0)
    expect(row.locator("[data-action=again]")).to_have_count(1)
    # Nothing internal: no phase word, batch or cursor, no "Details" with the server's text.
    expect(row).not_to_contain_text(re.compile("batch|cursor|render|max_rows"))
    expect(row.locator("details")).to_have_count(0)


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_task_waiting_for_its_automatic_retry_says_when_and_why(flaky_stack, faulty, ui, locale):
    stack = flaky_stack(task={"retry_backoff_seconds": [120.0]}, api={"dev_sign_in": True})
    faulty.reset(rows=500, fail_versions={1})
    alice = stack.client("alice", perms=FLAKY)
    task_id = flaky(alice, taskName="Backing off").json()["taskId"]
    waiting = alice.get(f"/api/v1/exports/{task_id}").json()
    deadline = time.monotonic() + 60
    while not waiting["nextRetryAt"] and time.monotonic() < deadline:
        time.sleep(0.1)
        waiting = alice.get(f"/api/v1/exports/{task_id}").json()
    assert waiting["nextRetryAt"], waiting
    view = ui(stack, locale=locale).open().sign_in()
    page = view.page
    row = view.row("Backing off")
    due = datetime.fromisoformat(waiting["nextRetryAt"].replace("Z", "+00:00"))
    assert 60 < due.timestamp() - time.time() <= 121
    clock = page.evaluate(
        "([iso, locale]) => new Intl.DateTimeFormat(locale, {timeStyle: 'medium'})"
        ".format(new Date(iso))",
        [waiting["nextRetryAt"], "en" if locale == "en-US" else "zh-CN"],
    )
    # Said once: the note says which attempt failed, why, and when it goes on; the state
    # says it waits; the progress cell says nothing more (and a phone card drops it).
    if locale == "en-US":
        expect(row.locator(".note")).to_have_text(
            f"Attempt 1 of 3 failed: the data source did not answer. It is retried "
            f"automatically at {clock}."
        )
        expect(row.locator(".phase")).to_have_text("Waiting to retry")
        expect(row).not_to_contain_text("Waiting for a free worker")
        expect(row.locator("td.c-times")).not_to_contain_text("Started")
    else:
        expect(row.locator(".note")).to_have_text(
            f"第 1 次执行（共 3 次）失败：数据源暂时无法响应。将于 {clock} 自动重试。"
        )
        expect(row.locator(".phase")).to_have_text("等待重试")
        expect(row).not_to_contain_text("排队等待执行")
        expect(row.locator("td.c-times")).not_to_contain_text("开始")
    text = row.inner_text()
    assert text.count(clock) == 1, text
    assert text.count("数据源暂时无法响应" if locale == "zh-CN" else "did not answer") == 1, text
    expect(row.locator(".attempt")).to_have_count(0)
    expect(row.locator(".rows")).to_have_text("")
    expect(row.locator("td.c-progress")).to_have_class(re.compile(r"\bis-empty\b"))


def test_attempts_are_counted_per_run_and_shown_only_past_the_first(flaky_stack, faulty, ui):
    stack = flaky_stack(max_attempts=2, api={"dev_sign_in": True})
    faulty.reset(rows=500, always_fail=True)
    alice = stack.client("alice", perms=FLAKY)
    failed = wait_state(alice, flaky(alice, taskName="Twice unlucky").json()["taskId"])
    assert (failed["attempts"], failed["retryable"]) == (2, True)
    view = ui(stack).open().sign_in()
    page = view.page
    row = view.row("Twice unlucky")
    expect(row.locator(".attempt")).to_have_text("Attempt 2 of 2")
    expect(row.locator(".note")).to_have_text(
        "The data source did not answer, on every attempt. Try again later."
    )
    faulty.reset(rows=500)
    row.get_by_role("button", name="Retry Twice unlucky").click()
    expect(row.locator(".badge")).to_have_text("Completed", timeout=30_000)
    # The manual retry started a new run that succeeded at once: no count to misread.
    expect(row.locator(".attempt")).to_have_count(0)
    expect(row.locator("td.c-times")).to_contain_text("Started")
    assert page.evaluate("document.activeElement.closest('tr')?.dataset.taskId")
