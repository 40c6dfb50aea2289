"""The short HTML page a browser gets when a download link fails.

A signed download link travels outside the download center (chat, e-mail, a
bookmark). When it fails (expired, altered, another user's, the file gone or not ready)
a browser that *navigated* to it gets a small page in the reader's language that says
what happened and links back to the download center; every other caller (curl, httpx,
``fetch()`` from the page) keeps the JSON error body exactly as the API answers it.

Rules:

* A navigation is recognised by the Fetch Metadata headers every current browser sends
  (``Sec-Fetch-Mode: navigate`` or ``Sec-Fetch-Dest: document``); a request that sends
  them with other values (``fetch()``: ``cors`` / ``empty``) is an API call whatever its
  ``Accept`` says. Without those headers (older browsers), ``text/html`` (or XHTML) as
  the first media range of ``Accept`` decides; curl and httpx send ``*/*``.
* The language is the first of ``Accept-Language`` by quality that the page has:
  any ``zh`` tag (``zh-CN``, ``zh-TW``, ``zh-Hans`` ...) gives Chinese, ``en`` or nothing
  known gives English.
* The page holds no data of the task or the link (no name, no user, no signature):
  a fixed title, a sentence per error code, the code itself and a link to the download
  center (relative, so a proxy's path prefix is kept). Everything written into it is
  HTML-escaped. No script; its only style is inline and allowed by hash in its own
  Content-Security-Policy, which also forbids framing, forms and every other source.
* The status stays the API's (403, 404, 409, 410, 503 ...), with ``Vary`` naming the
  headers the choice reads.
"""

from __future__ import annotations

import base64
import hashlib
import html
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from fastapi import Request, Response
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from starlette.datastructures import Headers

from export_center.errors import RequestError, StorageError

__all__ = [
    "DownloadErrorsRoute",
    "Language",
    "download_error_page",
    "page_language",
    "wants_html",
]

log = logging.getLogger(__name__)

Language = Literal["en", "zh-CN"]

#: From ``/api/v1/exports/{taskId}/download`` to the download center ``/ui/``.
CENTER_HREF = "../../../../ui/"

