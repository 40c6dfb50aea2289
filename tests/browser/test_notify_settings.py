"""The Notifications view in Chromium: a person in Chinese chooses e-mail and the page
for failures only, saves, and the API answers those defaults; an English tenant admin
adds a webhook endpoint (its secret shown once and never again), sends a test event that
a real receiver on loopback verifies with that secret, reads the delivery history and
delivers the event again with the same event id."""

from __future__ import annotations

from typing import Any

import pytest

from export_center.repository import inbox
from tests.support.webhook_receiver import Receiver

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser


def language_of_user(stack: Any, user: str) -> str | None:
    with stack.runtime.engine.connect() as conn:
        return inbox.reachable(conn, "t1", user).language


@pytest.fixture
def receiver() -> Any:
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def stack(make_stack: Any) -> Any:
    return make_stack(
        api={"dev_sign_in": True},
        notify={
            "loop_seconds": 0.2,
            "smtp_host": "127.0.0.1",
            "smtp_port": 1,  # never used here: no export ends in this test
            "email_allowed_domains": ["example.cn"],
            "webhook_allowed_hosts": ["127.0.0.1"],
        },
    )


def test_my_defaults_in_chinese_are_saved_and_answered_by_the_api(stack: Any, ui: Any) -> None:
    view = ui(stack, locale="zh-CN").open().sign_in("li.lei")
    view.allow(422)  # the address outside the allowed domains, on purpose
    page = view.page
    page.locator('#views [data-view="notify"]').click()
    expect(page.locator("#notify-title")).to_have_text("通知设置")
    # The built-in default: the page, for ready, failed and paused.
    expect(page.locator("#nd-page")).to_be_checked()
    expect(page.locator("#nd-email")).not_to_be_checked()
    expect(page.locator("#nd-page-export-succeeded")).to_be_checked()
    expect(page.locator("#nd-page-export-expiring")).not_to_be_checked()
    # The token has no e-mail: the page says an address is needed.
    expect(page.locator("#nd-form")).to_contain_text("系统中没有你本人的邮箱地址")
    page.check("#nd-email")
    page.fill("#nd-to", "li.lei@example.com")
    page.click("#nd-save")
    expect(page.locator("#nd-error")).to_contain_text("不允许向该邮箱所在的域名发送邮件")
    page.fill("#nd-to", "li.lei@example.cn")
    # The page only for failures; e-mail for ready files and cancellations.
    page.uncheck("#nd-page-export-succeeded")
    page.uncheck("#nd-page-schedule-paused")
    page.uncheck("#nd-mail-export-failed")
    page.uncheck("#nd-mail-schedule-paused")
    page.check("#nd-mail-export-cancelled")
    page.click("#nd-save")
    expect(page.locator(".toast").last).to_contain_text("已保存")
    saved = stack.client("li.lei").get("/api/v1/me/notification-defaults").json()
    mail = ["export.succeeded", "export.cancelled"]
    assert saved["notify"] == [
        {"channel": "page", "events": ["export.failed"]},
        {"channel": "email", "to": "li.lei@example.cn", "events": mail},
    ]
    # A reload shows what was saved, and saving it untouched changes nothing.
    page.reload()
    page.locator('#views [data-view="notify"]').click()
    expect(page.locator("#nd-email")).to_be_checked()
    expect(page.locator("#nd-to")).to_have_value("li.lei@example.cn")
    expect(page.locator("#nd-page-export-succeeded")).not_to_be_checked()
    expect(page.locator("#nd-page-export-failed")).to_be_checked()
    expect(page.locator("#nd-mail-export-cancelled")).to_be_checked()
    page.click("#nd-save")
    expect(page.locator(".toast").last).to_contain_text("已保存")
    again = stack.client("li.lei").get("/api/v1/me/notification-defaults").json()
    assert again["notify"] == saved["notify"]
    # The page's language, not the browser's, is the language of the person's e-mails.
    assert language_of_user(stack, "li.lei") == "zh"
    page.click("#lang-switch")
    expect(page.locator("#notify-title")).to_have_text("Notifications")
    page.click("#nd-save")
    expect(page.locator(".toast").last).to_contain_text("Saved")
    assert language_of_user(stack, "li.lei") == "en"
    # A person without the webhook permission sees no endpoints section (and no stray
    # text after the form).
    expect(page.locator("#wh-title")).to_have_count(0)
    assert "null" not in page.locator("#notify-settings").inner_text()


def test_an_admin_adds_an_endpoint_tests_it_and_delivers_again(
    stack: Any, ui: Any, receiver: Receiver
) -> None:
    view = ui(stack, locale="en-US").open().sign_in("ada", role="admin")
    view.allow(422, 409)  # a host outside the allow-list, the same URL twice: on purpose
    page = view.page
    page.locator('#views [data-view="notify"]').click()
    expect(page.locator("#wh-title")).to_have_text("Webhook endpoints of your tenant")
    expect(page.locator("#wh-empty")).to_be_visible()
    page.fill("#wh-url", "http://10.1.2.3/hook")
    page.click("#wh-submit")
    expect(page.locator("#wh-error")).to_contain_text("This host is not allowed")
    page.fill("#wh-url", receiver.url)
    page.click("#wh-submit")
    secret = page.locator("#wh-secret-value").inner_text()
    assert secret.startswith("whsec_")
    receiver.secrets = [secret]
    row = page.locator("#wh-body tr[data-hook]")
    expect(row).to_have_count(1)
    expect(row.locator(".hook-url")).to_have_text(receiver.url)
    # The same URL again is refused, in words.
    page.fill("#wh-url", receiver.url)
    page.click("#wh-submit")
    expect(page.locator("#wh-error")).to_contain_text("already sends to this URL")
    row.locator('[data-action="test"]').click()
    expect(page.locator(".toast").last).to_contain_text("Test event queued")
    for _ in range(100):  # the notifier looks every 0.2 s
        if receiver.deliveries:
            break
        page.wait_for_timeout(100)
    (first,) = receiver.deliveries
    assert first.verified == {secret: True} and first.event["type"] == "webhook.test"
    # The history shows it delivered; deliver it again by hand: the same event id.
    # The test button opened the history; close it and open it again to reload it.
    row.locator('[data-action="deliveries"]').click()
    page.locator('[data-action="deliveries"]').click()
    item = page.locator("ul.deliveries li").first
    expect(item).to_contain_text("Delivered", timeout=10_000)
    expect(item).to_contain_text("HTTP 200")
    expect(item).to_contain_text("Test event")
    item.locator('[data-action="redeliver"]').click()
    expect(page.locator(".toast").last).to_contain_text("same event id")
    for _ in range(100):
        if len(receiver.deliveries) == 2:
            break
        page.wait_for_timeout(100)
    ids = [d.headers["export-center-event-id"] for d in receiver.deliveries]
    assert len(ids) == 2 and ids[0] == ids[1]
    # Switched off, it offers no test and says why; switched on again, it does.
    row.locator('[data-action="toggle"]').click()
    expect(page.locator(".toast").last).to_contain_text("Switched off")
    expect(row.locator(".badge")).to_have_text("Off")
    expect(row.locator('[data-action="test"]')).to_have_count(0)
    row.locator('[data-action="toggle"]').click()
    expect(row.locator(".badge")).to_have_text("On")
    # The secret is shown once: a reload lists the endpoint without it.
    page.reload()
    page.locator('#views [data-view="notify"]').click()
    expect(page.locator("#wh-body tr[data-hook]")).to_have_count(1)
    expect(page.locator("#wh-secret")).to_have_count(0)
    assert secret not in page.content()
