"""The one-sentence texts of notifications, in English and Chinese.

The in-page list shows them (``message``, ``messageZh``); other channels may reuse them
as a summary line. Names and reasons are quoted as stored (a failure message is the
task's own sentence, in English).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["sentence"]


def _date(value: Any) -> str:
    text = str(value or "")
    return text[:16].replace("T", " ") if text else "?"


def sentence(event_type: str, data: Mapping[str, Any], language: str) -> str:
    """The sentence of an event in ``language`` (``en`` or ``zh``).

    Args:
        event_type: one of the event types (``webhook.test`` too).
        data: the event data (``taskName``, ``rows``, ``failureMessage``,
            ``expiresAt``, ``scheduleName``, ``reason``).
    """
    name = data.get("taskName") or data.get("scheduleName") or data.get("taskId") or ""
    zh = language == "zh"
    if event_type == "export.succeeded":
        rows = data.get("rows")
        if zh:
            return f"您的导出“{name}”已完成" + (f"，共 {rows} 行。" if rows is not None else "。")
        return f"Your export “{name}” is ready" + (f" ({rows} rows)." if rows is not None else ".")
    if event_type == "export.failed":
        cause = data.get("failureMessage") or data.get("failureCode") or ""
        if zh:
            return f"您的导出“{name}”失败了" + (f"：{cause}" if cause else "。")
        return f"Your export “{name}” failed" + (f": {cause}" if cause else ".")
    if event_type == "export.cancelled":
        return f"您的导出“{name}”已取消。" if zh else f"Your export “{name}” was cancelled."
    if event_type == "export.expiring":
        when = _date(data.get("expiresAt"))
        if zh:
            return f"您的导出“{name}”的文件将于 {when}（UTC）删除，请尽快下载。"
        return f"The file of your export “{name}” will be deleted at {when} UTC; download it soon."
    if event_type == "schedule.paused":
        reason = data.get("reason") or ""
        if zh:
            return f"您的定时导出“{name}”已暂停" + (f"：{reason}" if reason else "。")
        return f"Your schedule “{name}” was paused" + (f": {reason}" if reason else ".")
    return "这是一条测试通知。" if zh else "This is a test notification."
