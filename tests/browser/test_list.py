"""The list: polling only while something is active and the tab is visible, cursor
pages, filters and their empty state, "export again"."""

from __future__ import annotations

import re

import pytest

from tests.support.helpers import create, wait_state

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
    assert asked == []  # a hidden tab asks far less often: every 12 s, not every 2 s
    page.wait_for_timeout(9000)
    assert len(asked) == 1  # but it still asks (the tab title and notifications need it)
    asked.clear()
    page.evaluate(
        "() => { Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
        " document.dispatchEvent(new Event('visibilitychange')); }"
    )
    for _ in range(30):
        if asked:
            break
        page.wait_for_timeout(100)
    assert len(asked) == 1  # back at once when shown again


def _two_pages_of_exports(make_stack, ui, month: int, name: str):
    """22 queued exports of alice (one per day of ``month`` 1995, named ``"<name> DD"``),
    signed in with the first page of 20 on screen; the view and the stack."""
    stack = make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        limits={"max_active_per_user": 100},
    )
    alice = stack.client("alice")
    for day in range(1, 23):
        d = f"1995-{month:02d}-{day:02d}"
        create(alice, "csv", taskName=f"{name} {day:02d}", parameters={"from": d, "to": d})
    view = ui(stack).open().sign_in()
    expect(view.page.locator("#tasks-body tr")).to_have_count(20)
    return view, stack


def test_cursor_pages_and_filters(make_stack, ui):
    view, stack = _two_pages_of_exports(make_stack, ui, month=3, name="March")
    page = view.page
    rows = page.locator("#tasks-body tr")
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


def test_paging_keeps_the_focus_on_the_pager(make_stack, ui):
    view, stack = _two_pages_of_exports(make_stack, ui, month=4, name="April")
    page = view.page
    rows = page.locator("#tasks-body tr")
    page.focus("#next")
    page.keyboard.press("Enter")
    expect(rows).to_have_count(2)
    expect(page.locator("#next")).to_be_disabled()
    expect(page.locator("#prev")).to_be_focused()  # not lost to <body>
    page.keyboard.press("Enter")
    expect(rows).to_have_count(20)
    expect(page.locator("#next")).to_be_focused()


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_merchant_without_export_types_is_told_why_and_offered_nothing(make_stack, ui, locale):
    stack = make_stack(api={"dev_sign_in": True})
    view = ui(stack, locale=locale).open()
    page = view.page
    page.locator("#dev-form").wait_for()
    page.select_option("#dev-app", "MERCHANT")
    view.sign_in("mona", "shop9")
    notice = page.locator("#no-types")
    expect(notice).to_have_text(
        {
            "en-US": "No export types are offered to Merchant accounts yet, so you cannot "
            "create exports here.",
            "zh-CN": "商家端账号暂时没有可用的导出类型，因此无法在这里新建导出。",
        }[locale]
    )
    expect(page.locator("#new-export")).to_be_disabled()
    expect(page.locator("#empty-title")).to_have_text(
        {"en-US": "No exports yet", "zh-CN": "还没有导出任务"}[locale]
    )
    expect(page.locator("#empty")).not_to_contain_text(
        {"en-US": "Create an export", "zh-CN": "新建一个导出任务"}[locale]
    )
    expect(page.locator("#empty-action")).to_be_hidden()
    # The notice has room: it does not touch the filters' labels below it.
    gap = page.evaluate(
        "document.querySelector('#filters').getBoundingClientRect().top"
        " - document.querySelector('#no-types').getBoundingClientRect().bottom"
    )
    assert gap >= 8


