"""The words of a notification: subject and body of each event, in English and Chinese.

:func:`compose` turns a :class:`~export_center.notify.channels.base.Message` into a
:class:`Text` (a title, an opening sentence, labelled facts and links, all plain
strings); the renderers then write it as plain text, HTML (e-mail) or markdown (chat
robots), escaping every value for the markup it goes into.

Rules:

* One template per event type of :data:`export_center.notify.targets.EVENT_TYPES` and
  language (``en``, ``zh``); an unknown language is English.
* Values a user typed (task and schedule names, failure messages) are flattened to one
  line and trimmed: names to :data:`MAX_NAME` characters, failure messages to
  :data:`MAX_MESSAGE`, other values to :data:`MAX_VALUE` (an ellipsis marks the cut).
* Links are ``links["task"]`` (the page) and, for ``export.succeeded``,
  ``links["file"]`` (a signed download link); only ``http``/``https`` URLs are used.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from export_center.notify.channels.base import Message

__all__ = [
    "summary",
    "MAX_MESSAGE",
    "MAX_NAME",
    "MAX_VALUE",
    "Text",
    "compose",
    "escape_markdown",
    "render_html",
    "render_markdown",
    "render_plain",
    "trim",
    "trim_utf8",
]

#: Characters kept of a task or schedule name.
MAX_NAME = 200
#: Characters kept of a failure message.
MAX_MESSAGE = 1000
#: Characters kept of any other value.
MAX_VALUE = 200

_ELLIPSIS = "…"
_SPACES = re.compile(r"\s+")
# Characters that start inline markup anywhere in a line (a value never starts a line,
# so the line-start ones, "#", "-", "+", "1.", need no escape).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]()<>~])")

_STATES = {
    "en": {
        "succeeded": "succeeded",
        "failed": "failed",
        "cancelled": "cancelled",
        "expired": "expired",
        "queued": "queued",
        "running": "running",
        "awaiting_approval": "awaiting approval",
        "rejected": "rejected",
    },
    "zh": {
        "succeeded": "已完成",
        "failed": "失败",
        "cancelled": "已取消",
        "expired": "已过期",
        "queued": "排队中",
        "running": "进行中",
        "awaiting_approval": "待审批",
        "rejected": "已驳回",
    },
}

_LABELS = {
    "en": {
        "exportType": "Export type",
        "state": "State",
        "rows": "Rows",
        "fileName": "File",
        "failure": "Reason",
        "expiresAt": "Available until",
        "linkExpiresAt": "Download link works until",
        "reason": "Reason",
        "task": "Open the task",
        "file": "Download the file",
        "footer": "Sent by the export center. Event id: {event_id}",
    },
    "zh": {
        "exportType": "导出类型",
        "state": "状态",
        "rows": "行数",
        "fileName": "文件名",
        "failure": "失败原因",
        "expiresAt": "有效期至",
        "linkExpiresAt": "下载链接有效期至",
        "reason": "暂停原因",
        "task": "查看任务",
        "file": "下载文件",
        "footer": "本邮件由下载中心自动发送，请勿直接回复。事件编号：{event_id}",
    },
}

# (subject, opening sentence) per event and language; {name}, {rows}, {expires}.
_TEMPLATES = {
    "en": {
        "export.succeeded": (
            "Export ready: {name}",
            "Your export “{name}” has finished{rows_part}.",
        ),
        "export.failed": ("Export failed: {name}", "Your export “{name}” could not be completed."),
        "export.cancelled": ("Export cancelled: {name}", "Your export “{name}” was cancelled."),
        "export.expiring": (
            "Export file expiring soon: {name}",
            "The file of your export “{name}” will expire on {expires}. "
            "Download it before then if you still need it.",
        ),
        "schedule.paused": (
            "Scheduled export paused: {name}",
            "The scheduled export “{name}” has been paused and will not run until it is resumed.",
        ),
        "export.approved": (
            "Export approved: {name}",
            "Your export “{name}” was approved and is starting.",
        ),
        "export.rejected": (
            "Export not approved: {name}",
            "Your export “{name}” was not approved; it will not run.",
        ),
    },
    "zh": {
        "export.succeeded": (
            "导出任务已完成：{name}",
            "您的导出任务「{name}」已完成{rows_part}。",
        ),
        "export.failed": ("导出任务失败：{name}", "很抱歉，您的导出任务「{name}」未能完成。"),
        "export.cancelled": ("导出任务已取消：{name}", "您的导出任务「{name}」已取消。"),
        "export.expiring": (
            "导出文件即将过期：{name}",
            "您的导出任务「{name}」生成的文件将于 {expires} 过期，如仍需要，请及时下载。",
        ),
        "schedule.paused": (
            "定时导出已暂停：{name}",
            "定时导出「{name}」已暂停，恢复之前不会再运行。",
        ),
        "export.approved": (
            "导出申请已通过：{name}",
            "您的导出任务「{name}」已通过审批，即将开始导出。",
        ),
        "export.rejected": (
            "导出申请未通过：{name}",
            "您的导出任务「{name}」未通过审批，不会执行。",
        ),
    },
}


@dataclass(frozen=True, slots=True)
class Text:
    """A notification's words before markup (every string plain and trimmed).

    Attributes:
        language: ``en`` or ``zh``.
        event_type: the event type.
        title: the subject line / card title.
        opening: the first sentence.
        facts: (label, value) lines in order.
        links: (label, URL) pairs, the file first when there is one.
        footer: the last line (names the event id).
    """

    language: str
    event_type: str
    title: str
    opening: str
    facts: tuple[tuple[str, str], ...]
    links: tuple[tuple[str, str], ...]
    footer: str


def trim(value: Any, limit: int) -> str:
    """``value`` as one line (runs of whitespace become one space) of at most ``limit``
    characters; a cut value ends with an ellipsis. None is the empty string."""
    text = _SPACES.sub(" ", "" if value is None else str(value)).strip()
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + _ELLIPSIS


def trim_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, never inside a character and
    never after a lone markdown backslash; a cut text ends with an ellipsis."""
    if len(text.encode("utf-8")) <= limit:
        return text
    room = limit - len(_ELLIPSIS.encode("utf-8"))
    cut = text.encode("utf-8")[: max(room, 0)].decode("utf-8", errors="ignore")
    while cut.endswith("\\"):
        cut = cut[:-1]
    return cut + _ELLIPSIS


