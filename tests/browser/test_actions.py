"""Actions from the page: cancel a running export, retry a failed one (the FLAKY fault
provider of tests/support/fault_provider.py), and the 409 / 429 answers as readable messages."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.support.fault_provider import FAULT_TOKEN, registry_file
from tests.support.helpers import create, read_csv, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser


@pytest.fixture
def flaky_stack(make_stack, faulty, tmp_path):
    registry = registry_file(tmp_path, faulty.url, max_attempts=1)
    return make_stack(
        export_types_file=str(registry),
        provider={"internal_token": FAULT_TOKEN},
        api={"dev_sign_in": True},
    )


def _rows(text: str) -> int:
    """The first number of a progress line ("12,000 of 100,000 rows")."""
    match = re.search(r"[\d,]+", text)
    assert match, text
    return int(match.group().replace(",", ""))


def test_cancel_a_running_full_export(flaky_stack, faulty, ui):
    faulty.reset(rows=100_000, sleep_seconds=0.25)  # 100 batches of 1,000: about 25 s
    view = ui(flaky_stack).open().sign_in()
    page = view.page
    view.new_export(export_type="FLAKY", name="Everything, slowly", fmt="xlsx")
    page.click("#create-submit")
    row = view.row("Everything, slowly")
    expect(row.locator(".badge")).to_have_text("Running", timeout=20_000)
    # Each batch is fetched, then written: the phase says which, as it happens.
    expect(row.locator(".phase")).to_have_text(re.compile(r"^(Reading data|Writing the file)$"))
    # Live: the numbers move without a reload, with a rate and an ETA.
    expect(row.locator(".rows")).to_have_text(re.compile(r"^[1-9][\d,]* of 100,000 rows$"))
    first = _rows(row.locator(".rows").inner_text())
    expect(row.locator(".rows")).not_to_have_text(re.compile(rf"^{first:,} of"), timeout=10_000)
    assert _rows(row.locator(".rows").inner_text()) > first
    expect(row.locator(".c-progress .sub")).to_have_text(re.compile(r"rows/s · about .+ left$"))
    fraction = row.locator("progress").evaluate("el => el.value / el.max")
    assert 0 < fraction < 1
    expect(row.locator(".pct")).to_have_text(re.compile(r"^\d{1,2}%$"))
    # A running export is cancelled only once the person confirms, in the page's words.
    cancel = row.get_by_role("button", name="Cancel Everything, slowly")
    cancel.click()
    confirm = page.locator("#confirm")
    expect(confirm).to_be_visible()
    expect(confirm.locator("#confirm-title")).to_have_text("Cancel “Everything, slowly”?")
    expect(confirm.locator("#confirm-text")).to_contain_text(re.compile(r"[\d,]+ of 100,000 rows"))
    expect(page.locator("#confirm-no")).to_be_focused()  # the safe answer is the default
    page.click("#confirm-no")  # "Keep running"
    expect(confirm).to_be_hidden()
    expect(cancel).to_be_focused()
    page.wait_for_timeout(500)
    expect(row.locator(".badge")).to_have_text("Running")
    cancel.click()
    started = time.monotonic()
    page.click("#confirm-yes")
    expect(page.locator("#toasts")).to_contain_text("Stopping “Everything, slowly”")
    expect(row.locator(".badge")).to_have_text("Cancelled", timeout=10_000)
    assert time.monotonic() - started <= 10
    # "Stopping…" is over once the row says Cancelled: the toast says it ended instead.
    expect(page.locator("#toasts")).not_to_contain_text("Stopping")
    # (The "created" toast may still be showing on a slow machine: pick the cancel one.)
    ended = page.locator("#toasts .toast-ok", has_text="cancelled")
    expect(ended).to_have_text("“Everything, slowly” is cancelled.")
    # The focus stays on the row (its state), not lost to the top of the page; after a
    # mouse click it shows no ring (a leftover orange box reads as an error).
    assert page.evaluate("document.activeElement.closest('tr')?.dataset.taskId")
    expect(row.locator("td.c-state")).to_be_focused()
    assert row.locator("td.c-state").evaluate("el => getComputedStyle(el).outlineStyle") == "none"
    expect(row.locator("a[data-action=download]")).to_have_count(0)
    expect(row.get_by_role("button", name="Cancel Everything, slowly")).to_have_count(0)
    expect(row.get_by_role("button", name="Export Everything, slowly again")).to_be_visible()
    expect(row.locator(".note")).to_have_text("You cancelled this export.")
    # How far it got stays visible.
    detail = flaky_stack.client("alice").get("/api/v1/exports").json()["items"][0]
    assert 0 < detail["processed"] < 100_000
    expect(row.locator(".rows")).to_have_text(f"Stopped at {detail['processed']:,} of 100,000 rows")
    # Said once, politely, to a screen reader: by the toast (a status in a polite live
    # region), so the page's own live line does not say it again.
    done = page.locator("#toasts .toast-ok", has_text="“Everything, slowly” is cancelled.")
    expect(done).to_have_attribute("role", "status")
    expect(page.locator("#toasts")).to_have_attribute("aria-live", "polite")
    expect(page.locator("#live")).not_to_contain_text("cancelled")
    assert detail["state"] == "cancelled" and detail["downloadUrl"] is None
    assert list(flaky_stack.runtime.storage.list()) == []


def test_a_failed_export_explains_itself_and_is_retried_from_the_page(flaky_stack, faulty, ui):
    faulty.reset(rows=2500, fail_versions={1}, fail_status=400, fail_at_batch=2)
    alice = flaky_stack.client("alice", perms=["export:flaky:create"])
    task_id = create(alice, "csv", exportType="FLAKY", taskName="Flaky ids").json()["taskId"]
    assert wait_state(alice, task_id)["state"] == "failed"
    view = ui(flaky_stack).open().sign_in()
    page = view.page
    row = view.row("Flaky ids")
    expect(row.locator(".badge")).to_have_text("Failed")
    expect(row.locator(".note")).to_have_text(
        "The data source refused the request. Try again later; if it fails again, tell an "
        "administrator."
    )
    # A sentence per failure code, never the internal text ("fetch: batch 2 (cursor …").
    expect(row.locator(".note summary")).to_have_count(0)
    expect(row).not_to_contain_text("batch")
    expect(row.locator("td.c-state .attempt")).to_have_count(0)  # one attempt: no count
    expect(row.locator("a[data-action=download]")).to_have_count(0)
    expect(row.locator("[data-action=cancel]")).to_have_count(0)
    row.get_by_role("button", name="Retry Flaky ids").click()
    expect(page.locator("#toasts")).to_contain_text("“Flaky ids” is queued again.")
    expect(row.locator(".badge")).to_have_text("Completed", timeout=30_000)
    expect(row.locator(".note")).to_have_count(0)
    expect(row.locator("[data-action=retry]")).to_have_count(0)
    with page.expect_download() as caught:
        row.get_by_role("link", name="Download Flaky ids").click()
    body = read_csv(Path(caught.value.path()).read_bytes())
    assert [int(r[0]) for r in body[1:]] == list(range(1, 2501))
    assert {r["version"] for r in faulty.behaviour.requests} == {1, 2}


def test_a_429_says_when_to_try_again(make_stack, ui):
    stack = make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        limits={"max_active_per_user": 1},
    )
    alice = stack.client("alice")
    create(alice, "csv", taskName="Waiting", parameters={"from": "1995-01-01", "to": "1995-01-31"})
    view = ui(stack).open().sign_in()
    view.allow(429)
    page = view.page
    expect(view.row("Waiting").locator(".badge")).to_have_text("Queued")
    expect(view.row("Waiting").locator(".c-progress")).to_contain_text("Waiting for a free worker")
    view.new_export(name="One too many", params={"from": "1995-02-01", "to": "1995-02-28"})
    page.click("#create-submit")
    error = page.locator("#create-error")
    expect(error).to_contain_text("You already have as many exports queued or running as allowed.")
    again_at = re.compile(r"You can try again after \d{1,2}:\d{2}:\d{2}\s[AP]M\.")
    expect(error).to_contain_text(again_at)
    expect(error).not_to_contain_text("you already have")  # the server's English stays out
    shown = re.search(r"after (\d{1,2}:\d{2}:\d{2}\s[AP]M)", error.inner_text())
    assert shown
    # Retry-After: 10 s (the queued export has no rate yet to estimate its end).
    expected = page.evaluate(
        "() => new Date(Date.now() + 10000).toLocaleTimeString('en-US', "
        "{timeStyle: 'medium', timeZone: 'Asia/Shanghai'})"
    )
    assert abs(_seconds(shown.group(1)) - _seconds(expected)) <= 5
    expect(page.locator("#create")).to_be_visible()  # the form stays, filled in
    expect(page.locator("#c-name")).to_have_value("One too many")


def _seconds(clock: str) -> int:
    match = re.match(r"(\d{1,2}):(\d{2}):(\d{2})\s([AP])M", clock)
    assert match, clock
    hours = int(match.group(1)) % 12 + (12 if match.group(4) == "P" else 0)
    return hours * 3600 + int(match.group(2)) * 60 + int(match.group(3))


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_409_is_a_readable_message_and_the_row_catches_up(make_stack, ui, locale):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    alice = stack.client("alice")
    task_id = create(alice, "csv", taskName="Cancelled twice").json()["taskId"]
    view = ui(stack, locale=locale).open().sign_in()
    view.allow(409)
    page = view.page
    row = view.row("Cancelled twice")

    def cancelled_elsewhere_first(route):
        alice.post(f"/api/v1/exports/{task_id}/cancel")  # another tab won the race
        route.continue_()

    page.route("**/cancel", cancelled_elsewhere_first)
    label = {"en-US": "Cancel Cancelled twice", "zh-CN": "取消「Cancelled twice」"}[locale]
    row.get_by_role("button", name=label).click()
    toast = page.locator(".toast-error")
    # The page's sentence only: not the server's "the export has already been cancelled".
    expect(toast).to_have_text(
        {
            "en-US": "This export has already ended, so it cannot be cancelled.",
            "zh-CN": "该导出已结束，无法取消。",
        }[locale]
    )
    expect(row.locator(".badge")).to_have_text({"en-US": "Cancelled", "zh-CN": "已取消"}[locale])
    expect(row.locator("[data-action=cancel]")).to_have_count(0)
