"""A download link opened by a browser outside the page (from a chat, a bookmark) that
fails gets a short page in the reader's language with a way back to the download
center; every API client keeps the JSON answer exactly as before.

One stack per test (SQLite and MariaDB), each failing link made for real: signed with
the installation's secret, the task put in the state that refuses it."""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpx
from sqlalchemy import update

from export_center import repository
from export_center.access import Scope
from export_center.links import sign_download
from export_center.models import ExportTask
from tests.support.helpers import Stack, create, wait_state

TASKS = ExportTask.__table__

#: What Chromium sends when a person opens a link in a new tab.
NAVIGATION = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
    "image/webp,*/*;q=0.8",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-Dest": "document",
    "Sec-Fetch-Site": "none",
    "Sec-Fetch-User": "?1",
    "Upgrade-Insecure-Requests": "1",
}
#: A browser that sends no Fetch Metadata: Accept decides.
OLD_BROWSER = {"Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"}
#: API callers, as each really sends its headers.
API_CLIENTS = {
    "no headers": {},
    "curl": {"Accept": "*/*", "User-Agent": "curl/8.5.0"},
    "httpx": {"Accept": "*/*", "User-Agent": "python-httpx/0.28"},
    "fetch() of the page": {
        "Accept": "application/json",
        "Sec-Fetch-Mode": "cors",
        "Sec-Fetch-Dest": "empty",
        "Sec-Fetch-Site": "same-origin",
    },
    # fetch() asking for HTML is still a script's call, not a navigation.
    "fetch() accepting html": {
        "Accept": "text/html",
        "Sec-Fetch-Mode": "cors",
        "Sec-Fetch-Dest": "empty",
    },
    "json before html": {"Accept": "application/json, text/html"},
    "a Chinese client": {"Accept": "*/*", "Accept-Language": "zh-CN"},
}

#: code -> (status, English title, Chinese title)
PAGES = {
    "LINK_EXPIRED": (403, "This download link has expired", "下载链接已过期"),
    "LINK_INVALID": (403, "This download link is not valid", "下载链接无效"),
    "LINK_NOT_YOURS": (403, "This download link belongs to another user", "该下载链接属于其他用户"),
    "FILE_GONE": (404, "The file is no longer stored", "文件已不存在"),
    "FILE_EXPIRED": (410, "The file has expired", "文件已过期"),
    "NOT_READY": (409, "The file is not ready yet", "文件尚未生成"),
    "NO_FILE": (409, "This export has no file", "该导出没有生成文件"),
    "TASK_NOT_FOUND": (404, "This export cannot be found", "找不到该导出任务"),
    "UNAUTHORIZED": (401, "Sign in to download this file", "请登录后下载"),
    "UNKNOWN_PARAMETER": (
        400,
        "The file cannot be downloaded from this link",
        "无法通过此链接下载文件",
    ),
}


@dataclass
class Failing:
    """A request that fails: its path, and the bearer token it carries (if any)."""

    path: str
    token: str | None = None


def _link(stack: Stack, task_no: str, *, user: str = "alice", ttl: int = 3600) -> str:
    scope = Scope(tenant_id="t1", app_code="PLATFORM", owner=user)
    return sign_download(stack.settings.download_secret, task_no, user, scope, ttl)


def _set(stack: Stack, task_no: str, **values: Any) -> None:
    with stack.runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, task_no)
        assert task is not None
        conn.execute(update(TASKS).where(TASKS.c.id == task.id).values(**values))


def _succeeded(stack: Stack, day: int) -> dict[str, Any]:
    alice = stack.client("alice")
    d = f"1995-03-{day:02d}"
    task_id = create(alice, "csv", taskName="<b>Secret name</b>", parameters={"from": d, "to": d})
    detail = wait_state(alice, task_id.json()["taskId"])
    assert detail["state"] == "succeeded", detail
    return detail


def _failing(stack: Stack) -> dict[str, Failing]:
    """One real failing request per code."""
    good = _succeeded(stack, 1)
    task_no = good["taskId"]
    link = good["downloadUrl"]
    signature = link.split("signature=")[1]
    gone = _succeeded(stack, 2)
    stack.runtime.storage.delete(_object_key(stack, gone["taskId"]))
    expired_file = _succeeded(stack, 3)
    _set(stack, expired_file["taskId"], status="EXPIRED", object_key=None)
    running = _succeeded(stack, 4)
    _set(stack, running["taskId"], status="RUNNING", object_key=None)
    failed = _succeeded(stack, 5)
    _set(
        stack, failed["taskId"], status="FAILED", object_key=None, failure_code="PROVIDER_REJECTED"
    )
    return {
        "LINK_EXPIRED": Failing(_link(stack, task_no, ttl=-60)),
        "LINK_INVALID": Failing(link.replace(signature, signature[::-1])),
        "LINK_NOT_YOURS": Failing(link, token=stack.token("bob")),
        "FILE_GONE": Failing(gone["downloadUrl"]),
        "FILE_EXPIRED": Failing(_link(stack, expired_file["taskId"])),
        "NOT_READY": Failing(_link(stack, running["taskId"])),
        "NO_FILE": Failing(_link(stack, failed["taskId"])),
        "TASK_NOT_FOUND": Failing(_link(stack, "exp_01KB7Z3Y4V8N2Q6R0S1T2U3V4W")),
        "UNAUTHORIZED": Failing(f"/api/v1/exports/{task_no}/download"),
        "UNKNOWN_PARAMETER": Failing(f"{link}&file=..%2f..%2fetc%2fpasswd"),
    }


