"""The operations view (issue 13): only for admins; the outbox backlog, quarantined
commands with their reason, failures by type and the audit trail, live while on screen;
a quarantined command's export retried with a reason from the view."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import update

from export_center import repository
from export_center.db import db_now_plus
from export_center.models import ExportOutbox
from export_center.publisher import message_for_row
from export_center.repository import AuditAction
from export_center.transport import OutgoingMessage
from tests.browser.seeding import STATES, seeded, set_task
from tests.support.helpers import Stack, create, wait_state

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
        row = repository.outbox_rows(conn, task.id)[0]
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id == row.id)
            .values(status="SENT", sent_at=db_now_plus(0))
        )
    good = message_for_row(row)
    stack.runtime.transport.send(
        OutgoingMessage(good.topic, good.tag, good.key, b"\x00 not json", good.properties)
    )
    assert wait_state(alice, task_id, timeout=60)["state"] == "failed"
    return task_id, row.event_id


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
        # The views bar shows the exports and the schedules, never the operations tab.
        expect(page.locator("#views [data-view=schedules]")).to_be_visible()
        expect(page.locator("#views [data-view=ops]")).to_be_hidden()
        expect(page.locator("#ops")).to_be_hidden()
        expect(page.get_by_role("button", name="Operations")).to_have_count(0)
        page.wait_for_timeout(500)
        assert not [u for u in asked if "/api/v1/admin/" in u or u.endswith("/ops.js")]


def test_an_admin_sees_the_figures_in_both_languages(held, ui):
    view = ui(held).open().sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    expect(page.locator("#ops-title")).to_have_text("Operations")
    expect(page.locator("#fig-pending dt")).to_have_text("Commands due and waiting to be sent")
    expect(page.locator("#fig-pending dd")).to_have_text("0")
    expect(page.locator("#fig-oldest dd")).to_have_text("—")
    expect(page.locator("#fig-scheduled dd")).to_have_text("0")
    # What the figures are of: the admin's own tenant, not the whole service.
    expect(page.locator("#ops-scope")).to_have_text(
        "Figures, failures and actions of tenant t1, updated every few seconds while this "
        "view is open."
    )
    expect(page.locator("#ops-quarantined")).to_have_text("No command is quarantined.")
    expect(page.locator("#ops-failures")).to_have_text("No export failed in the last 24 hours.")
    assert page.evaluate("location.hash") == "#ops"
    page.click("#lang-switch")
    expect(page.locator("#ops-title")).to_have_text("运维")
    expect(page.locator("#fig-pending dt")).to_have_text("已到期、待发送的指令")
    expect(page.locator("#ops-scope")).to_have_text(
        "租户 t1 的运行指标、失败任务和操作记录，打开此页面时每隔几秒自动刷新。"
    )
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
    # The view asks again while on screen; on a loaded host the publisher, the worker and
    # the next refresh can take longer than expect's 5 s, so both waits get 30 s.
    expect(row.locator(".task-state")).to_have_text(
        re.compile("^(Running|Completed)$"), timeout=30_000
    )
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


# --- scheduled retries, scope, names, the audit trail in the page's language, layout

CUSTOMERS = ["export:customers:create", "export:orders:create"]


def _at_shanghai(iso: str, locale: str) -> str:
    """What the figure shows for a UTC time in the browser's zone (Asia/Shanghai)."""
    moment = datetime.fromisoformat(iso).astimezone(timezone(timedelta(hours=8)))
    if locale == "zh-CN":
        return f"{moment.hour}:{moment.minute:02d}"  # as the page's other times: 4:46:42
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'}"


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_scheduled_retry_is_shown_apart_from_the_backlog(held, ui, locale):
    task_id = create(held.client("alice"), taskName="Retried later").json()["taskId"]
    with held.runtime.engine.begin() as conn:  # what a failed attempt leaves: due in 5 min
        moved = update(OUTBOX).values(created_at=db_now_plus(-600), next_retry_at=db_now_plus(300))
        assert conn.execute(moved).rowcount == 1
    view = ui(held, locale=locale).open().sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    expect(page.locator("#fig-pending dd")).to_have_text("0")
    expect(page.locator("#fig-oldest dd")).to_have_text("—")
    (row,) = held.client("root", perms=["platform:export:admin"]).get("/api/v1/admin/outbox").json()
    assert row["taskId"] == task_id and row["scheduled"] is True
    at = _at_shanghai(row["dueAt"], locale)
    note = f"next at {at}" if locale == "en-US" else f"下一次 {at}"
    expect(page.locator("#fig-scheduled dd")).to_have_text(f"1{note}")
    expect(page.locator("#fig-scheduled .figure-note")).to_have_text(note)
    label = "Automatic retries scheduled" if locale == "en-US" else "已安排的自动重试"
    expect(page.locator("#fig-scheduled dt")).to_have_text(label)
    # Its time came 2 minutes ago and no publisher sent it: now it is backlog.
    with held.runtime.engine.begin() as conn:
        conn.execute(update(OUTBOX).values(next_retry_at=db_now_plus(-125)))
    expect(page.locator("#fig-pending dd")).to_have_text("1", timeout=8_000)
    expect(page.locator("#fig-scheduled dd")).to_have_text("0")
    minutes = r"^2 min \d+ sec$" if locale == "en-US" else r"^2分钟\d+秒$"
    expect(page.locator("#fig-oldest dd")).to_have_text(re.compile(minutes))


