"""Layout at desktop widths: the table fits or scrolls inside its own box with every
action button in view, in both languages, for a user and an admin; long names and
toasts never push or cover controls; the small polish of the new-user pass."""

from __future__ import annotations

import re

import pytest

from export_center.db import db_now
from tests.browser.seeding import seeded, set_task
from tests.support.helpers import create

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

WIDTHS = [768, 900, 1024, 1100, 1280, 1400]
LONG = "Orders of the whole northern region for the quarterly review with finance"

# Every action button of the table: inside the viewport and the table's box, and what
# the browser finds at its centre is the button itself (nothing covers it), while the
# page and the table's box are not scrolled sideways.
ACTIONS_IN_VIEW = """
() => {
  const wrap = document.querySelector('.table-wrap');
  wrap.scrollLeft = 0;
  const out = [];
  for (const el of document.querySelectorAll('#tasks-body .actions .btn')) {
    const first = el.getBoundingClientRect();
    window.scrollTo(0, window.scrollY + first.top - innerHeight / 2);
    const r = el.getBoundingClientRect();
    const box = wrap.getBoundingClientRect();
    const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    const ok = r.left >= 0 && r.right <= innerWidth
      && r.left >= box.left - 1 && r.right <= box.right + 1
      && hit && (hit === el || el.contains(hit)) && wrap.scrollLeft === 0 && scrollX === 0;
    const at = `${Math.round(r.left)}-${Math.round(r.right)} of ${innerWidth}`;
    if (!ok) out.push(`${el.getAttribute('aria-label')} at ${at}`);
  }
  return out;
}
"""


@pytest.fixture
def seeded_stack(make_stack):
    stack = make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        limits={"max_active_per_user": 100, "max_active_per_type": 100},
    )
    for day, state in enumerate(["queued", "running", "succeeded", "failed"], start=1):
        seeded(stack, "alice", state, f"{LONG} ({state})", day=day)
    return stack


@pytest.mark.parametrize("role", ["user", "admin"])
@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_the_actions_are_in_view_at_every_desktop_width(seeded_stack, ui, locale, role):
    view = ui(seeded_stack, locale=locale, viewport=(1400, 900)).open()
    view.sign_in("alice" if role == "user" else "olga", role=role)
    page = view.page
    expect(page.locator("#tasks-body tr")).to_have_count(4)
    buttons = page.locator("#tasks-body .actions .btn")
    expect(buttons).to_have_count(6)  # Cancel ×2, Download, Retry, Export again ×2
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(50)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, width
        assert page.evaluate(ACTIONS_IN_VIEW) == [], (width, locale, role)


# Text lines of each progress cell that stick out of the cell or out of their own box.
PROGRESS_OVERFLOW = """
() => [...document.querySelectorAll('#tasks-body td.c-progress')].flatMap((td) => {
  const box = td.getBoundingClientRect();
  return [...td.querySelectorAll(':scope > span')].filter((el) => {
    const r = el.getBoundingClientRect();
    const out = r.left < box.left - 1 || r.right > box.right + 1;
    return r.width && (out || el.scrollWidth > el.clientWidth + 1);
  }).map((el) => `${td.closest('tr').dataset.taskId} ${el.className}: ${el.textContent}`);
})
"""


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_sharded_rows_keep_their_layout_at_every_width(make_stack, ui, locale):
    """A running sharded export's extra progress line and a failed one's third button
    (Retry, Start over, Export again), from phone cards to the widest table."""
    stack = make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},
        limits={"max_active_per_user": 100, "max_active_per_type": 100},
    )
    big = {"processed_rows": 1_234_567, "total_rows": 9_876_543}
    parts = {"shards_done": 12, "shards_total": 64}
    seeded(stack, "alice", "running", f"{LONG} (parts)", day=1, **parts, **big)
    seeded(stack, "alice", "failed", f"{LONG} (failed parts)", day=2, **parts)
    seeded(stack, "alice", "running", f"{LONG} (rows)", day=3)
    view = ui(stack, locale=locale, viewport=(1400, 900)).open().sign_in()
    page = view.page
    expect(page.locator("#tasks-body .shards:visible")).to_have_count(1)
    buttons = page.locator("#tasks-body .actions .btn")
    expect(buttons).to_have_count(5)  # Cancel ×2, Retry, Start over, Export again
    for width in [360, 390, 600, *WIDTHS]:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(50)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, width
        assert page.evaluate(ACTIONS_IN_VIEW) == [], (width, locale)
        assert page.evaluate(PROGRESS_OVERFLOW) == [], (width, locale)


