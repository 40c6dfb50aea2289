"""The notification texts: every event in English and Chinese, escaping and trimming."""

from __future__ import annotations

from dataclasses import replace

import pytest

from export_center.notify.targets import EVENT_TYPES
from export_center.notify.texts import (
    MAX_NAME,
    compose,
    escape_markdown,
    render_html,
    render_markdown,
    render_plain,
    summary,
    trim,
    trim_utf8,
)
from tests.support.notify_messages import FILE_URL, TASK_URL, failed, succeeded

TITLES = {
    "export.approved": ("Export approved: Weekly orders", "导出申请已通过：Weekly orders"),
    "export.rejected": ("Export not approved: Weekly orders", "导出申请未通过：Weekly orders"),
    "export.succeeded": ("Export ready: Weekly orders", "导出任务已完成：Weekly orders"),
    "export.failed": ("Export failed: Weekly orders", "导出任务失败：Weekly orders"),
    "export.cancelled": ("Export cancelled: Weekly orders", "导出任务已取消：Weekly orders"),
    "export.expiring": (
        "Export file expiring soon: Weekly orders",
        "导出文件即将过期：Weekly orders",
    ),
    "schedule.paused": (
        "Scheduled export paused: Weekly orders",
        "定时导出已暂停：Weekly orders",
    ),
}


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_every_event_has_both_languages(event_type: str) -> None:
    message = replace(succeeded(), event_type=event_type)
    en, zh = compose(message, "en"), compose(message, "zh")
    assert (en.title, zh.title) == TITLES[event_type]
    assert en.opening != zh.opening and "Weekly orders" in zh.opening
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh.opening)


def test_unknown_language_is_english() -> None:
    assert compose(succeeded("fr")).title == "Export ready: Weekly orders"


def test_chinese_wording() -> None:
    zh = compose(succeeded("zh"))
    assert (
        zh.opening == "您的导出任务「Weekly orders」已完成，共 1,234 行，请通过下方链接下载文件。"
    )
    assert ("状态", "已完成") in zh.facts and ("有效期至", "2026-12-09 08:00 UTC") in zh.facts
    assert zh.links == (("下载文件", FILE_URL), ("查看任务", TASK_URL))
    expiring = compose(replace(succeeded("zh"), event_type="export.expiring"))
    assert "将于 2026-12-09 08:00 UTC 过期" in expiring.opening


def test_a_pause_reason_is_worded_in_each_language_from_its_code() -> None:
    english = "the owner carl may no longer create ORDERS exports: the latest token ..."
    lost = {
        "reason": english,
        "reasonCode": "PERMISSION_DENIED",
        "permission": "export:orders:create",
    }
    paused = replace(succeeded("zh", **lost), event_type="schedule.paused")
    reason = "创建者已没有此类导出的权限（需要 export:orders:create），请先获得权限再恢复"
    assert ("暂停原因", reason) in compose(paused).facts
    assert ("Reason", english) in compose(paused, "en").facts
    # No English in the Chinese line, and no space between its sentences.
    line = summary(paused, "zh")
    assert line == (
        "定时导出「Weekly orders」已暂停，恢复之前不会再运行。暂停原因：" + reason + "。"
    )
    assert "the owner" not in line
    broken = replace(
        succeeded("zh", reason="UNKNOWN_COLUMN: ...", reasonCode="UNKNOWN_COLUMN"),
        event_type="schedule.paused",
    )
    assert (
        "暂停原因",
        "导出设置已不再有效（错误代码 UNKNOWN_COLUMN），请修改定时导出后再恢复",
    ) in (compose(broken).facts)


def test_no_download_sentence_without_a_file_link() -> None:
    message = replace(succeeded("zh"), links={"task": TASK_URL})
    assert compose(message).opening == "您的导出任务「Weekly orders」已完成，共 1,234 行。"
    assert compose(replace(message, language="en")).opening == (
        "Your export “Weekly orders” has finished with 1,234 rows."
    )


def test_file_link_only_for_a_file() -> None:
    assert [label for label, _ in compose(failed()).links] == ["Open the task"]
    cancelled = replace(succeeded(), event_type="export.cancelled")
    assert [url for _, url in compose(cancelled).links] == [TASK_URL]


