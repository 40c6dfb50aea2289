"""The right words for what happened to an export, in English and Chinese: who cancelled
it, a cancel that arrived after it finished, a resumed export that has parts but no row
yet, a retry that ran and failed again (and a Retry that says it will probably not help),
a failed card on a phone without an empty label, and the text before the script loads."""

from __future__ import annotations

import re

import httpx
import pytest

from export_center import operations, repository
from tests.browser.seeding import STATES, seeded, set_task
from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import Stack, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

SEES_ALL = ["export:orders:create", "platform:download:all"]


@pytest.fixture
def held(make_stack) -> Stack:
    """No worker runs: tasks are put in their states by writing their rows."""
    return make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        limits={"max_active_per_user": 100, "max_active_per_type": 100},
    )


WHO = {
    "en-US": {
        "admin": "Cancelled by an administrator (admin-1).",
        "you": "You cancelled this export.",
        "operator": "Cancelled by an operator.",
        "owner": "Cancelled by its owner, bob.",
    },
    "zh-CN": {
        "admin": "已被管理员 admin-1 取消。",
        "you": "你已取消此导出。",
        "operator": "已被运维人员取消。",
        "owner": "已由创建人 bob 取消。",
    },
}


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_cancelled_export_says_who_cancelled_it(held, ui, locale):
    bob = held.client("bob")
    admin = held.client("admin-1", perms=SEES_ALL)
    by_admin = seeded(held, "bob", "queued", "Stopped by admin", day=1)
    by_bob = seeded(held, "bob", "queued", "Stopped by bob", day=2)
    by_operator = seeded(held, "bob", "queued", "Stopped at the CLI", day=3)
    assert admin.post(f"/api/v1/exports/{by_admin}/cancel").status_code == 202
    assert bob.post(f"/api/v1/exports/{by_bob}/cancel").status_code == 202
    task = operations.find_task(held.runtime, by_operator)
    operations.cancel_task(held.runtime, task, actor="operator:ops", reason="cleanup")
    words = WHO[locale]
    view = ui(held, locale=locale).open().sign_in("bob")
    expect(view.row("Stopped by admin").locator(".note")).to_have_text(words["admin"])
    expect(view.row("Stopped by bob").locator(".note")).to_have_text(words["you"])
    expect(view.row("Stopped at the CLI").locator(".note")).to_have_text(words["operator"])
    # The administrator reads the same tasks from their side.
    other = ui(held, locale=locale).open().sign_in("admin-1", role="admin")
    expect(other.row("Stopped by admin").locator(".note")).to_have_text(words["you"])
    expect(other.row("Stopped by bob").locator(".note")).to_have_text(words["owner"])


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_an_export_cancelled_by_someone_else_while_watched_says_so(held, ui, locale):
    task_id = seeded(held, "bob", "running", "Watched", day=1)
    view = ui(held, locale=locale).open().sign_in("bob")
    page = view.page
    row = view.row("Watched")
    expect(row.locator(".badge")).to_have_text("Running" if locale == "en-US" else "进行中")
    assert (
        held.client("admin-1", perms=SEES_ALL)
        .post(f"/api/v1/exports/{task_id}/cancel")
        .json()["cancelRequested"]
    )
    with held.runtime.engine.begin() as conn:  # the worker stops, as it would on the flag
        task = repository.read_task_by_no(conn, task_id)
        assert task is not None
        assert repository.finish_cancelled(conn, task.id, task.dispatch_version, "seed")
    expect(row.locator(".note")).to_have_text(WHO[locale]["admin"], timeout=10_000)
    toast = {"en-US": "“Watched”: ", "zh-CN": "「Watched」："}[locale] + WHO[locale]["admin"]
    expect(page.locator(".toast-info")).to_have_text(toast)


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_cancel_that_lost_the_race_tells_the_person_who_cancelled(held, ui, locale):
    task_id = seeded(held, "alice", "running", "Nearly done", day=1)
    view = ui(held, locale=locale).open().sign_in()
    page = view.page
    row = view.row("Nearly done")
    english = locale == "en-US"
    row.get_by_role(
        "button", name="Cancel Nearly done" if english else "取消「Nearly done」"
    ).click()

    page.click("#confirm-yes")
    stopping = "Stopping “Nearly done”…" if english else "正在停止「Nearly done」…"
    expect(page.locator("#toasts")).to_contain_text(stopping)
    # The worker committed the file before it read the flag.
    set_task(held, task_id, **STATES["succeeded"], lease_owner=None, lease_until=None)
    race = (
        "“Nearly done” finished before the cancel arrived; the file is ready."
        if english
        else "「Nearly done」在取消请求送达前已完成，文件可以下载。"
    )
    toast = page.locator(".toast", has_text=race)
    expect(toast).to_be_visible(timeout=10_000)
    expect(toast.get_by_role("button", name="Download" if english else "下载")).to_be_visible()
    expect(page.locator("#toasts")).not_to_contain_text(stopping)
    expect(row.locator(".badge")).to_have_text("Completed" if english else "已完成")
    expect(row.locator(".note")).to_have_text(
        "It finished before the cancel arrived, so the file is ready."
        if english
        else "取消请求送达前导出已完成，文件可以下载。"
    )


