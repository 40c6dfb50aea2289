"""The operations view (issue 13): only for admins; the outbox backlog, quarantined
commands with their reason, failures by type and the audit trail, live while on screen;
a quarantined command's export retried with a reason from the view."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import update

from export_center import repository
from export_center.db import db_now_plus
from export_center.models import ExportOutbox
from export_center.publisher import message_for_row
from export_center.transport import OutgoingMessage
from tests.browser.seeding import seeded
from tests.helpers import Stack, create, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

OUTBOX = ExportOutbox.__table__


@pytest.fixture
def held(make_stack) -> Stack:
    """A stack whose publisher loop is off: commands stay in the outbox until the test
    sends them (``runtime.publisher.run_once()``)."""
    return make_stack(api={"dev_sign_in": True}, publisher={"enabled": False})


@pytest.fixture
def publishing(held: Stack) -> Iterator[threading.Event]:
    """Once set, the held stack's publisher runs every 0.1 s (the loop, started late)."""
    go, stop = threading.Event(), threading.Event()

    def loop() -> None:
        while not stop.is_set():
            if go.is_set():
                held.runtime.publisher.run_once()
            stop.wait(0.1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield go
    stop.set()
    thread.join(5)


def _quarantine(stack: Stack) -> tuple[str, str]:
    """An export whose command the broker dead-letters (as in test_admin_api): it fails
    and its command is quarantined. Returns its task id and the command's event id."""
    alice = stack.client("alice")
    task_id = create(alice, taskName="Poisoned", parameters={"from": "1995-09-01"}).json()["taskId"]
    with stack.runtime.engine.begin() as conn:  # as if the publisher had sent the command
        task = repository.read_task_by_no(conn, task_id)
        row = repository.outbox_rows(conn, task["id"])[0]
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id == row["id"])
            .values(status="SENT", sent_at=db_now_plus(0))
        )
    good = message_for_row(row)
    stack.runtime.transport.send(
        OutgoingMessage(good.topic, good.tag, good.key, b"\x00 not json", good.properties)
    )
    assert wait_state(alice, task_id, timeout=60)["state"] == "failed"
    return task_id, row["event_id"]


def _open_ops(view) -> None:
    view.page.get_by_role("button", name=re.compile("^(Operations|运维)$")).click()
    view.page.locator("#ops-figures .figure").first.wait_for()


def test_a_user_never_sees_the_operations_view(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True})
    # Sees every export of the tenant, but holds no admin permission.
    token = stack.token("vera", perms=["export:orders:create", "platform:download:all"])
    for signed in ("vera", "alice"):
        view = ui(stack)
        page = view.page
        asked: list[str] = []
        page.on("request", lambda r, asked=asked: asked.append(r.url))
        if signed == "vera":
            page.add_init_script(f"sessionStorage.setItem('ec.token', {json.dumps(token)})")
            page.goto(view.url + "#ops")  # even asked for by its address
        else:
            view.open().sign_in("alice")
            page.goto(view.url + "#ops")
            page.reload()
        expect(page.locator("#list-title")).to_be_visible()
        expect(page.locator("#views")).to_be_hidden()
        expect(page.locator("#ops")).to_be_hidden()
        expect(page.get_by_role("button", name="Operations")).to_have_count(0)
        page.wait_for_timeout(500)
        assert not [u for u in asked if "/api/v1/admin/" in u or u.endswith("/ops.js")]


def test_an_admin_sees_the_figures_in_both_languages(held, ui):
    view = ui(held).open().sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    expect(page.locator("#ops-title")).to_have_text("Operations")
    expect(page.locator("#fig-pending dt")).to_have_text("Commands waiting to be sent")
    expect(page.locator("#fig-pending dd")).to_have_text("0")
    expect(page.locator("#fig-oldest dd")).to_have_text("—")
    expect(page.locator("#ops-quarantined")).to_have_text("No command is quarantined.")
    expect(page.locator("#ops-failures")).to_have_text("No export failed in the last 24 hours.")
    assert page.evaluate("location.hash") == "#ops"
    page.click("#lang-switch")
    expect(page.locator("#ops-title")).to_have_text("运维")
    expect(page.locator("#fig-pending dt")).to_have_text("待发送的指令")
    expect(page.locator("#ops-quarantined")).to_have_text("没有被隔离的指令。")
    page.reload()  # the view is kept in the address
    expect(page.locator("#ops-title")).to_have_text("运维")
    page.get_by_role("button", name="导出任务").click()
    expect(page.locator("#list-title")).to_be_visible()
    expect(page.locator("#ops")).to_be_hidden()


def test_the_backlog_figure_moves_while_the_view_is_on_screen(held, ui):
    view = ui(held).open().sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    pending = page.locator("#fig-pending dd")
    expect(pending).to_have_text("0")
    create(held.client("alice"), taskName="Held back")  # the publisher is off: it waits
    expect(pending).to_have_text("1", timeout=8_000)  # no reload, no click
    expect(page.locator("#fig-oldest dd")).to_have_text(re.compile(r"^\d+ sec$"), timeout=8_000)
    assert held.runtime.publisher.run_once() == 1
    expect(pending).to_have_text("0", timeout=8_000)


