"""A list of 100 tasks in every state renders in one page; with it, two bench-style
figures (printed and written to test-artifacts/ui-bench.json, never asserted): the
page weight on first load and the time from navigation to the 100th row on screen."""

from __future__ import annotations

import gzip
import json
import statistics
from datetime import date, timedelta

import pytest

from tests.browser.conftest import ROOT
from tests.browser.seeding import STATES, set_task
from tests.conftest import SAMPLE_SCALE
from tests.support.helpers import create

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

# Set on the 100th row's frame: navigation start is performance.now() == 0.
WATCH_100TH_ROW = """
new MutationObserver((_, observer) => {
  if (document.querySelectorAll('#tasks-body tr').length >= 100) {
    observer.disconnect();
    requestAnimationFrame(() => { window.__hundredth = performance.now(); });
  }
}).observe(document, { childList: true, subtree: true });
"""
#: The state of task i is ORDER[i % 4] (column values from tests/browser/seeding.py).
ORDER = ("queued", "running", "succeeded", "failed")


def _seed(stack) -> None:
    """100 ORDERS tasks, one per day (the 60 s duplicate window merges equal ones), a
    quarter each queued, running, succeeded and failed."""
    alice = stack.client("alice")
    day = date(1995, 1, 1)
    for i in range(100):
        d = (day + timedelta(days=i)).isoformat()
        answer = create(alice, "csv", taskName=f"Orders of {d}", parameters={"from": d, "to": d})
        assert answer.status_code == 202, answer.text
        set_task(stack, answer.json()["taskId"], **STATES[ORDER[i % 4]])


def test_a_list_of_100_tasks_renders_on_one_page(make_stack, ui):
    stack = make_stack(
        SAMPLE_SCALE,
        consumer={"enabled": False},
        limits={"max_active_per_user": 200, "max_active_per_type": 200},
    )
    _seed(stack)
    token = stack.token("alice")
    figures: list[float] = []
    list_ready: list[float] = []  # when the list's JSON had arrived
    weights: dict[str, int] = {}
    for run in range(3):  # a fresh browser context each time: nothing cached
        view = ui(stack)
        page = view.page
        page.add_init_script(
            f"sessionStorage.setItem('ec.token', {json.dumps(token)});"
            "localStorage.setItem('ec.pageSize', '100');" + WATCH_100TH_ROW
        )
        loaded = []
        page.on("response", lambda r, loaded=loaded: loaded.append(r))
        page.goto(view.url)
        page.wait_for_function("() => window.__hundredth !== undefined")
        figures.append(page.evaluate("window.__hundredth"))
        list_ready.append(
            page.evaluate(
                "() => performance.getEntriesByType('resource')"
                ".find((e) => e.name.includes('/api/v1/exports?')).responseEnd"
            )
        )
        rows = page.locator("#tasks-body tr")
        expect(rows).to_have_count(100)
        if run == 0:
            for answer in loaded:
                kind = answer.headers.get("content-type", "").split(";")[0]
                if "/ui/" in answer.url and kind in ("text/html", "text/javascript", "text/css"):
                    weights[answer.url.rsplit("/", 1)[-1] or "index.html"] = len(answer.body())
            for state, count in (("Queued", 25), ("Running", 25), ("Completed", 25)):
                expect(page.locator(".badge", has_text=state)).to_have_count(count)
            expect(page.locator(".badge", has_text="Failed")).to_have_count(25)
            expect(page.locator("a[data-action=download]")).to_have_count(25)
            expect(page.locator(".note-error").first).to_have_text(
                "The data source did not answer, on every attempt. Try again later."
            )
            expect(page.locator("#next")).to_be_disabled()
        if run < 2:
            page.context.close()  # no page left polling while the next one is measured
    files = {name: (ROOT / "export_center/api/static/ui" / name).read_bytes() for name in weights}
    report = {
        "page_weight_bytes": sum(weights.values()),
        "page_weight_gzip_bytes": sum(len(gzip.compress(b, 9)) for b in files.values()),
        "files": dict(sorted(weights.items())),
        "first_render_100_rows_ms": [round(f) for f in figures],
        "first_render_100_rows_median_ms": round(statistics.median(figures)),
        "list_answer_received_ms": [round(f) for f in list_ready],
    }
    out = ROOT / "test-artifacts" / "ui-bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print("\ndownload center:", json.dumps(report))
    assert set(weights) == {"index.html", "app.js", "api.js", "dom.js", "i18n.js",
                            "strings_en.js", "strings_zh.js", "tasks.js", "form.js",
                            "choices.js", "preview.js", "files_i18n.js", "alerts.js",
                            "messages.js", "actions.js", "signin.js",
                            "inbox.js", "inbox_i18n.js", "schedules_i18n.js",
                            "notify_settings_i18n.js", "quota.js", "approvals_i18n.js",
                            "app.css"}  # fmt: skip