_STYLE = (
    "body{margin:0;font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,'PingFang SC',"
    "'Microsoft YaHei','Noto Sans CJK SC',sans-serif;color:#1f2933;background:#f6f7f9}"
    "main{max-width:34rem;margin:12vh auto;padding:1.5rem 1.75rem;background:#fff;"
    "border:1px solid #dde2e8;border-radius:8px}"
    "h1{font-size:1.3rem;margin:0 0 .6rem}p{margin:0 0 1rem}"
    "a{display:inline-block;padding:.45rem .9rem;border-radius:8px;background:#1d4ed8;"
    "color:#fff;text-decoration:none;font-weight:600}a:focus-visible{outline:3px solid "
    "#f59e0b;outline-offset:2px}.code{color:#5b6673;font-size:.8rem;margin:1rem 0 0}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
_HEADERS = {
    "Content-Security-Policy": (
        f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Vary": "Accept, Accept-Language, Sec-Fetch-Mode, Sec-Fetch-Dest",
}

#: ``code -> {language: (title, what to do)}``.
_TEXTS: dict[str, dict[Language, tuple[str, str]]] = {
    "LINK_EXPIRED": {
        "en": (
            "This download link has expired",
            "Download links work for a limited time. The file may still be there: open the "
            "download center and download it again from your list.",
        ),
        "zh-CN": (
            "下载链接已过期",
            "下载链接有有效期。文件可能仍然保留：请打开下载中心，在导出列表中重新下载。",
        ),
    },
    "LINK_INVALID": {
        "en": (
            "This download link is not valid",
            "It may have been cut off or changed when it was copied. Open the download center "
            "and download the file from your list.",
        ),
        "zh-CN": (
            "下载链接无效",
            "链接可能在复制或转发时被截断或改动。请打开下载中心，在导出列表中下载文件。",
        ),
    },
    "LINK_NOT_YOURS": {
        "en": (
            "This download link belongs to another user",
            "It was made for another account than the one you are signed in with. Download "
            "the file from your own list in the download center.",
        ),
        "zh-CN": (
            "该下载链接属于其他用户",
            "此链接是为其他账号生成的，与你当前登录的账号不符。请在下载中心从你自己的导出列表中下载。",
        ),
    },
    "LINK_REVOKED": {
        "en": (
            "This download link was revoked",
            "The owner of the export or an administrator withdrew it. If you should still "
            "have the file, ask them for a new link, or download it from your own list.",
        ),
        "zh-CN": (
            "下载链接已作废",
            "导出的所有者或管理员已收回此链接。如仍需要该文件，请向对方索取新链接，或在你自己的导出列表中下载。",
        ),
    },
    "LINK_USED_UP": {
        "en": (
            "This download link has been used up",
            "It works only a set number of times for this kind of export. Open the download "
            "center and download the file again from your list.",
        ),
        "zh-CN": (
            "下载链接的使用次数已用完",
            "此类导出的下载链接只能使用规定的次数。请打开下载中心，在导出列表中重新下载。",
        ),
    },
    "FILE_EXPIRED": {
        "en": (
            "The file has expired",
            "Files are kept for a limited time, and this one has been deleted. Open the "
            "download center to export it again.",
        ),
        "zh-CN": (
            "文件已过期",
            "文件只保留一段时间，此文件已被删除。请打开下载中心重新导出。",
        ),
    },
    "FILE_GONE": {
        "en": (
            "The file is no longer stored",
            "Open the download center to export it again.",
        ),
        "zh-CN": ("文件已不存在", "请打开下载中心重新导出。"),
    },
    "NOT_READY": {
        "en": (
            "The file is not ready yet",
            "The export is still running. Open the download center to follow its progress; "
            "the file can be downloaded there once it is complete.",
        ),
        "zh-CN": (
            "文件尚未生成",
            "导出仍在进行中。请打开下载中心查看进度，完成后即可在那里下载。",
        ),
    },
    "NO_FILE": {
        "en": (
            "This export has no file",
            "It failed or was cancelled before its file was written. Open the download "
            "center to see what happened, or to export it again.",
        ),
        "zh-CN": (
            "该导出没有生成文件",
            "导出在生成文件之前已失败或被取消。请打开下载中心查看原因，或重新导出。",
        ),
    },
    "TASK_NOT_FOUND": {
        "en": (
            "This export cannot be found",
            "It does not exist, or the account this link was made for may not see it. Open "
            "the download center to see your exports.",
        ),
        "zh-CN": (
            "找不到该导出任务",
            "该任务不存在，或此链接对应的账号无权查看。请打开下载中心查看你的导出。",
        ),
    },
    "STORAGE_UNAVAILABLE": {
        "en": (
            "The file storage is not answering",
            "This is usually temporary. Reload this page in a moment to download the file.",
        ),
        "zh-CN": (
            "文件存储暂时无法访问",
            "这通常是暂时的，请稍后刷新本页重新下载。",
        ),
    },
    "UNAUTHORIZED": {
        "en": (
            "Sign in to download this file",
            "This address needs a download link from the download center. Open the download "
            "center, sign in and download the file from your list.",
        ),
        "zh-CN": (
            "请登录后下载",
            "此地址需要从下载中心获取的下载链接。请打开下载中心，登录后在导出列表中下载文件。",
        ),
    },
}
#: Any other code (a malformed query, a token the server refuses ...).
_DEFAULT: dict[Language, tuple[str, str]] = {
    "en": (
        "The file cannot be downloaded from this link",
        "Open the download center and download it from your list.",
    ),
    "zh-CN": ("无法通过此链接下载文件", "请打开下载中心，在导出列表中下载文件。"),
}
_CHROME: dict[Language, tuple[str, str, str]] = {
    # (suffix of the title, the link's text, the label of the code)
    "en": ("Download center", "Open the download center", "Error code: "),
    "zh-CN": ("下载中心", "打开下载中心", "错误代码："),
}
_LANGUAGE_RANGE = re.compile(
    r"^\s*([A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*|\*)\s*(?:;\s*q\s*=\s*([^;]*))?\s*$"
)


def wants_html(headers: Headers) -> bool:
    """Whether the request is a browser navigation (the rule of the module docstring)."""
    mode = headers.get("sec-fetch-mode")
    dest = headers.get("sec-fetch-dest")
    if mode is not None or dest is not None:
        return mode == "navigate" or dest == "document"
    first = headers.get("accept", "").split(",")[0].split(";")[0].strip().lower()
    return first in ("text/html", "application/xhtml+xml")


def page_language(accept_language: str | None) -> Language:
    """The page's language for an ``Accept-Language`` header: the highest-quality range
    that is Chinese (``zh``, ``zh-*``) or English (``en``, ``en-*``); English otherwise.

    Ranges with ``q=0`` (refused) and malformed ranges are skipped; equal qualities keep
    the header's order.
    """
    ranked: list[tuple[float, int, str]] = []
    for index, part in enumerate((accept_language or "").split(",")[:32]):
        match = _LANGUAGE_RANGE.match(part)
        if match is None:
            continue
        try:
            quality = float(match.group(2)) if match.group(2) is not None else 1.0
        except ValueError:
            continue
        if quality > 0:
            ranked.append((-quality, index, match.group(1).lower()))
    for _, _, tag in sorted(ranked):
        primary = tag.split("-")[0]
        if primary == "zh":
            return "zh-CN"
        if primary == "en":
            return "en"
    return "en"


def download_error_page(
    code: str, status: int, language: Language, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """The HTML answer to a failed download: ``status`` kept, the page in ``language``.

    Args:
        code: the API's error code (``LINK_EXPIRED`` ...); unknown codes get a general
            sentence. ``TOKEN_*`` codes read as ``UNAUTHORIZED``.
        headers: extra headers of the API's answer to keep (``Retry-After``,
            ``WWW-Authenticate``).
    """
    key = "UNAUTHORIZED" if code.startswith("TOKEN_") else code
    title, text = _TEXTS.get(key, _DEFAULT)[language]
    suffix, link, code_label = _CHROME[language]
    e = html.escape
    body = (
        f'<!doctype html>\n<html lang="{e(language)}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{e(title)} · {e(suffix)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n<main>\n<h1>{e(title)}</h1>\n<p>{e(text)}</p>\n"
        f'<a href="{e(CENTER_HREF)}">{e(link)}</a>\n'
        f'<p class="code">{e(code_label)}<code>{e(code)}</code></p>\n</main>\n</body>\n</html>\n'
    )
    return HTMLResponse(body, status_code=status, headers={**_HEADERS, **(headers or {})})


def _page_for(request: Request, exc: Exception) -> Response | None:
    """The HTML page for ``exc`` when ``request`` is a navigation; None to keep the JSON."""
    if not wants_html(request.headers):
        return None
    language = page_language(request.headers.get("accept-language"))
    if isinstance(exc, StorageError):
        log.warning("storage error while serving a download: %s", exc.message)
        return download_error_page("STORAGE_UNAVAILABLE", 503, language, {"Retry-After": "5"})
    assert isinstance(exc, RequestError)
    extra = {"WWW-Authenticate": 'Bearer realm="export-center"'} if exc.status == 401 else {}
    return download_error_page(exc.code, exc.status, language, extra)


class DownloadErrorsRoute(APIRoute):
    """The route class of the download route: its errors (those of its dependencies
    too: the query check, the bearer token) become :func:`download_error_page` for a
    browser navigation; for everyone else they propagate to the app's one JSON mapping,
    unchanged."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The handler of FastAPI, with the navigation's errors answered as HTML."""
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except (RequestError, StorageError) as exc:
                page = _page_for(request, exc)
                if page is None:
                    raise
                return page

        return route
