"""The daily quota line in Chromium, in English and in Chinese: "1 of 3 exports left
today" / "今日还可导出 1 次（共 3 次）" above the list, updated after a create, and the
create form's sentence once the quota is used up (a 429 ``QUOTA_EXCEEDED``)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.helpers import create

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser


@pytest.fixture
def stack(make_stack: Any) -> Any:
    return make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        quotas={"user_tasks_per_day": 3, "user_rows_per_day": 100000},
        limits={"duplicate_window_seconds": 0, "max_active_per_user": 50},
    )


def _fill(stack: Any, user: str, count: int) -> None:
    client = stack.client(user)
    for n in range(count):
        assert create(client, taskName=f"before {n}").status_code == 202


def test_the_quota_line_and_the_refusal_in_english(stack: Any, ui: Any) -> None:
    _fill(stack, "alice", 1)
    view = ui(stack).open().sign_in("alice")
    view.allow(429)
    page = view.page
    line = page.locator("#quota-line")
    expect(line).to_have_text("2 of 3 exports left today · 100,000 of 100,000 rows left today")
    expect(line).not_to_have_class(re.compile("quota-out"))
    view.new_export(name="Second")
    page.click("#create-submit")
    expect(view.row("Second")).to_be_visible()
    expect(line).to_contain_text("1 of 3 exports left today")
    view.new_export(name="Third")
    page.click("#create-submit")
    expect(line).to_contain_text("0 of 3 exports left today")
    expect(line).to_have_class(re.compile("quota-out"))
    view.new_export(name="One too many")
    page.click("#create-submit")
    error = page.locator("#create-error")
    expect(error).to_contain_text(
        "You have used up today’s export quota, so no export was created."
    )
    expect(error).to_contain_text(re.compile(r"You can try again after \d{1,2}:\d{2}:\d{2}"))
    expect(error).not_to_contain_text("daily quota of")  # the server's English stays out
    expect(page.locator("#create")).to_be_visible()


def test_the_quota_line_and_the_refusal_in_chinese(stack: Any, ui: Any) -> None:
    _fill(stack, "li.lei", 2)
    view = ui(stack, locale="zh-CN").open().sign_in("li.lei")
    view.allow(429)
    page = view.page
    line = page.locator("#quota-line")
    expect(line).to_have_text(
        "今日还可导出 1 次（共 3 次）；今日还可导出 100,000 行（共 100,000 行）"
    )
    view.new_export(name="最后一次")
    page.click("#create-submit")
    expect(line).to_contain_text("今日还可导出 0 次（共 3 次）")
    view.new_export(name="超出额度")
    page.click("#create-submit")
    error = page.locator("#create-error")
    expect(error).to_contain_text("今日导出额度已用完，本次未创建导出。")
    expect(error).not_to_contain_text("quota")
    # Switching the language rewrites the line.
    page.click("#create-close")
    page.click("#lang-switch")
    expect(line).to_contain_text("0 of 3 exports left today")


def test_no_quota_no_line(make_stack: Any, ui: Any) -> None:
    plain = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    view = ui(plain).open().sign_in("alice")
    page = view.page
    expect(page.locator("#list-title")).to_have_text("My exports")
    page.wait_for_load_state("networkidle")
    expect(page.locator("#quota-line")).to_be_hidden()