def test_a_long_user_name_keeps_the_top_bar_on_one_line(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True})
    view = ui(stack).open().sign_in("alexandra.konstantinopoulou-vandenberghe@example.com", "acme")
    page = view.page
    brand = page.locator(".brand").bounding_box()
    for control in ("#lang-switch", "#sign-out"):
        box = page.locator(control).bounding_box()
        assert box and abs(box["y"] - brand["y"]) < brand["height"], control
        assert box["x"] + box["width"] <= 1280
    name = page.locator(".who-name")
    assert name.evaluate("el => el.scrollWidth > el.clientWidth")  # cut with "…"
    expect(name).to_have_attribute("title", re.compile("alexandra.konstantinopoulou"))


def test_toasts_leave_the_row_actions_and_their_own_close_button_reachable(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    for day in range(1, 9):
        d = f"1995-02-{day:02d}"
        create(stack.client("alice"), "csv", taskName=f"Day {day}", parameters={"from": d, "to": d})
    view = ui(stack, viewport=(1024, 700)).open().sign_in()
    page = view.page
    expect(page.locator("#tasks-body tr")).to_have_count(8)
    name = "N" * 100  # one long word
    view.new_export(name=name, params={"from": "1995-03-01", "to": "1995-03-02"})
    page.click("#create-submit")
    toast = page.locator(".toast").first
    expect(toast).to_contain_text(name[:20])
    close = toast.get_by_role("button", name="Dismiss")
    box = close.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 1024
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # the bottom rows
    covered = page.evaluate(
        """() => [...document.querySelectorAll('#tasks-body .actions .btn')].filter((el) => {
          const r = el.getBoundingClientRect();
          if (r.bottom < 0 || r.top > innerHeight) return false;
          const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
          return !(hit === el || el.contains(hit));
        }).map((el) => el.getAttribute('aria-label'))"""
    )
    assert covered == []
    close.click()
    expect(page.locator(".toast")).to_have_count(0)


def test_a_new_sign_in_attempt_replaces_the_signed_out_notice(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True})
    view = ui(stack).open().sign_in()
    view.allow(401)
    page = view.page
    page.click("#sign-out")
    expect(page.locator("#signin-notice")).to_have_text("You have signed out.")
    page.locator("#token-box summary").click()
    page.fill("#token-input", "not-a-token")
    page.click('#token-form button[type="submit"]')
    expect(page.locator("#token-input-error")).to_be_visible()
    expect(page.locator("#signin-notice")).to_be_hidden()


def _contrast(fg: str, bg: str) -> float:
    def luminance(color: str) -> float:
        r, g, b = (int(x) / 255 for x in re.findall(r"\d+", color)[:3])
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    high, low = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_polish_radios_labels_badges_and_steady_columns(make_stack, ui):
    stack = make_stack(api={"dev_sign_in": True}, consumer={"enabled": False})
    task = seeded(stack, "alice", "running", "Steady columns", attempt_count=2)
    page = ui(stack, locale="zh-CN").open().page
    page.locator("#dev-form").wait_for()
    # The two role radios are the same size, however long their label.
    radios = page.locator('#dev-form input[name="role"]')
    sizes = {
        (round(b["width"]), round(b["height"])) for b in (r.bounding_box() for r in radios.all())
    }
    assert len(sizes) == 1, sizes
    page.fill("#dev-user", "alice")
    page.fill("#dev-tenant", "t1")
    page.click('#dev-form button[type="submit"]')
    row = page.locator("#tasks-body tr").first
    expect(row.locator(".badge")).to_have_text("进行中")
    # "第 2 次执行（共 3 次）" stays on one line.
    attempt = row.locator(".attempt")
    expect(attempt).to_have_text("第 2 次执行（共 3 次）")
    line = attempt.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)")
    assert attempt.bounding_box()["height"] < 1.5 * line
    widths = page.eval_on_selector_all("#tasks-head th", "ths => ths.map((th) => th.offsetWidth)")
    set_task(stack, task, status="SUCCEEDED", processed_rows=9000, total_rows=9000,
             completed_at=db_now(), expires_at=None, size_bytes=1234, object_key="x")  # fmt: skip
    page.click("#refresh")
    expect(row.locator(".badge")).to_have_text("已完成")
    assert (
        page.eval_on_selector_all("#tasks-head th", "ths => ths.map((th) => th.offsetWidth)")
        == widths
    )
    badge = row.locator(".badge-succeeded")
    colors = badge.evaluate(
        "el => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]"
    )
    assert _contrast(*colors) >= 4.5
    # "What to export": labels and lists look like the rest of the form, not disabled.
    page.click("#new-export")
    page.select_option("#c-type", "ORDERS")
    style = "el => [getComputedStyle(el).color, getComputedStyle(el).fontSize]"
    assert page.eval_on_selector('label[for="c-param-status"]', style) == page.eval_on_selector(
        'label[for="c-type"]', style
    )
    assert page.eval_on_selector("#c-param-status", style) == page.eval_on_selector(
        "#c-type", style
    )