def test_a_platform_operator_reads_every_tenant(held, ui):
    token = held.token("ops", perms=["platform:export:admin", "platform:operator"])
    view = ui(held)
    page = view.page
    page.add_init_script(f"sessionStorage.setItem('ec.token', {json.dumps(token)})")
    page.goto(view.url + "#ops")
    page.locator("#ops-figures .figure").first.wait_for()
    expect(page.locator("#ops-scope")).to_have_text(
        "Figures, failures and actions of every tenant, updated every few seconds while "
        "this view is open."
    )


NAMES = {
    "north": "Customers of the northern region for the quarterly review",
    "china": "九月订单（华北区）季度对账",
    "refund": "Refunds",
}
FAILURE = (
    "fetch: batch 3 (cursor 2000): provider answered 503 on 3 attempts; the customer "
    "service returned an error page"
)


def _ops_seed(stack: Stack) -> dict[str, str]:
    """Three failed exports (two types, a Chinese name), one of them with its command
    quarantined, and the system's and a person's entries in the audit trail."""
    ids = {}
    for day, (key, name) in enumerate(NAMES.items(), start=1):
        if key == "china":
            ids[key] = seeded(stack, "bob", "failed", name, day=day)
            continue
        answer = create(
            stack.client("alexandra.konstantinopoulou", perms=CUSTOMERS),
            exportType="CUSTOMERS",
            taskName=name,
            parameters={"segment": "BUILDING" if key == "north" else "MACHINERY"},
        )
        assert answer.status_code == 202, answer.text
        ids[key] = answer.json()["taskId"]
        set_task(stack, ids[key], **{**STATES["failed"], "failure_message": FAILURE})
    with stack.runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, ids["refund"])
        row = repository.outbox_rows(conn, task.id)[0]
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id == row.id)
            .values(status="QUARANTINED", last_error="dead-lettered by the broker")
        )
        entries = [
            ("system:dlq-handler", AuditAction.DEAD_LETTER, "quarantined", ids["refund"],
             "message 0A1B2C3D4E5F6A7B8C9D dead-lettered (schemaVersion 1)", None),
            ("system:worker", AuditAction.RESUME, "resumed", ids["north"],
             "3 of 16 shards done, 3,072 rows kept",
             {"shardsDone": 3, "shardsTotal": 16, "rowsKept": 3072}),
            ("system:worker", AuditAction.RESUME, "resumed", ids["china"],
             "5 of 31 shards done, 12,480 rows kept", None),  # written before the details
            ("system:worker", AuditAction.RESUME, "restarted", ids["north"],
             "the provider no longer honours the snapshot of the checkpoints (410): every "
             "shard starts again from zero", {"cause": "snapshot_expired"}),
            ("system:reconciler", AuditAction.LEASE_RECOVERY, "retry", ids["china"],
             "the worker ec-1a2b3c4d stopped renewing its lease during fetch", None),
            ("user:t1/olga", AuditAction.MANUAL_RETRY, "requeued", ids["china"],
             "客户说数据源已修复", {"fresh": False}),
        ]  # fmt: skip
        for actor, action, outcome, task_no, reason, details in entries:
            repository.record_audit(
                conn,
                actor=actor,
                action=action,
                outcome=outcome,
                task=repository.read_task_by_no(conn, task_no),
                event_id=row.event_id if action == AuditAction.DEAD_LETTER else None,
                reason=reason,
                details=details,
            )
    return ids


