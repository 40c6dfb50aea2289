"""The list: polling only while something is active and the tab is visible, cursor
pages, filters and their empty state, "export again"."""

from __future__ import annotations

import pytest

from tests.helpers import create, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser


def _list_requests(page) -> list[str]:
    asked: list[str] = []
    page.on("request", lambda r: "/api/v1/exports?" in r.url and asked.append(r.url))
    return asked


def test_polling_runs_while_a_task_is_active_and_the_tab_is_visible(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    create(stack.client("alice"), "csv", taskName="Stays queued")
    view = ui(stack).open().sign_in()
    page = view.page
    expect(view.row("Stays queued").locator(".badge")).to_have_text("Queued")
    asked = _list_requests(page)
    page.wait_for_timeout(5000)
    assert 1 <= len(asked) <= 3  # every 2 s (plus the answer's time), never more often
    page.evaluate(
        "() => { Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
        " document.dispatchEvent(new Event('visibilitychange')); }"
    )
    asked.clear()
    page.wait_for_timeout(4500)
    assert asked == []  # a hidden tab asks nothing
    page.evaluate(
        "() => { Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
        " document.dispatchEvent(new Event('visibilitychange')); }"
    )
    for _ in range(30):
        if asked:
            break
        page.wait_for_timeout(100)
    assert len(asked) == 1  # back at once when shown again


def test_cursor_pages_and_filters(make_stack, ui):
    stack = make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        limits={"max_active_per_user": 100},
    )
    alice = stack.client("alice")
    for day in range(1, 23):
        d = f"1995-03-{day:02d}"
        create(alice, "csv", taskName=f"March {day:02d}", parameters={"from": d, "to": d})
    view = ui(stack).open().sign_in()
    page = view.page
    rows = page.locator("#tasks-body tr")
    expect(rows).to_have_count(20)
    expect(rows.first.locator(".task-name")).to_have_text("March 22")  # newest first
    expect(page.locator("#page-no")).to_have_text("Page 1")
    expect(page.locator("#prev")).to_be_disabled()
    page.click("#next")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(".task-name")).to_have_text("March 02")
    expect(page.locator("#page-no")).to_have_text("Page 2")
    expect(page.locator("#next")).to_be_disabled()
    page.click("#prev")
    expect(rows).to_have_count(20)
    page.select_option("#f-size", "50")
    expect(rows).to_have_count(22)
    expect(page.locator("#pager")).to_be_hidden()
    page.select_option("#f-state", "failed")
    expect(page.locator("#empty-title")).to_have_text("No exports match these filters")
    page.locator("#empty-action").click()
    expect(rows).to_have_count(22)
    expect(page.locator("#f-state")).to_have_value("")
    page.select_option("#f-type", "CUSTOMERS")
    expect(page.locator("#empty")).to_be_visible()
    page.select_option("#f-type", "ORDERS")
    expect(rows).to_have_count(22)
    page.reload()  # the page size is remembered
    expect(page.locator("#f-size")).to_have_value("50")
    expect(rows).to_have_count(22)


def test_export_again_opens_the_form_with_the_same_export(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True})
    alice = stack.client("alice")
    params = {"from": "1996-02-01", "to": "1996-02-29", "status": "F"}
    first = create(alice, "xlsx", taskName="Leap month", parameters=params).json()["taskId"]
    wait_state(alice, first)
    view = ui(stack).open().sign_in()
    page = view.page
    view.row("Leap month").get_by_role("button", name="Export Leap month again").click()
    expect(page.locator("#create")).to_be_visible()
    expect(page.locator("#c-type")).to_have_value("ORDERS")
    expect(page.locator('input[name="format"][value="xlsx"]')).to_be_checked()
    expect(page.locator("#c-param-from")).to_have_value("1996-02-01")
    expect(page.locator("#c-param-to")).to_have_value("1996-02-29")
    expect(page.locator("#c-param-status")).to_have_value("F")
    expect(page.locator("#c-name")).to_have_value("Leap month")
    expect(page.locator("#c-tz")).to_have_value("UTC")  # the earlier export's zone
    page.click("#create-submit")
    expect(view.page.locator("#tasks-body tr")).to_have_count(2)
    items = alice.get("/api/v1/exports").json()["items"]
    assert [(t["taskName"], t["format"], t["parameters"]) for t in items] == [
        ("Leap month", "xlsx", params),
        ("Leap month", "xlsx", params),
    ]
    assert items[0]["taskId"] != first