def escape_markdown(text: str) -> str:
    """``text`` with markdown's special characters backslash-escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _language(language: str) -> str:
    return language if language in _TEMPLATES else "en"


def _when(value: Any, language: str, zone_name: Any = None) -> str:
    """An ISO 8601 instant as ``2026-12-03 08:00 UTC``, or in the export's zone
    ``zone_name`` with its name: ``2026-12-03 16:00 (Asia/Shanghai)`` (anything else
    trimmed as is)."""
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return trim(value, MAX_VALUE)
    if moment.utcoffset() is None:
        return moment.strftime("%Y-%m-%d %H:%M")
    if isinstance(zone_name, str) and zone_name not in ("UTC", "Etc/UTC"):
        try:
            local = moment.astimezone(ZoneInfo(zone_name))
        except (ZoneInfoNotFoundError, ValueError):
            local = None
        if local is not None:
            return f"{local.strftime('%Y-%m-%d %H:%M')} ({trim(zone_name, MAX_VALUE)})"
    offset = moment.strftime("%z")
    zone = "UTC" if offset == "+0000" else f"UTC{offset[:3]}:{offset[3:]}"
    return f"{moment.strftime('%Y-%m-%d %H:%M')} {zone}"


def _rows(value: Any, language: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return f"{value:,}"


def _safe_url(url: Any) -> str | None:
    if not isinstance(url, str) or not re.match(r"^https?://[^\s<>\"]+$", url):
        return None
    return url


def compose(message: Message, language: str | None = None) -> Text:
    """The words of ``message`` in ``language`` (default: ``message.language``).

    Args:
        message: the event (``data`` keys as documented on Message).
        language: ``en`` or ``zh``; anything else is English.

    Returns:
        The :class:`Text`; an event type without a template gets the generic
        "export ... changed" wording of ``export.cancelled``'s shape.
    """
    lang = _language(language or message.language)
    data: Mapping[str, Any] = message.data
    labels = _LABELS[lang]
    name = trim(
        data.get("taskName")
        or data.get("scheduleName")
        or data.get("taskId")
        or data.get("scheduleId"),
        MAX_NAME,
    )
    rows = _rows(data.get("rows"), lang)
    rows_part = ""
    if rows is not None:
        rows_part = f"，共 {rows} 行" if lang == "zh" else f" with {rows} rows"
    expires = (
        _when(data.get("expiresAt"), lang, data.get("timeZone")) if data.get("expiresAt") else ""
    )
    subject, opening = _TEMPLATES[lang].get(
        message.event_type, (f"{message.event_type}: {{name}}", "{name}")
    )
    values = {"name": name, "rows_part": rows_part, "expires": expires}
    facts: list[tuple[str, str]] = []
    if data.get("exportType"):
        title = data.get("exportTypeTitleZh" if lang == "zh" else "exportTypeTitle")
        code = trim(data["exportType"], MAX_VALUE)
        named = f"{trim(title, MAX_VALUE)} ({code})" if title and title != code else code
        facts.append((labels["exportType"], named))
    state = data.get("state")
    if state and message.event_type != "schedule.paused":
        facts.append((labels["state"], _STATES[lang].get(str(state), trim(state, MAX_VALUE))))
    if rows is not None:
        facts.append((labels["rows"], rows))
    if data.get("fileName"):
        facts.append((labels["fileName"], trim(data["fileName"], MAX_VALUE)))
    if message.event_type in ("export.failed", "export.rejected") and (
        data.get("failureCode") or data.get("failureMessage")
    ):
        code = trim(data.get("failureCode"), MAX_VALUE)
        text = trim(data.get("failureMessage"), MAX_MESSAGE)
        sep = "：" if lang == "zh" else ": "
        facts.append((labels["failure"], sep.join(p for p in (code, text) if p)))
    if message.event_type == "schedule.paused" and data.get("reason"):
        facts.append((labels["reason"], _pause_reason(data, lang)))
    if expires and message.event_type in ("export.succeeded", "export.expiring"):
        facts.append((labels["expiresAt"], expires))
    link_until = data.get("linkExpiresAt")
    if (
        link_until
        and message.links.get("file")
        and message.event_type
        in (
            "export.succeeded",
            "export.expiring",
        )
    ):
        link_text = _when(link_until, lang, data.get("timeZone"))
        if link_text != expires:
            facts.append((labels["linkExpiresAt"], link_text))
    links: list[tuple[str, str]] = []
    file_url = _safe_url(message.links.get("file"))
    if file_url and message.event_type in ("export.succeeded", "export.expiring"):
        links.append((labels["file"], file_url))
    opening = opening.format(**values)
    if links and message.event_type == "export.succeeded":
        opening = (
            opening[:-1] + "，请通过下方链接下载文件。"
            if lang == "zh"
            else opening + " Download it from the link below."
        )
    task_url = _safe_url(message.links.get("task"))
    if task_url:
        links.append((labels["task"], task_url))
    return Text(
        language=lang,
        event_type=message.event_type,
        title=subject.format(**values),
        opening=opening,
        facts=tuple(facts),
        links=tuple(links),
        footer=labels["footer"].format(event_id=trim(message.event_id, MAX_VALUE)),
    )


def _pause_reason(data: Mapping[str, Any], lang: str) -> str:
    """Why a schedule paused, in ``lang``: English is the scheduler's sentence; Chinese
    is worded from ``reasonCode`` (and ``permission``), never the English sentence."""
    if lang != "zh":
        return trim(data["reason"], MAX_MESSAGE)
    code = trim(data.get("reasonCode"), MAX_VALUE)
    if code == "PERMISSION_DENIED":
        permission = trim(data.get("permission"), MAX_VALUE)
        need = f"（需要 {permission}）" if permission else ""
        return f"创建者已没有此类导出的权限{need}，请先获得权限再恢复"
    if code:
        return f"导出设置已不再有效（错误代码 {code}），请修改定时导出后再恢复"
    return "导出设置已不再有效，请修改定时导出后再恢复"


def _colon(text: Text) -> str:
    return "：" if text.language == "zh" else ": "


def render_plain(text: Text) -> str:
    """``text`` as a text/plain body (lines, links spelled out, footer last)."""
    lines = [text.opening, ""]
    lines += [f"{label}{_colon(text)}{value}" for label, value in text.facts]
    if text.links:
        lines.append("")
        lines += [f"{label}{_colon(text)}{url}" for label, url in text.links]
    lines += ["", "--", text.footer]
    return "\n".join(lines) + "\n"


def render_html(text: Text) -> str:
    """``text`` as a small HTML document (every value HTML-escaped)."""
    e = html.escape
    rows = "".join(
        f'<tr><th align="left" style="padding-right:12px">{e(label)}</th><td>{e(value)}</td></tr>'
        for label, value in text.facts
    )
    links = "".join(f'<p><a href="{e(url)}">{e(label)}</a></p>' for label, url in text.links)
    lang = "zh-CN" if text.language == "zh" else "en"
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">'
        f"<title>{e(text.title)}</title></head><body>"
        f"<h2>{e(text.title)}</h2><p>{e(text.opening)}</p>"
        f"<table>{rows}</table>{links}"
        f'<p style="color:#888;font-size:12px">{e(text.footer)}</p></body></html>'
    )


def render_markdown(text: Text, *, limit: int | None = None, heading: bool = True) -> str:
    """``text`` as markdown for a chat robot (values escaped; links kept whole).

    Args:
        text: the words.
        limit: at most this many bytes of UTF-8 (the opening and facts are cut, the
            links never); None: no limit.
        heading: start with the title as a level-4 heading (off where the platform
            shows the title itself, e.g. a Feishu card header).

    Returns:
        The markdown text.
    """
    head = f"#### {escape_markdown(text.title)}\n\n" if heading else ""
    body = escape_markdown(text.opening) + "\n\n"
    body += "\n".join(
        f"**{escape_markdown(label)}**{_colon(text)}{escape_markdown(value)}  "
        for label, value in text.facts
    )
    tail = ""
    if text.links:
        tail = "\n\n" + "\n".join(f"[{escape_markdown(label)}]({url})" for label, url in text.links)
    if limit is not None:
        room = limit - len((head + tail).encode("utf-8"))
        body = trim_utf8(body, max(room, 0))
    return head + body + tail


def summary(message: Message, language: str) -> str:
    """One line for a list (the in-page notifications): the opening sentence, then the
    failure or pause reason when the event has one ("... Reason: ...", "……暂停原因：……")."""
    text = compose(message, language)
    reasons = {_LABELS[text.language]["failure"], _LABELS[text.language]["reason"]}
    sep = "：" if text.language == "zh" else ": "
    extra = [f"{label}{sep}{value}" for label, value in text.facts if label in reasons]
    if text.language == "zh":  # Chinese runs sentences on without a space
        return text.opening + "".join(f"{e}。" for e in extra)
    return " ".join([text.opening, *extra])