def _object_key(stack: Stack, task_no: str) -> str:
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_no)
    assert task is not None and task.object_key
    return task.object_key


def _get(stack: Stack, failing: Failing, headers: dict[str, str]) -> httpx.Response:
    sent = dict(headers)
    if failing.token:
        sent["Authorization"] = f"Bearer {failing.token}"
    return httpx.get(stack.url + failing.path, headers=sent, timeout=30)


def test_a_failing_link_opened_by_a_browser_is_a_page_in_its_language(stack):
    failing = _failing(stack)
    assert set(failing) == set(PAGES)
    for code, (status, english, chinese) in PAGES.items():
        request = failing[code]
        for language, headers, title, lang in (
            ("en-US,en;q=0.9", NAVIGATION, english, "en"),
            ("zh-CN,zh;q=0.9,en;q=0.8", NAVIGATION, chinese, "zh-CN"),
            ("zh-TW", OLD_BROWSER, chinese, "zh-CN"),
        ):
            answer = _get(stack, request, {**headers, "Accept-Language": language})
            where = f"{code} in {language}"
            assert answer.status_code == status, (where, answer.text)
            assert answer.headers["content-type"] == "text/html; charset=utf-8", where
            page = answer.text
            assert f'<html lang="{lang}">' in page, where
            assert f"<h1>{title}</h1>" in page, where
            assert f"<code>{code}</code>" in page, where
            center = "Download center" if lang == "en" else "下载中心"
            assert f"<title>{title} · {center}</title>" in page, where
            open_it = "Open the download center" if lang == "en" else "打开下载中心"
            [(href, text)] = re.findall(r'<a href="([^"]+)">([^<]+)</a>', page)
            assert text == open_it and urljoin(answer.url.path, href) == "/ui/", where
            # Nothing of the task or the link: no name, no user, no signature.
            assert "Secret name" not in page and "alice" not in page, where
            assert "signature" not in page and "<script" not in page, where
            assert len(answer.content) < 3000, where
    # The 401 keeps its challenge; the link back leads to the download center.
    unauthorized = _get(stack, failing["UNAUTHORIZED"], NAVIGATION)
    assert unauthorized.headers["www-authenticate"] == 'Bearer realm="export-center"'
    center = httpx.get(urljoin(stack.url + failing["LINK_EXPIRED"].path, "../../../../ui/"))
    assert center.status_code == 200 and 'id="center"' in center.text


def test_api_clients_keep_the_json_answer_exactly(stack):
    failing = _failing(stack)
    for code, request in failing.items():
        status = PAGES[code][0]
        plain = _get(stack, request, {})
        assert plain.status_code == status, (code, plain.text)
        assert plain.headers["content-type"] == "application/json", code
        body = plain.json()
        expected_code = "UNKNOWN_PARAMETER" if code == "UNKNOWN_PARAMETER" else code
        assert body["code"] == expected_code and body["message"], (code, body)
        for client, headers in API_CLIENTS.items():
            answer = _get(stack, request, headers)
            assert answer.status_code == status, (code, client)
            assert answer.headers["content-type"] == "application/json", (code, client)
            assert answer.content == plain.content, (code, client)
    expired = _get(stack, failing["LINK_EXPIRED"], {}).json()
    assert expired == {
        "code": "LINK_EXPIRED",
        "message": "the download link has expired; ask for a new one",
        "field": None,
    }


def test_a_good_link_opened_by_a_browser_still_downloads_the_file(stack):
    good = _succeeded(stack, 6)
    answer = httpx.get(stack.url + good["downloadUrl"], headers=NAVIGATION)
    assert answer.status_code == 200 and answer.content[:3] == b"\xef\xbb\xbf"
    assert answer.headers["content-disposition"].startswith("attachment;")
    # A bearer navigation (a host application's proxy adds Authorization): the redirect.
    alice = stack.client("alice")
    redirect = alice.get(f"/api/v1/exports/{good['taskId']}/download", headers=NAVIGATION)
    assert redirect.status_code == 307 and "signature=" in redirect.headers["location"]


def test_the_page_escapes_what_it_is_given_and_allows_nothing_else(stack):
    good = _succeeded(stack, 7)
    link = good["downloadUrl"]
    marked = link.replace(good["taskId"], "<svg onload=alert(1)>")
    attacks = {
        "markup in the task id": (marked, 404),
        "markup in a parameter name": (f"{link}&%3Cimg%20src%3Dx%3E=1", 400),
        "markup in the signature": (link + "%3Cscript%3E", 403),
    }
    for what, (path, status) in attacks.items():
        answer = httpx.get(stack.url + path, headers=NAVIGATION)
        assert answer.status_code == status, (what, answer.text)
        assert "<svg" not in answer.text and "<img" not in answer.text, what
        assert "<script" not in answer.text and "onload" not in answer.text, what
    page = httpx.get(stack.url + link.replace("signature=", "signature=0"), headers=NAVIGATION)
    # One inline style, allowed by its hash; no script, no frame, no form, no other source.
    policy = page.headers["content-security-policy"]
    [style] = re.findall(r"<style>(.*?)</style>", page.text, re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in policy
    for rule in ("default-src 'none'", "frame-ancestors 'none'", "form-action 'none'"):
        assert rule in policy
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "Sec-Fetch-Mode" in page.headers["vary"] and "Accept-Language" in page.headers["vary"]
