"""What tells a person that an export ended, in English and Chinese: a toast with its
Download button, the tab's title while the tab is hidden (which keeps asking, slowly),
the browser notification once they asked for it (never asked on load), how long a copied
link works, and a failing link opened outside the page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.seeding import STATES, seeded, set_task
from tests.support.helpers import Stack, create, read_csv, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

#: The tab is hidden / shown again (another tab, a minimised window).
HIDE = """() => {
  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
  Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
  document.dispatchEvent(new Event('visibilitychange'));
}"""
SHOW = """() => {
  delete document.visibilityState;
  delete document.hidden;
  document.dispatchEvent(new Event('visibilitychange'));
}"""
#: Records every `new Notification(...)` and every permission request, and leaves the
#: browser's own permission answer in place.
CAPTURE_NOTIFICATIONS = """
window.__notes = [];
window.__asked = 0;
const Real = window.Notification;
window.Notification = class {
  constructor(title, options = {}) { window.__notes.push({ title, ...options }); }
  close() {}
  static get permission() { return Real.permission; }
  static requestPermission(...args) { window.__asked += 1; return Real.requestPermission(...args); }
};
"""
TEXT = {
    "en-US": {
        "ready": "“{name}” is ready",
        "download": "Download",
        "title": "({n}) Export ready · Download center",
        "titles": "({n}) Exports ready · Download center",
        "mixed": "({n}) Exports finished · Download center",
        "plain": "Download center · Export Center",
        "notify": "Notify me when ready",
    },
    "zh-CN": {
        "ready": "「{name}」已完成",
        "download": "下载",
        "title": "({n}) 导出完成 · 下载中心",
        "titles": "({n}) 导出完成 · 下载中心",
        "mixed": "({n}) 导出已结束 · 下载中心",
        "plain": "下载中心 · 导出中心",
        "notify": "完成时通知我",
    },
}


@pytest.fixture
def held(make_stack) -> Stack:
    """No worker runs: tasks are put in their states by writing their rows."""
    return make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        limits={"max_active_per_user": 100, "max_active_per_type": 100},
    )


def _list_requests(page: Any) -> list[str]:
    asked: list[str] = []
    page.on("request", lambda r: "/api/v1/exports?" in r.url and asked.append(r.url))
    return asked


def _succeed(stack: Stack, task_id: str) -> None:
    set_task(stack, task_id, **STATES["succeeded"], lease_owner=None, lease_until=None)


@pytest.mark.parametrize(("locale", "name"), [("en-US", "All orders"), ("zh-CN", "全部订单")])
def test_an_export_that_ends_says_so_in_a_toast_with_its_download(make_stack, ui, locale, name):
    stack = make_stack(api={"dev_sign_in": True})
    view = ui(stack, locale=locale).open().sign_in()
    page = view.page
    text = TEXT[locale]
    view.new_export(name=name, fmt="csv", params={"from": "1995-10-01", "to": "1995-10-31"})
    page.click("#create-submit")
    toast = page.locator(".toast", has_text=text["ready"].format(name=name))
    expect(toast).to_be_visible(timeout=30_000)
    expect(toast).to_have_attribute("role", "status")
    # The person looks at the page: the title stays as it is, no count.
    assert page.title() == text["plain"]
    button = toast.get_by_role("button", name=text["download"])
    with page.expect_download() as caught:
        button.click()
    rows = read_csv(Path(caught.value.path()).read_bytes())
    assert len(rows) > 100 and caught.value.suggested_filename == f"{name}.csv"
    expect(toast).to_have_count(0)  # pressed: its work is done
    # Said by the toast (a live region); the screen reader's line does not repeat it.
    done = {"en-US": "completed, ready to download", "zh-CN": "已完成，可以下载了"}[locale]
    expect(page.locator("#live")).not_to_contain_text(done)


@pytest.mark.second_process  # long: runs beside the rest (scripts/test.sh)
@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_hidden_tab_keeps_asking_and_its_title_counts_what_ended(held, ui, locale):
    first = seeded(held, "alice", "running", "Orders A", day=1)
    second = seeded(held, "alice", "running", "Orders B", day=2)
    third = seeded(held, "alice", "running", "Orders C", day=3)
    view = ui(held, locale=locale).open().sign_in()
    page = view.page
    text = TEXT[locale]
    expect(view.row("Orders A").locator(".badge")).to_be_visible()
    assert page.title() == text["plain"]
    page.evaluate(HIDE)
    asked = _list_requests(page)
    _succeed(held, first)
    page.wait_for_function(
        "wanted => document.title === wanted", arg=text["title"].format(n=1), timeout=30_000
    )
    # Slowly: one or two requests while hidden, where a shown tab asks every 2 s.
    assert 1 <= len(asked) <= 2, asked
    _succeed(held, second)
    page.wait_for_function(
        "wanted => document.title === wanted", arg=text["titles"].format(n=2), timeout=30_000
    )
    set_task(held, third, **STATES["failed"], lease_owner=None, lease_until=None)
    page.wait_for_function(
        "wanted => document.title === wanted", arg=text["mixed"].format(n=3), timeout=30_000
    )
    # The toasts are waiting for the person; looking at the tab clears the count.
    expect(page.locator(".toast", has_text=text["ready"].format(name="Orders B"))).to_be_visible()
    page.evaluate(SHOW)
    expect(page).to_have_title(text["plain"])
    # Nothing active any more: a hidden tab then asks nothing at all.
    page.evaluate(HIDE)
    asked.clear()
    page.wait_for_timeout(13_000)
    assert asked == []


def test_notifications_come_only_after_the_person_asked_and_the_browser_allowed(held, ui):
    seeded(held, "alice", "running", "Orders A", day=1)
    second = seeded(held, "alice", "running", "Orders B", day=2)
    third = seeded(held, "alice", "running", "Orders C", day=3)
    view = ui(held, permissions=["notifications"])
    page = view.page
    page.add_init_script(CAPTURE_NOTIFICATIONS)
    view.open().sign_in()
    toggle = page.get_by_role("button", name="Notify me when ready")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("window.__asked") == 0  # never asked on load
    # Not switched on: a hidden tab's title counts, no notification.
    page.evaluate(HIDE)
    _succeed(held, second)
    page.wait_for_function("() => document.title.startsWith('(1)')", timeout=30_000)
    assert page.evaluate("window.__notes") == []
    page.evaluate(SHOW)
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#toasts")).to_contain_text(
        "You will get a browser notification when one of your exports ends."
    )
    assert page.evaluate("localStorage.getItem('ec.notify')") == "on"
    assert page.evaluate("window.__asked") == 0  # already allowed: nothing to ask
    page.evaluate(HIDE)
    _succeed(held, third)
    page.wait_for_function("() => window.__notes.length === 1", timeout=30_000)
    [note] = page.evaluate("window.__notes")
    assert (note["title"], note["body"], note["tag"]) == (
        "“Orders C” is ready",
        "Open the download center to download it.",
        f"export-{third}",
    )
    # Kept across a reload; switched off with the same button.
    page.evaluate(SHOW)
    page.reload()
    toggle = page.get_by_role("button", name="Notify me when ready")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("window.__asked") == 0  # the browser had already allowed it


def test_without_permission_the_browser_is_asked_on_the_press_only(held, ui):
    seeded(held, "alice", "running", "Orders A", day=1)
    view = ui(held, locale="zh-CN")
    page = view.page
    page.add_init_script(CAPTURE_NOTIFICATIONS)
    view.open().sign_in()
    toggle = page.get_by_role("button", name="完成时通知我")
    expect(toggle).to_be_visible()
    page.wait_for_timeout(500)
    assert page.evaluate("window.__asked") == 0
    toggle.click()
    page.wait_for_function("() => window.__asked === 1")
    # Headless Chromium answers without a person: not granted, so nothing is switched on.
    expect(page.locator(".toast-error")).to_have_text(
        re.compile(r"^(浏览器未允许通知，因此不会弹出通知。|浏览器设置中已禁止本网站发送通知。)$")
    )
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("localStorage.getItem('ec.notify')") is None


FORMAT = (
    "([seconds, locale]) => new Intl.DateTimeFormat(locale, {year: 'numeric', month: 'numeric',"
    " day: 'numeric', hour: 'numeric', minute: '2-digit'}).format(new Date(seconds * 1000))"
)


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_copied_link_says_how_long_it_works(make_stack, ui, locale):
    stack = make_stack(api={"dev_sign_in": True})
    alice = stack.client("alice")
    wait_state(
        alice,
        create(alice, "csv", taskName="Shared", parameters={"from": "1995-02-01"}).json()["taskId"],
    )
    view = ui(stack, locale=locale, permissions=["clipboard-read", "clipboard-write"])
    view.open().sign_in()
    page = view.page
    english = locale == "en-US"
    row = view.row("Shared")
    # "Download until" is the file's retention: the page's button renews its link.
    expect(row.locator("td.c-file")).to_contain_text("Download until" if english else "可下载至")
    copy = row.get_by_role(
        "button", name="Copy a download link of Shared" if english else "复制「Shared」的下载链接"
    )
    expect(copy).to_have_text("Copy link" if english else "复制链接")
    copy.click()
    toast = page.locator(".toast-ok")
    expect(toast).to_contain_text("Link copied." if english else "链接已复制。")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link.startswith(stack.url + "/api/v1/exports/") and "signature=" in link
    expires = int(re.search(r"expires=(\d+)", link).group(1))
    stated = page.evaluate(FORMAT, [expires, "en" if english else "zh-CN"])
    # The expiry of the very link that was copied, in the toast and on the button.
    expect(toast).to_have_text(
        f"Link copied. Anyone who has it can download the file until {stated}; after that, "
        "download it from this page."
        if english
        else f"链接已复制。{stated} 之前，任何拿到链接的人都能下载该文件；之后请回到本页下载。"
    )
    expect(copy).to_have_attribute(
        "title",
        f"The copied link works until {stated}" if english else f"复制的链接在 {stated} 前有效",
    )
    # The copied link works on its own, without the page or a token.
    assert httpx.get(link).status_code == 200


@pytest.mark.parametrize(
    ("locale", "title", "back"),
    [
        ("zh-CN", "下载链接已过期", "打开下载中心"),
        ("en-US", "This download link has expired", "Open the download center"),
    ],
)
def test_an_expired_link_opened_in_the_browser_leads_back_to_the_center(
    make_stack, ui, locale, title, back
):
    stack = make_stack(api={"dev_sign_in": True, "download_link_ttl_seconds": 2})
    alice = stack.client("alice")
    task_id = create(alice, "csv", parameters={"from": "1995-02-01"}).json()["taskId"]
    detail = wait_state(alice, task_id)
    view = ui(stack, locale=locale)
    view.allow(403)
    page = view.page
    page.wait_for_timeout(2500)  # the link's two seconds are over
    answer = page.goto(stack.url + detail["downloadUrl"])
    assert answer is not None and answer.status == 403
    expect(page.locator("h1")).to_have_text(title)
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN" if locale == "zh-CN" else "en")
    page.get_by_role("link", name=back).click()
    expect(page).to_have_url(stack.url + "/ui/")
    expect(page.locator("#dev-form")).to_be_visible()
    # The same link asked by a script of the page keeps the API's JSON.
    body = page.evaluate("url => fetch(url).then((r) => r.json())", detail["downloadUrl"])
    assert body["code"] == "LINK_EXPIRED"