def test_a_quarantined_command_is_retried_with_a_reason_from_the_view(held, publishing, ui):
    task_id, event_id = _quarantine(held)
    view = ui(held).open().sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    row = page.locator(f'#ops-quarantined tr[data-event-id="{event_id}"]')
    expect(row).to_contain_text(task_id)
    expect(row.locator(".reason")).to_contain_text("dead-lettered")
    expect(row.locator(".task-state")).to_have_text("Failed")
    expect(page.locator('#ops-failures li[data-type="ORDERS"]')).to_have_text("Orders: 1 failed")
    expect(page.locator(f'#ops-failures tr[data-task-id="{task_id}"]')).to_contain_text(
        "The export’s task message was damaged on its way to a worker."
    )
    row.get_by_role("button", name=f"Retry export {task_id}").click()
    dialog = page.locator("#ops-retry")
    expect(dialog).to_be_visible()
    expect(page.locator("#ops-reason")).to_be_focused()
    page.fill("#ops-reason", "  x ")
    page.click("#ops-retry-submit")  # a reason of 3 characters at least, checked here
    expect(page.locator("#ops-reason-error")).to_have_text(
        "Write why you retry it (at least 3 characters)."
    )
    page.fill("#ops-reason", "broker fixed, message resent")
    expect(page.locator("#ops-reason-error")).to_be_hidden()
    page.click("#ops-retry-submit")
    expect(dialog).to_be_hidden()
    expect(page.locator("#toasts")).to_contain_text(f"Export {task_id} is queued again.")
    publishing.set()  # the new command goes out; a worker runs the export
    expect(row.locator(".task-state")).to_have_text(re.compile("^(Running|Completed)$"))
    expect(row.locator(".task-state")).to_have_text("Completed", timeout=30_000)
    expect(row.get_by_role("button")).to_have_count(0)  # nothing left to retry
    audit = page.locator("#ops-audit tr", has_text="broker fixed, message resent")
    expect(audit).to_contain_text("olga")
    expect(audit).to_contain_text("Retry: queued again")
    expect(audit).to_contain_text(task_id)
    expect(page.locator("#ops-audit")).to_contain_text("Dead letter: quarantined")
    detail = held.client("alice").get(f"/api/v1/exports/{task_id}").json()
    assert detail["state"] == "succeeded"


def test_an_operator_may_start_a_sharded_export_over(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    task_id = seeded(stack, "alice", "failed", "Orders by day", shards_done=3, shards_total=8)
    other = seeded(stack, "alice", "failed", "Plain orders", day=2)
    view = ui(stack).open().sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    page.locator(f'#ops-failures tr[data-task-id="{task_id}"]').get_by_role(
        "button", name=f"Retry export {task_id}"
    ).click()
    expect(page.locator("#ops-retry-intro")).to_have_text(
        "An export that runs in parts continues where it stopped; any other export runs "
        "again from the start. Say why: the reason is kept in the audit trail with your name."
    )
    fresh = page.get_by_role(
        "checkbox", name="Start over: discard the parts already exported and run every part again"
    )
    expect(fresh).not_to_be_checked()  # resuming is the default
    expect(page.locator("#ops-fresh-hint")).to_have_text(
        "Choose this when the data or the rules changed since the failure. It makes no "
        "difference to an export that does not run in parts."
    )
    fresh.check()
    page.fill("#ops-reason", "provider fixed its rows")
    with page.expect_request(re.compile(r"/api/v1/admin/tasks/.+/retry$")) as asked:
        page.click("#ops-retry-submit")
    assert asked.value.post_data_json == {"reason": "provider fixed its rows", "fresh": True}
    expect(page.locator("#toasts")).to_contain_text(
        f"Export {task_id} is queued again and starts over from the beginning."
    )
    audit = page.locator("#ops-audit tr", has_text="provider fixed its rows")
    expect(audit).to_contain_text("Start over: queued again")
    report = stack.client("root", perms=["platform:export:admin"]).get(
        f"/api/v1/admin/tasks/{task_id}"
    )
    [retry] = [a for a in report.json()["audit"] if a["action"] == "manual_retry"]
    assert retry["details"]["fresh"] is True and retry["reason"] == "provider fixed its rows"
    # In Chinese, and unticked again for the next retry.
    page.click("#lang-switch")
    expect(audit).to_contain_text("从头开始：已重新排队")
    page.locator(f'#ops-failures tr[data-task-id="{other}"]').get_by_role(
        "button", name=f"重试导出任务 {other}"
    ).click()
    expect(page.locator("#ops-retry-intro")).to_have_text(
        "分片导出会从中断处继续，其他导出从头重新执行。请填写原因，原因会连同你的账号记入操作记录。"
    )
    fresh = page.get_by_role("checkbox", name="从头开始：丢弃已导出的分片，所有分片重新导出")
    expect(fresh).not_to_be_checked()
    expect(page.locator("#ops-fresh-hint")).to_have_text(
        "失败后数据或规则有变化时请勾选。对未分片的导出没有影响。"
    )
    page.click("#ops-retry-close")
    expect(page.locator("#ops-retry")).to_be_hidden()
