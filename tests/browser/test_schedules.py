"""Scheduled exports and the notifications bell, in Chromium, in Chinese: a person creates
a weekly schedule ("every Monday at 08:00 Beijing time, the previous week, as Excel"),
sees its next five runs in its own time zone, runs it now, is told by the bell when the
file is ready, opens the notification and downloads the file, read back with openpyxl."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import openpyxl
import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

SHANGHAI = ZoneInfo("Asia/Shanghai")


def _previous_week(now: datetime) -> tuple[str, str]:
    """Monday to Sunday of the week before ``now``'s, as dates in ``now``'s zone."""
    today = now.date()
    monday = today - timedelta(days=today.weekday() + 7)
    return monday.isoformat(), (monday + timedelta(days=6)).isoformat()


@pytest.fixture
def stack(make_stack: Any) -> Any:
    """A stack with the development sign-in and a scheduler that looks every 0.2 s."""
    return make_stack(
        api={"dev_sign_in": True},
        scheduler={"loop_seconds": 0.2},
        notify={"loop_seconds": 0.2},
    )


def test_a_weekly_schedule_in_chinese_runs_now_notifies_and_downloads(
    stack: Any, ui: Any, tmp_path: Any
) -> None:
    view = ui(stack, locale="zh-CN").open().sign_in("li.lei")
    page = view.page
    page.locator('#views [data-view="schedules"]').click()
    expect(page.locator("#schedules-title")).to_have_text("定时导出")
    expect(page.locator("#schedules-empty")).to_be_visible()
    page.click("#new-schedule")
    page.locator("#schedule-dialog").wait_for()
    page.fill("#s-name", "每周订单")
    page.select_option("#s-type", "ORDERS")
    page.select_option("#s-format", "xlsx")
    page.select_option("#s-frequency", "weekly")
    page.select_option("#s-weekday", "MON")
    page.fill("#s-time", "08:00")
    page.select_option("#s-zone", "Asia/Shanghai")
    # A weekly schedule suggests the previous week.
    expect(page.locator("#s-window")).to_have_value("previous_week")
    page.click("#s-submit")
    expect(page.locator(".toast").last).to_contain_text("已创建“每周订单”")
    row = page.locator("#schedules-body tr", has=page.locator(".task-name", has_text="每周订单"))
    expect(row.locator(".badge")).to_have_text("启用中")
    expect(row.locator("code")).to_have_text("0 8 * * MON")
    times = row.locator(".fire-times li")
    expect(times).to_have_count(5)
    # Each next run is a Monday at 08:00 in Beijing time, shown in that zone.
    for text in times.all_inner_texts():
        assert "周一" in text and "08:00" in text, text
    asked_at = datetime.now(SHANGHAI)
    row.locator('[data-action="run"]').click()
    expect(page.locator(".toast").last).to_contain_text("已开始执行")
    # The bell counts the notification of the finished export, without a reload.
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("1", timeout=60_000)
    page.click("#inbox-toggle")
    item = page.locator("#inbox-list .inbox-item.is-unread")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("每周订单")
    item.locator("button").click()
    expect(page.locator("#task-card")).to_be_visible()
    expect(page.locator("#task-card-body")).to_contain_text("已完成")
    expect(badge).to_be_hidden()
    with page.expect_download() as caught:
        page.click("#task-card-download")
    saved = tmp_path / caught.value.suggested_filename
    caught.value.save_as(saved)
    assert saved.suffix == ".xlsx"
    book = openpyxl.load_workbook(io.BytesIO(saved.read_bytes()), read_only=True)
    rows = list(book.worksheets[0].iter_rows(values_only=True))
    book.close()
    # The heading row is in Chinese: the page's language when the schedule was made.
    assert rows and "订单号" in rows[0], rows[:1]
    # The run's task asked for the previous week in Beijing time.
    client = stack.client("li.lei")
    (schedule,) = client.get("/api/v1/schedules").json()["items"]
    (run,) = client.get(f"/api/v1/schedules/{schedule['scheduleId']}/runs").json()["items"]
    assert run["state"] == "succeeded"
    task = client.get(f"/api/v1/exports/{run['taskId']}").json()
    assert task["scheduleId"] == schedule["scheduleId"]
    start, end = _previous_week(asked_at)
    assert (task["parameters"]["from"], task["parameters"]["to"]) == (start, end)
    assert len(rows) - 1 == task["processed"]
