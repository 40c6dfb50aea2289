"""A task's downloads and the revoke actions, in Chromium, in English and in Chinese: the
owner downloads the file from the page, opens "Downloads" and sees the download (who,
how, from which address, which link); revokes that link (it answers 410 LINK_REVOKED
from then on), then every link; the page's fresh link downloads again."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import update

from export_center.repository.tables import TASKS
from tests.support.helpers import create, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

SMALL = {"from": "1995-09-01", "to": "1995-09-03"}

TEXTS = {
    "en": {
        "button": "Downloads",
        "title": "Downloads of “{name}”",
        "link": "Download link",
        "signed_in": "Signed in",
        "served": "Served",
        "revoke": "Revoke this link",
        "revoked": "Link {link} is revoked",
        "refused": "Refused (LINK_REVOKED)",
        "all": "Revoke all links",
        "all_done": "Every link of “{name}” handed out so far is revoked",
    },
    "zh-CN": {
        "button": "下载记录",
        "title": "「{name}」的下载记录",
        "link": "下载链接",
        "signed_in": "登录后下载",
        "served": "已下载",
        "revoke": "作废此链接",
        "revoked": "链接 {link} 已作废",
        "refused": "已拒绝（LINK_REVOKED）",
        "all": "作废全部链接",
        "all_done": "「{name}」此前发出的所有链接均已作废",
    },
}


@pytest.fixture
def stack(make_stack: Any) -> Any:
    return make_stack(api={"dev_sign_in": True})


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_the_owner_sees_the_downloads_and_revokes_a_link_then_all(
    stack: Any, ui: Any, locale: str, tmp_path: Any
) -> None:
    text = TEXTS[locale]
    name = f"Audited {locale}"
    api = stack.client("alice")
    task_id = create(api, "csv", taskName=name, parameters=SMALL).json()["taskId"]
    assert wait_state(api, task_id)["state"] == "succeeded"
    view = ui(stack, locale=locale).open().sign_in("alice")
    view.allow(410)
    page = view.page
    row = view.row(name)
    link = row.locator('a[data-action="download"]')
    expect(link).to_be_visible()
    with page.expect_download() as caught:
        link.click()
    caught.value.save_as(tmp_path / "first.csv")
    href = link.get_attribute("href") or ""
    link_id = parse_qs(urlsplit(href).query)["link"][0]

    row.locator('button[data-action="downloads"]').click()
    expect(page.locator("#downloads-title")).to_have_text(text["title"].format(name=name))
    rows = page.locator("#downloads-list tbody tr")
    expect(rows.first).to_be_visible()
    served = page.locator(f'#downloads-list tbody tr[data-type="link"][data-link="{link_id}"]')
    expect(served.first.locator(".d-type")).to_have_text(text["link"])
    expect(served.first.locator(".d-status")).to_have_text(text["served"])
    expect(served.first.locator(".d-user")).to_have_text("alice")
    expect(served.first.locator(".d-address")).to_have_text("127.0.0.1")

    button = page.locator(f'#downloads-list button.revoke-link[data-link="{link_id}"]')
    expect(button).to_have_text(text["revoke"])
    button.click()
    expect(page.locator("#downloads-message")).to_contain_text(text["revoked"].format(link=link_id))
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    gone = anonymous.get(href)
    assert (gone.status_code, gone.json()["code"]) == (410, "LINK_REVOKED")
    page.locator("#downloads-close").click()
    row.locator('button[data-action="downloads"]').click()  # the refusal is listed now
    refused = page.locator('#downloads-list tbody tr[data-status="410"]')
    expect(refused.first.locator(".d-status")).to_have_text(text["refused"])
    expect(page.locator(f'button.revoke-link[data-link="{link_id}"]')).to_have_count(0)

    page.locator("#revoke-all").click()
    expect(page.locator("#revoke-all")).to_have_text(text["all"])
    expect(page.locator("#downloads-message")).to_contain_text(text["all_done"].format(name=name))
    page.locator("#downloads-close").click()
    # The list was refreshed after the revoke: its link is fresh and downloads again.
    expect(link).not_to_have_attribute("href", href)
    fresh = link.get_attribute("href") or ""
    assert anonymous.get(fresh).status_code == 200
    # Once the file has expired, its downloads are still there to look at.
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(TASKS).where(TASKS.c.task_no == task_id).values(status="EXPIRED"))
    page.click("#refresh")
    expect(link).to_have_count(0)
    row.locator('button[data-action="downloads"]').click()
    expect(page.locator("#downloads-list tbody tr").first).to_be_visible()
    assert view.unexpected() == []
    anonymous.close()