def test_an_admin_list_shows_other_users_new_exports_by_itself(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    view = ui(stack).open().sign_in("olga", role="admin")
    page = view.page
    expect(page.locator("#empty")).to_be_visible()
    create(stack.client("bob"), "csv", taskName="Bob's new export")
    expect(view.row("Bob's new export")).to_have_count(1, timeout=6_000)  # no Refresh pressed
    expect(view.row("Bob's new export").locator("td.c-owner")).to_have_text("bob")


def test_the_owner_filter_suggests_the_names_it_knows(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    create(stack.client("bob"), "csv", taskName="Bob's orders")
    create(stack.client("alice"), "csv", taskName="Alice's orders")
    admin = ui(stack).open().sign_in("olga", role="admin")
    page = admin.page
    expect(page.locator("#tasks-body tr")).to_have_count(2)
    options = page.eval_on_selector_all("#owners option", "os => os.map((o) => o.value)")
    assert options == ["alice", "bob"]
    page.fill("#f-owner", "bo")
    page.press("#f-owner", "Enter")
    expect(page.locator("#empty-title")).to_have_text("No exports match these filters")
    expect(page.locator("#empty-text")).to_contain_text("must match exactly")
    suggestion = page.locator("#owner-suggest").get_by_role("button", name="bob")
    expect(suggestion).to_be_visible()
    suggestion.click()
    expect(page.locator("#f-owner")).to_have_value("bob")
    expect(admin.row("Bob's orders")).to_have_count(1)
    page.fill("#f-owner", "Alice")
    page.press("#f-owner", "Enter")
    page.locator("#owner-suggest").get_by_role("button", name="alice").click()
    expect(admin.row("Alice's orders")).to_have_count(1)
    # A user's list has no user filter, and its empty text does not mention one.
    user = ui(stack).open().sign_in("alice")
    user.page.select_option("#f-state", "failed")
    expect(user.page.locator("#empty-text")).to_have_text("Try another state or type.")


def test_filters_dates_and_links_after_a_reload(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True})
    alice = stack.client("alice")
    done = create(alice, "csv", taskName="Written in Greenwich", timeZone="UTC",
                  parameters={"from": "1995-09-01", "to": "1995-09-30"})  # fmt: skip
    wait_state(alice, done.json()["taskId"])
    other = create(alice, "csv", taskName="Other one", parameters={"from": "1995-10-01"})
    wait_state(alice, other.json()["taskId"])
    view = ui(stack).open().sign_in()
    page = view.page
    expect(page.locator("#tasks-body tr")).to_have_count(2)
    page.select_option("#f-state", "succeeded")
    page.select_option("#f-type", "ORDERS")
    page.reload()
    expect(page.locator("#f-state")).to_have_value("succeeded")  # kept, like the page size
    expect(page.locator("#f-type")).to_have_value("ORDERS")
    row = view.row("Written in Greenwich")
    # Four-digit years; no "file times in UTC" for a type whose files hold dates only.
    expect(row.locator("td.c-times")).to_contain_text(re.compile(r"\d{1,2}/\d{1,2}/\d{4}, "))
    expect(row.locator("td.c-file")).to_contain_text(re.compile(r"until \d{1,2}/\d{1,2}/\d{4}"))
    expect(row).not_to_contain_text(re.compile("UTC|file times"))
    # One date on the link: the file's; the link itself is renewed with every refresh.
    link = row.locator("a[data-action=download]")
    assert link.get_attribute("title") is None


def test_an_export_that_found_no_rows_says_so(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True})
    alice = stack.client("alice")
    empty = create(alice, "csv", taskName="Orders of 2031", parameters={"from": "2031-01-01"})
    assert wait_state(alice, empty.json()["taskId"])["processed"] == 0
    view = ui(stack).open().sign_in()
    row = view.row("Orders of 2031")
    expect(row.locator(".badge")).to_have_text("Completed")
    expect(row.locator(".note")).to_have_text(
        "No data matched these filters, so the file holds only the column headings."
    )


def test_cancelling_a_queued_export_keeps_the_focus_on_its_row(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    create(stack.client("alice"), "csv", taskName="Not needed after all")
    view = ui(stack).open().sign_in()
    page = view.page
    row = view.row("Not needed after all")
    cancel = row.get_by_role("button", name="Cancel Not needed after all")
    cancel.focus()
    page.keyboard.press("Enter")  # a queued export is cancelled at once, without a question
    expect(row.locator(".badge")).to_have_text("Cancelled")
    expect(page.locator("#confirm")).to_be_hidden()
    expect(row.locator("td.c-state")).to_be_focused()  # where the button was, not <body>
    # A keyboard user sees where the focus went (a mouse user gets no ring: test_actions).
    assert row.locator("td.c-state").evaluate("el => getComputedStyle(el).outlineStyle") == "solid"
    page.keyboard.press("Tab")
    expect(row.get_by_role("button", name="Export Not needed after all again")).to_be_focused()