def test_unsafe_link_is_dropped() -> None:
    message = replace(succeeded(), links={"task": "javascript:alert(1)", "file": FILE_URL})
    assert compose(message).links == (("Download the file", FILE_URL),)


def test_user_values_are_escaped_in_markup() -> None:
    text = compose(failed(taskName="<b>x</b> *y*", failureMessage="[a](http://evil)"))
    html = render_html(text)
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x" not in html
    md = render_markdown(text)
    assert r"\*y\*" in md and r"\[a\]\(http://evil\)" in md
    assert "<b>x</b> *y*" in render_plain(text)


def test_user_values_are_trimmed_to_one_line() -> None:
    text = compose(failed(taskName="a\n\tb " + "n" * 500))
    assert text.title.startswith("Export failed: a b nnn")
    assert len(text.title) == len("Export failed: ") + MAX_NAME and text.title.endswith("…")
    assert trim(None, 5) == "" and trim("abcdef", 4) == "abc…"


def test_trim_utf8_cuts_on_a_character() -> None:
    cut = trim_utf8("数据" * 100, 100)
    assert len(cut.encode("utf-8")) <= 100 and cut.endswith("…")
    assert cut[:-1] == "数据" * 16  # 96 of the 97 bytes left beside the ellipsis
    assert trim_utf8("abc\\*xyz", 7) == "abc…"  # never ends on a lone escape backslash
    assert trim_utf8("short", 100) == "short"


def test_markdown_limit_keeps_the_links() -> None:
    text = compose(failed("zh", failureMessage="错" * 1000))
    md = render_markdown(text, limit=1000)
    assert len(md.encode("utf-8")) <= 1000
    assert md.endswith(f"[查看任务]({TASK_URL})") and "…" in md
    assert escape_markdown("a_b") == r"a\_b"


def test_markdown_leaves_plain_punctuation_alone() -> None:
    assert escape_markdown("orders-2026-11.xlsx #1 + more!") == "orders-2026-11.xlsx #1 + more!"
    assert escape_markdown("a<b>`c`~d") == r"a\<b\>\`c\`\~d"


def test_the_expiry_is_given_in_the_exports_time_zone() -> None:
    zh = compose(succeeded("zh", timeZone="Asia/Shanghai"))
    assert ("有效期至", "2026-12-09 16:00 (Asia/Shanghai)") in zh.facts
    en = compose(succeeded("en", timeZone="America/New_York"))
    assert ("Available until", "2026-12-09 03:00 (America/New_York)") in en.facts
    # UTC, or a zone this machine does not know, stays UTC.
    for zone in ("UTC", "Mars/Olympus"):
        assert ("有效期至", "2026-12-09 08:00 UTC") in compose(succeeded("zh", timeZone=zone)).facts


def test_a_link_that_ends_before_the_file_says_so() -> None:
    message = succeeded("zh", timeZone="Asia/Shanghai", linkExpiresAt="2026-12-03T08:00:00Z")
    facts = compose(message).facts
    assert ("有效期至", "2026-12-09 16:00 (Asia/Shanghai)") in facts
    assert ("下载链接有效期至", "2026-12-03 16:00 (Asia/Shanghai)") in facts
    en = compose(replace(message, language="en")).facts
    assert ("Download link works until", "2026-12-03 16:00 (Asia/Shanghai)") in en
    # The same instant as the file's end, or no file link: one line only.
    same = succeeded("en", linkExpiresAt="2026-12-09T08:00:00+00:00")
    assert [label for label, _ in compose(same).facts].count("Download link works until") == 0
    no_file = replace(message, links={"task": TASK_URL})
    assert all(label != "下载链接有效期至" for label, _ in compose(no_file).facts)


def test_the_export_type_is_named_in_the_readers_language() -> None:
    named = succeeded("zh", exportTypeTitle="Orders", exportTypeTitleZh="订单")
    assert ("导出类型", "订单 (ORDERS)") in compose(named).facts
    assert ("Export type", "Orders (ORDERS)") in compose(named, "en").facts
    assert ("导出类型", "ORDERS") in compose(succeeded("zh")).facts  # no title known
