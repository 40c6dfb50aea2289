"""The rules of the download error page: which requests are navigations, which language
a reader gets, and that everything written into the page is escaped."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers
from starlette.requests import Request

from export_center.api.error_pages import (
    _page_for,
    download_error_page,
    page_language,
    wants_html,
)
from export_center.errors import Forbidden, StorageError


@pytest.mark.parametrize(
    ("headers", "html"),
    [
        ({"sec-fetch-mode": "navigate", "sec-fetch-dest": "document"}, True),
        ({"sec-fetch-mode": "navigate"}, True),  # a download link's navigation
        ({"sec-fetch-dest": "document"}, True),
        ({"sec-fetch-mode": "cors", "sec-fetch-dest": "empty", "accept": "text/html"}, False),
        ({"sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"}, False),
        ({"sec-fetch-mode": "same-origin", "accept": "text/html"}, False),
        ({"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, True),  # no Fetch Metadata
        ({"accept": "application/xhtml+xml"}, True),
        ({"accept": " TEXT/HTML ;q=0.9"}, True),
        ({"accept": "application/json, text/html"}, False),
        ({"accept": "*/*"}, False),  # curl, httpx
        ({}, False),
    ],
)
def test_a_navigation_is_what_the_browser_says_it_is(headers, html):
    assert wants_html(Headers(headers)) is html


@pytest.mark.parametrize(
    ("accept_language", "language"),
    [
        ("zh-CN", "zh-CN"),
        ("zh", "zh-CN"),
        ("zh-TW,zh;q=0.9", "zh-CN"),
        ("zh-Hans-CN", "zh-CN"),
        ("ZH-cn", "zh-CN"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        ("fr-FR, zh-CN;q=0.8, en;q=0.5", "zh-CN"),  # the best language the page has
        ("fr-FR, en;q=0.9, zh;q=0.8", "en"),
        ("en;q=0.5, zh;q=0.6", "zh-CN"),  # quality, not order
        ("zh-CN;q=0, en", "en"),  # q=0 refuses
        ("zh;q=abc, en;q=0.1", "en"),  # a malformed quality is skipped
        ("de, fr", "en"),
        ("*", "en"),
        ("", "en"),
        (None, "en"),
        (";;,,=", "en"),
    ],
)
def test_the_reader_gets_the_best_language_the_page_has(accept_language, language):
    assert page_language(accept_language) == language


def test_everything_written_into_the_page_is_escaped():
    page = download_error_page('<img src=x onerror="alert(1)">', 403, "en")
    text = page.body.decode()
    assert "<img" not in text and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text
    assert "<script" not in text
    assert page.status_code == 403


def _request(headers: dict[str, str]) -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/exports/x/download",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return Request(scope)


def test_a_storage_outage_is_a_503_page_that_says_to_reload():
    navigation = {"sec-fetch-mode": "navigate", "accept-language": "zh-CN"}
    page = _page_for(_request(navigation), StorageError("bucket exports: connection refused"))
    assert page is not None and page.status_code == 503
    assert page.headers["retry-after"] == "5"
    text = page.body.decode()
    assert "<h1>文件存储暂时无法访问</h1>" in text and "bucket" not in text
    # An API caller: None, so the app's JSON mapping answers as before.
    assert _page_for(_request({"accept": "*/*"}), StorageError("down")) is None
    assert _page_for(_request({}), Forbidden("no", code="LINK_INVALID")) is None
