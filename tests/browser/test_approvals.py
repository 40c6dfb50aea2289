"""The approval queue in Chromium (issue 25 item 5): an approver sees the exports of
their tenant waiting for approval, approves one (it runs to the end) and rejects another
with a reason; the requester's list shows the rejected export with who and why. Once in
English, once in Chinese."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fault_provider import FAULT_TOKEN, flaky, registry_file
from tests.support.helpers import wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

CREATE = "export:flaky:create"
APPROVE = "export:flaky:approve"

TEXTS = {
    "en-US": {
        "tab": "Approvals",
        "title": "Exports waiting for your approval",
        "approved": "Approved",
        "reason_needed": "Say why you reject it",
        "rejected_toast": "Rejected",
        "none": "Nothing is waiting for your approval.",
        "state": "Rejected",
        "note": "Rejected by bob: not this quarter",
        "awaiting": "Awaiting approval",
        "why": "Every export of this type needs approval",
    },
    "zh-CN": {
        "tab": "审批",
        "title": "等待您审批的导出",
        "approved": "已通过",
        "reason_needed": "请填写驳回原因",
        "rejected_toast": "已驳回",
        "none": "目前没有需要您审批的导出。",
        "state": "已驳回",
        "note": "已被 bob 驳回：not this quarter",
        "awaiting": "待审批",
        "why": "此类导出均需审批",
    },
}


@pytest.fixture
def stack(make_stack: Any, faulty: Any, tmp_path: Any) -> Any:
    path = registry_file(tmp_path, faulty.url)
    path.write_text(
        path.read_text() + f"  approval: {{always: true, approver_permission: {APPROVE}}}\n"
    )
    faulty.reset(rows=30)
    return make_stack(export_types_file=str(path), provider={"internal_token": FAULT_TOKEN})


def sign_in_with_token(view: Any, token: str) -> None:
    page = view.page
    page.goto(view.url)
    page.locator("#token-box").wait_for()
    page.evaluate("document.getElementById('token-box').open = true")
    page.fill("#token-input", "Bearer " + token)
    page.click('#token-form button[type="submit"]')
    page.locator("#center").wait_for()


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_an_approver_approves_and_rejects_and_the_requester_reads_why(
    stack: Any, ui: Any, locale: str
) -> None:
    text = TEXTS[locale]
    alice = stack.client("alice", perms=[CREATE])
    first = flaky(alice, taskName="first quarter").json()["taskId"]
    second = flaky(alice, taskName="second quarter", columns=["id"]).json()["taskId"]
    view = ui(stack, locale=locale)
    sign_in_with_token(view, stack.token("bob", perms=[APPROVE]))
    page = view.page
    tab = page.locator('#views [data-view="approvals"]')
    expect(tab).to_have_text(text["tab"])
    tab.click()
    expect(page.locator("#approvals-title")).to_have_text(text["title"])
    expect(page.locator("#ap-table tbody tr")).to_have_count(2)
    row = page.locator(f'#ap-table tr[data-task="{first}"]')
    expect(row).to_contain_text("alice")
    expect(row).to_contain_text(text["why"])
    row.locator(f'button[data-approve="{first}"]').click()
    expect(page.locator(".toast").last).to_contain_text(text["approved"])
    expect(page.locator("#ap-table tbody tr")).to_have_count(1)
    assert wait_state(alice, first, timeout=60)["state"] == "succeeded"
    other = page.locator(f'#ap-table tr[data-task="{second}"]')
    other.locator(f'button[data-reject="{second}"]').click()
    other.locator(f'button[data-confirm-reject="{second}"]').click()  # no reason yet
    expect(page.locator(".toast").last).to_contain_text(text["reason_needed"])
    assert alice.get(f"/api/v1/exports/{second}").json()["state"] == "awaiting_approval"
    page.fill(f"#ap-reason-{second}", "not this quarter")
    other.locator(f'button[data-confirm-reject="{second}"]').click()
    expect(page.locator(".toast").last).to_contain_text(text["rejected_toast"])
    expect(page.locator("#ap-none")).to_have_text(text["none"])
    detail = alice.get(f"/api/v1/exports/{second}").json()
    assert detail["state"] == "rejected"
    assert detail["error"]["message"] == "rejected by bob: not this quarter"
    # The requester's page: the rejected export with who and why; no Approvals tab.
    third = flaky(alice, taskName="third quarter", columns=["amount"]).json()["taskId"]
    mine = ui(stack, locale=locale)
    sign_in_with_token(mine, stack.token("alice", perms=[CREATE]))
    expect(mine.row("second quarter")).to_contain_text(text["state"])
    expect(mine.row("second quarter")).to_contain_text(text["note"])
    expect(mine.row("third quarter")).to_contain_text(text["awaiting"])
    expect(mine.page.locator('#views [data-view="approvals"]')).to_be_hidden()
    assert third