def test_a_cancel_refused_because_the_export_just_finished_says_the_file_is_ready(held, ui):
    task_id = seeded(held, "alice", "running", "Just done", day=1)
    view = ui(held).open().sign_in()
    view.allow(409)
    page = view.page

    def finished_first(route):
        set_task(held, task_id, **STATES["succeeded"], lease_owner=None, lease_until=None)
        route.continue_()

    page.route("**/cancel", finished_first)
    view.row("Just done").get_by_role("button", name="Cancel Just done").click()
    page.click("#confirm-yes")
    toast = page.locator(".toast-ok")
    expect(toast).to_contain_text(
        "“Just done” finished before the cancel arrived; the file is ready."
    )
    expect(toast.get_by_role("button", name="Download")).to_be_visible()
    # Not "cannot be cancelled", and not a second "is ready".
    expect(page.locator(".toast-error")).to_have_count(0)
    expect(page.locator(".toast")).to_have_count(1)
    expect(view.row("Just done").locator(".badge")).to_have_text("Completed")


@pytest.mark.parametrize(
    ("locale", "parts", "rows"),
    [
        ("en-US", "3 of 16 parts done", "3,072 of 9,000 rows"),
        ("zh-CN", "已完成 3 / 16 个分片", "3,072 / 9,000 条"),
    ],
)
def test_a_resumed_export_never_reads_zero_rows_next_to_finished_parts(
    held, ui, locale, parts, rows
):
    task_id = seeded(
        held, "alice", "running", "Resumed", day=1, processed_rows=0, shards_done=3, shards_total=16
    )
    view = ui(held, locale=locale).open().sign_in()
    row = view.row("Resumed")
    progress = row.locator("td.c-progress")
    expect(progress.locator(".shards")).to_have_text(parts)
    expect(progress.locator(".rows")).to_have_text("")
    expect(progress).not_to_contain_text(re.compile(r"(^|\D)0 (rows|of)|已处理 0|0 /"))
    # No bar at 0 %: it has parts done, just no row of this attempt yet.
    assert progress.locator("progress").evaluate("el => el.hasAttribute('value')") is False
    expect(progress.locator(".pct")).to_have_text("")
    # Rows arrive (the kept rows, then new ones): the usual line comes back.
    set_task(held, task_id, processed_rows=3072)
    expect(progress.locator(".rows")).to_have_text(rows, timeout=10_000)
    expect(progress.locator(".shards")).to_have_text(parts)


