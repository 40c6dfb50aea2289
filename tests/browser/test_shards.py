"""Sharded exports on the page: a running one shows its parts next to its rows, in both
languages."""

from __future__ import annotations

import pytest

from tests.browser.seeding import seeded
from tests.helpers import Stack

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser


@pytest.fixture
def stack(make_stack) -> Stack:
    return make_stack(
        api={"dev_sign_in": True},
        consumer={"enabled": False},  # a retried task stays queued: the page is the subject
        limits={"max_active_per_user": 100, "max_active_per_type": 100},
    )


@pytest.mark.parametrize(
    ("locale", "parts"),
    [("en-US", "3 of 8 parts done"), ("zh-CN", "已完成 3 / 8 个分片")],
)
def test_a_running_sharded_export_shows_its_parts(stack, ui, locale, parts):
    seeded(stack, "alice", "running", "Orders by day", day=1, shards_done=3, shards_total=8)
    seeded(stack, "alice", "running", "Plain orders", day=2)  # not sharded
    seeded(stack, "alice", "running", "One day", day=3, shards_done=0, shards_total=1)
    view = ui(stack, locale=locale).open().sign_in()
    row = view.row("Orders by day")
    rows = {"en-US": "4,000 of 9,000 rows", "zh-CN": "4,000 / 9,000 条"}[locale]
    expect(row.locator(".c-progress .rows")).to_have_text(rows)
    expect(row.locator(".c-progress .shards")).to_have_text(parts)
    # Under the rows, above the rate: the three lines in that order.
    lines = row.locator(".c-progress > span:visible").all_inner_texts()
    assert lines[:2] == [rows, parts], lines
    # Nothing to say without shards, nor for a single part.
    for name in ("Plain orders", "One day"):
        expect(view.row(name).locator(".c-progress .rows")).to_have_text(rows)
        expect(view.row(name).locator(".c-progress .shards")).to_be_hidden()
    # The numbers move with the poll; the language switch relabels them.
    view.page.click("#lang-switch")
    other = {"en-US": "已完成 3 / 8 个分片", "zh-CN": "3 of 8 parts done"}[locale]
    expect(row.locator(".c-progress .shards")).to_have_text(other)