@pytest.fixture
def ops_stack(make_stack) -> Stack:
    return make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_exports_are_named_and_the_audit_trail_speaks_the_pages_language(ops_stack, ui, locale):
    ids = _ops_seed(ops_stack)
    view = ui(ops_stack, locale=locale).open().sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    failed = page.locator(f'#ops-failures tr[data-task-id="{ids["north"]}"]')
    expect(failed.locator(".task-name")).to_have_text(NAMES["north"])
    expect(failed.locator(".task-id")).to_have_text(ids["north"])
    china = page.locator(f'#ops-failures tr[data-task-id="{ids["china"]}"] .task-name')
    expect(china).to_have_text(NAMES["china"])
    expect(page.locator("#ops-quarantined tr .task-name")).to_have_text(NAMES["refund"])
    audit = page.locator("#ops-audit tbody tr")
    expect(audit).to_have_count(6)
    zh = locale == "zh-CN"
    wanted = {
        "resumed": ("断点续传：已从断点继续", "已完成 3/16 个分片，保留 3,072 行")
        if zh
        else ("Resume: continued from the checkpoints", "3 of 16 parts done, 3,072 rows kept"),
        "old": ("断点续传：已从断点继续", "已完成 5/31 个分片，保留 12,480 行")
        if zh
        else ("Resume: continued from the checkpoints", "5 of 31 parts done, 12,480 rows kept"),
        "restarted": (
            "断点续传：已从头重新开始",
            "数据源不再接受断点对应的数据快照，所有分片从头重新导出。",
        )
        if zh
        else (
            "Resume: started again from zero",
            "The data source no longer honours the snapshot of the checkpoints: every part "
            "starts again from zero.",
        ),
        "lease": ("回收租约：将重新执行", "工作进程 ec-1a2b3c4d 在读取数据时停止了续租。")
        if zh
        else (
            "Lease recovered: to run again",
            "The worker ec-1a2b3c4d stopped renewing its lease while reading data.",
        ),
        "dead": (
            "死信处理：已隔离，导出标记为失败",
            "消息 0A1B2C3D4E5F6A7B8C9D 已进入死信队列（结构版本 1）。",
        )
        if zh
        else (
            "Dead letter: quarantined; the export failed",
            "Message 0A1B2C3D4E5F6A7B8C9D was dead-lettered (schema version 1).",
        ),
    }  # fmt: skip
    rows = audit.evaluate_all(
        "trs => trs.map((tr) => [tr.querySelector('.c-what').textContent,"
        " tr.querySelector('.c-reason').textContent, tr.querySelector('.c-reason').lang])"
    )
    for what, reason in wanted.values():
        assert [what, reason, ""] in rows, (what, reason, rows)
    assert [
        "手动重试：已重新排队" if zh else "Retry: queued again",
        "客户说数据源已修复",
        "",
    ] in rows
    names = audit.locator(".task-name").all_text_contents()
    assert NAMES["north"] in names and NAMES["china"] in names
    quarantined = page.locator("#ops-quarantined td.c-reason")
    expect(quarantined).to_have_text(wanted["dead"][1])
    # No English sentence of the system is left in the Chinese view.
    if zh:
        assert page.locator('#ops [lang="en"]:not(.detail)').count() == 0


def test_every_audit_action_and_outcome_has_a_text_in_both_languages(stack, ui):
    from export_center.repository import AuditAction, QuarantineOutcome, Recovery

    outcomes = {o.value for o in (*Recovery, *QuarantineOutcome)} | {
        "requeued", "cancelled", "stop_requested", "resumed", "restarted",
        "missing_properties", "reloaded", "refused", "released",
        "set", "cleared", "revoked", "awaiting", "approved", "rejected", "expired",
    }  # fmt: skip
    keys = [f"action.{a.value}" for a in AuditAction] + [f"outcome.{o}" for o in outcomes]
    page = ui(stack).open().page
    page.locator("#signin").wait_for()
    lacking = page.evaluate(
        """async (keys) => {
          await import('./ops.js');
          const i18n = await import('./i18n.js');
          return i18n.lacking(keys);
        }""",
        sorted(keys),
    )
    assert lacking == []


#: The measures of tests/browser/ops_layout.js (a function of ``{chars, cards}``), without
#: its comment lines.
MEASURE = "\n".join(
    line
    for line in Path(__file__).with_name("ops_layout.js").read_text().splitlines()
    if not line.startswith("//")
)


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
@pytest.mark.parametrize("width", [390, 1280])
def test_the_operations_tables_read_on_a_phone_and_a_desktop(ops_stack, ui, locale, width):
    ids = _ops_seed(ops_stack)
    view = ui(ops_stack, locale=locale, viewport=(width, 900)).open()
    view.sign_in("olga", role="admin")
    page = view.page
    _open_ops(view)
    expect(page.locator("#ops-audit tbody tr")).to_have_count(6)
    expect(page.locator("#ops-failures tbody tr")).to_have_count(3)
    cards = width < 900
    problems = page.evaluate(MEASURE, {"chars": 18 if cards else 4, "cards": cards})
    assert problems == [], (width, locale, problems)
    if cards:
        # A card of a failed export: the export on top, every other cell a labelled line.
        card = page.locator(f'#ops-failures tr[data-task-id="{ids["north"]}"]')
        labels = card.locator("td").evaluate_all(
            "tds => tds.filter((td) => td.getClientRects().length).map((td) => td.dataset.label)"
        )
        zh = locale == "zh-CN"
        assert labels == (
            ["导出任务", "类型", "创建人", "时间", "失败原因", "操作"]
            if zh
            else ["Export", "Type", "Requested by", "When", "Failure", "Actions"]
        )
        box = card.bounding_box()
        assert box and box["width"] <= width and box["height"] < 700, box
