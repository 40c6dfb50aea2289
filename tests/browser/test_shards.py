"""Sharded exports on the page: a running one shows its parts next to its rows, in both
languages; a failed one offers Retry (which resumes) and Start over (``fresh=true``,
after a confirmation); a failed export that is not sharded offers Retry only."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.browser.seeding import seeded
from tests.support.helpers import Stack

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

ADMIN = ["platform:export:admin", "export:orders:create"]


@pytest.fixture
def stack(make_stack) -> Stack:
    return make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},  # a retried task stays queued: the page is the subject
        limits={"max_active_per_user": 100, "max_active_per_type": 100},
    )


def _retries(stack: Stack, task_id: str) -> list[dict[str, Any]]:
    """The task's manual_retry audit rows (admin API), newest first."""
    report = stack.client("root", perms=ADMIN).get(f"/api/v1/admin/tasks/{task_id}")
    assert report.status_code == 200, report.text
    return [a for a in report.json()["audit"] if a["action"] == "manual_retry"]


@pytest.mark.parametrize(
    ("locale", "parts"),
    [("en-US", "3 of 8 parts done"), ("zh-CN", "已完成 3 / 8 个分片")],
)
def test_a_running_sharded_export_shows_its_parts(stack, ui, locale, parts):
    seeded(stack, "alice", "running", "Orders by day", day=1, shards_done=3, shards_total=8)
    seeded(stack, "alice", "running", "Plain orders", day=2)  # not sharded
    seeded(stack, "alice", "running", "One day", day=3, shards_done=0, shards_total=1)
    view = ui(stack, locale=locale).open().sign_in()
    row = view.row("Orders by day")
    rows = {"en-US": "4,000 of 9,000 rows", "zh-CN": "4,000 / 9,000 条"}[locale]
    expect(row.locator(".c-progress .rows")).to_have_text(rows)
    expect(row.locator(".c-progress .shards")).to_have_text(parts)
    # Under the rows, above the rate: the three lines in that order.
    lines = row.locator(".c-progress > span:visible").all_inner_texts()
    assert lines[:2] == [rows, parts], lines
    # Nothing to say without shards, nor for a single part.
    for name in ("Plain orders", "One day"):
        expect(view.row(name).locator(".c-progress .rows")).to_have_text(rows)
        expect(view.row(name).locator(".c-progress .shards")).to_be_hidden()
    # The numbers move with the poll; the language switch relabels them.
    view.page.click("#lang-switch")
    other = {"en-US": "已完成 3 / 8 个分片", "zh-CN": "3 of 8 parts done"}[locale]
    expect(row.locator(".c-progress .shards")).to_have_text(other)