RETRIED = {
    "en-US": (
        "Retried at {time}, failed again: The data source refused the request. Try again "
        "later; if it fails again, tell an administrator."
    ),
    "zh-CN": "已于 {time} 重试，仍然失败：数据源拒绝了该请求。请稍后重试；如仍失败，请联系管理员。",
}
UNLIKELY = {
    "en-US": "A retry will probably fail the same way until the data source is fixed.",
    "zh-CN": "在数据源修复之前，重试很可能仍会以同样的方式失败。",
}


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_retry_that_failed_again_says_that_it_ran(flaky_stack, faulty, ui, locale):
    stack = flaky_stack(max_attempts=1, api={"dev_sign_in": True})
    faulty.reset(rows=500, always_fail=True, fail_status=404)
    alice = stack.client("alice", perms=FLAKY)
    task_id = flaky(alice, taskName="Refused").json()["taskId"]
    assert wait_state(alice, task_id)["error"]["code"] == "PROVIDER_REJECTED"
    faulty.reset(rows=500, always_fail=True, fail_status=503)
    down = wait_state(alice, flaky(alice, taskName="Down").json()["taskId"])
    assert down["error"]["code"] == "PROVIDER_UNAVAILABLE"
    view = ui(stack, locale=locale).open().sign_in()
    page = view.page
    english = locale == "en-US"
    row = view.row("Refused")
    retry = row.get_by_role("button", name="Retry Refused" if english else "重试「Refused」")
    # The Retry says, before it is pressed, that it will probably not help.
    hint = row.locator(".retry-hint")
    expect(hint).to_have_text(UNLIKELY[locale])
    assert retry.get_attribute("aria-describedby") == hint.get_attribute("id")
    faulty.reset(rows=500, always_fail=True, fail_status=404)
    retry.click()
    again = "“Refused” failed again." if english else "「Refused」再次失败。"
    expect(page.locator(".toast-error", has_text=again)).to_be_visible(timeout=30_000)
    detail = alice.get(f"/api/v1/exports/{task_id}").json()
    assert detail["state"] == "failed" and detail["lastRetry"]
    clock = page.evaluate(
        "([iso, locale]) => new Intl.DateTimeFormat(locale, {hour: 'numeric', minute: '2-digit'})"
        ".format(new Date(iso))",
        [detail["lastRetry"]["at"], "en" if english else "zh-CN"],
    )
    expect(row.locator(".note")).to_have_text(RETRIED[locale].format(time=clock))
    expect(row.locator(".badge")).to_have_text("Failed" if english else "失败")
    # A failure a retry may well cure has no such caveat.
    expect(view.row("Down").locator("[data-action=retry]")).to_be_visible()
    expect(view.row("Down").locator(".retry-hint")).to_have_count(0)


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_failed_card_on_a_phone_has_no_empty_label(held, ui, locale):
    seeded(held, "alice", "failed", "Failed on a phone", day=1)
    seeded(held, "alice", "running", "Running on a phone", day=2)
    view = ui(held, locale=locale, viewport=(390, 844)).open().sign_in()
    failed = view.row("Failed on a phone")
    expect(failed.locator(".badge")).to_be_visible()
    expect(failed.locator("td.c-progress")).to_be_hidden()
    labels = failed.locator("td:visible").evaluate_all(
        "cells => cells.map((td) => getComputedStyle(td, '::before').content)"
    )
    assert '"Progress"' not in labels and '"进度"' not in labels, labels
    # A card that has progress keeps its label.
    expect(view.row("Running on a phone").locator("td.c-progress")).to_be_visible()


def test_the_text_before_the_script_runs_is_in_both_languages(held, ui):
    page = httpx.get(held.url + "/ui/").text
    booting = re.search(r'<p class="booting" id="booting"[^>]*>(.*?)</p>', page)
    assert booting and "Loading…" in booting.group(1) and "加载中…" in booting.group(1)
    view = ui(held, locale="zh-CN", java_script_enabled=False)
    view.page.goto(view.url)
    expect(view.page.locator("#booting")).to_have_text("Loading… · 加载中…")
    # Once the script runs, one language: the reader's.
    shown = ui(held, locale="zh-CN").open()
    expect(shown.page.locator("#booting")).to_have_text("加载中…")