def test_a_failed_sharded_export_resumes_or_starts_over(stack, ui):
    over = seeded(stack, "alice", "failed", "Orders by day", day=1, shards_done=3, shards_total=8)
    resume = seeded(stack, "alice", "failed", "Orders again", day=2, shards_done=5, shards_total=8)
    view = ui(stack).open().sign_in()
    page = view.page
    sent: list[str] = []
    page.on("request", lambda r: "/retry" in r.url and sent.append(r.url))
    row = view.row("Orders by day")
    retry = row.get_by_role("button", name="Retry Orders by day (continue where it stopped)")
    start_over = row.get_by_role("button", name="Start Orders by day over")
    expect(retry).to_have_text("Retry")
    expect(retry).to_have_attribute("title", "Retry (continue where it stopped)")
    expect(start_over).to_have_text("Start over")
    expect(row.locator(".actions .btn")).to_have_text(["Retry", "Start over", "Export again"])
    # Start over asks first; the safe answer is the default and sends nothing.
    start_over.click()
    confirm = page.locator("#confirm")
    expect(confirm).to_be_visible()
    expect(page.locator("#confirm-title")).to_have_text("Start “Orders by day” over?")
    expect(page.locator("#confirm-text")).to_have_text(
        "The parts already exported are discarded and the whole export runs again from the "
        "beginning, which takes longer. To continue where it stopped, use Retry instead."
    )
    expect(page.locator("#confirm-no")).to_have_text("Go back")
    expect(page.locator("#confirm-yes")).to_have_text("Start over")
    expect(page.locator("#confirm-no")).to_be_focused()
    page.click("#confirm-no")
    expect(confirm).to_be_hidden()
    expect(start_over).to_be_focused()
    page.wait_for_timeout(300)
    assert sent == [] and _retries(stack, over) == []
    start_over.click()
    with page.expect_request(re.compile(r"/retry\?fresh=true$")) as asked:
        page.click("#confirm-yes")
    assert asked.value.method == "POST"
    expect(page.locator("#toasts")).to_contain_text(
        "“Orders by day” is queued again and starts over from the beginning."
    )
    expect(row.locator(".badge")).to_have_text("Queued")
    expect(row.locator("[data-action=restart]")).to_have_count(0)
    [audit] = _retries(stack, over)
    assert audit["details"]["fresh"] is True
    # Retry resumes: no fresh in the request, and the toast says where it goes on.
    other = view.row("Orders again")
    with page.expect_request(re.compile(r"/retry$")):
        other.get_by_role("button", name="Retry Orders again (continue where it stopped)").click()
    expect(page.locator("#toasts")).to_contain_text(
        "“Orders again” is queued again and continues where it stopped."
    )
    expect(other.locator(".badge")).to_have_text("Queued")
    [audit] = _retries(stack, resume)
    assert audit["details"]["fresh"] is False
    assert [u.rsplit("/", 1)[-1] for u in sent] == ["retry?fresh=true", "retry"]


def test_the_sharded_actions_in_chinese(stack, ui):
    seeded(stack, "alice", "failed", "按天导出", day=1, shards_done=3, shards_total=8)
    view = ui(stack, locale="zh-CN").open().sign_in()
    page = view.page
    row = view.row("按天导出")
    retry = row.get_by_role("button", name="重试「按天导出」（从中断处继续）")
    expect(retry).to_have_text("重试")
    expect(retry).to_have_attribute("title", "重试（从中断处继续）")
    start_over = row.get_by_role("button", name="从头重新导出「按天导出」")
    expect(start_over).to_have_text("从头开始")
    expect(start_over).to_have_attribute("title", "丢弃已导出的分片，整个导出从头重新执行")
    start_over.click()
    expect(page.locator("#confirm-title")).to_have_text("从头重新导出「按天导出」？")
    expect(page.locator("#confirm-text")).to_have_text(
        "已导出的分片将被丢弃，整个导出从头重新执行，耗时会更长。如果只想从中断处继续，请改用“重试”。"
    )
    expect(page.locator("#confirm-no")).to_have_text("返回")
    expect(page.locator("#confirm-yes")).to_have_text("从头开始")
    page.click("#confirm-yes")
    expect(page.locator("#toasts")).to_contain_text("「按天导出」已重新排队，将从头开始导出。")


def test_a_failed_export_that_is_not_sharded_offers_no_start_over(stack, ui):
    task_id = seeded(stack, "alice", "failed", "Plain orders", day=1)
    view = ui(stack).open().sign_in()
    page = view.page
    row = view.row("Plain orders")
    expect(row.locator(".actions .btn")).to_have_text(["Retry", "Export again"])
    retry = row.get_by_role("button", name="Retry Plain orders", exact=True)
    expect(retry).not_to_have_attribute("title", re.compile("."))
    expect(row.locator("[data-action=restart]")).to_have_count(0)
    expect(page.get_by_text("Start over")).to_have_count(0)
    with page.expect_request(re.compile(r"/retry$")):
        retry.click()
    expect(page.locator("#toasts .toast-ok")).to_have_text("“Plain orders” is queued again.")
    [audit] = _retries(stack, task_id)
    assert audit["details"]["fresh"] is False
