"""A user's notification defaults (``/api/v1/me/notification-defaults``) on a running
stack with a real SMTP server (SQLite and MariaDB): the token's ``email`` and ``locale``
claims, the defaults reaching a create that names no ``notify``, ``[]`` for nobody,
null for the built-in page default, the 422s; and ``notify`` in the idempotency and
duplicate checks of a create."""

from __future__ import annotations

import email
import email.policy
import re
import time
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import httpx
import pytest
from aiosmtpd.controller import Controller

from tests.support import smtp_server
from tests.support.helpers import create, wait_state

DEFAULTS = "/api/v1/me/notification-defaults"


@pytest.fixture
def mailbox() -> Iterator[tuple[smtp_server.Mailbox, Controller]]:
    box = smtp_server.Mailbox()
    controller = smtp_server.start(box)
    yield box, controller
    controller.stop()


@pytest.fixture
def mail_stack(make_stack: Any, mailbox: tuple[smtp_server.Mailbox, Controller]) -> Any:
    return make_stack(
        notify={
            "loop_seconds": 0.05,
            "backoff_seconds": [0.1],
            "smtp_host": "127.0.0.1",
            "smtp_port": mailbox[1].port,
            "smtp_tls": "none",
            "smtp_from": "exports@example.com",
            "email_allowed_domains": ["example.com", "example.cn"],
        }
    )


def _mails(box: smtp_server.Mailbox, count: int, timeout: float = 30.0) -> list[EmailMessage]:
    deadline = time.monotonic() + timeout
    while len(box.mails) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(box.mails) >= count, f"{len(box.mails)} mails, wanted {count}"
    out = []
    for envelope in box.mails:
        mail = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(mail, EmailMessage)
        out.append(mail)
    return out


def test_defaults_from_the_page_reach_the_tokens_address_in_its_language(
    mail_stack: Any, make_stack: Any, mailbox: tuple[smtp_server.Mailbox, Controller]
) -> None:
    box, _ = mailbox
    # As `serve` does with its sample providers' child process: the providers
    # registered as "self" answer on another port than the API's.
    # That stack shares the database: it serves providers only, and runs no loop and no
    # consumer that could take this stack's exports.
    off = {"enabled": False}
    providers = make_stack(
        provider={"internal_token": mail_stack.settings.internal_token},
        consumer=off,
        publisher=off,
        reconciler=off,
        notify=off,
        scheduler=off,
    )
    mail_stack.runtime.set_self_url(providers.url)
    li = mail_stack.client("li", email="li.wei@example.cn", locale="zh-CN")
    first = li.get(DEFAULTS).json()
    assert first["notify"] is None
    assert first["effective"] == [
        {"channel": "page", "events": ["export.succeeded", "export.failed", "schedule.paused"]}
    ]
    assert first["email"] == "li.wei@example.cn" and first["emailConfigured"] is True
    assert first["emailDomains"] == ["example.cn", "example.com"]
    assert "export.expiring" in first["events"]
    saved = li.put(DEFAULTS, json={"notify": [{"channel": "email"}, {"channel": "page"}]})
    assert saved.status_code == 200, saved.text
    want = [
        {"channel": "email", "events": ["export.succeeded", "export.failed", "schedule.paused"]},
        {"channel": "page", "events": ["export.succeeded", "export.failed", "schedule.paused"]},
    ]
    assert saved.json()["notify"] == want == saved.json()["effective"]
    assert li.get(DEFAULTS).json()["notify"] == want
    made = create(li, taskName="每周订单", parameters={"from": "1995-03-01", "to": "1995-03-31"})
    assert made.status_code == 202, made.text
    detail = wait_state(li, made.json()["taskId"], {"succeeded"})
    assert detail["notify"] is None  # it named none: the defaults were read when it ended
    (mail,) = _mails(box, 1)
    assert box.mails[0].rcpt_tos == ["li.wei@example.cn"]
    assert mail["Subject"] == "导出任务已完成：每周订单"
    # The links are the API's own (not the sample providers' process), and they work.
    body = mail.get_body(("plain",))
    assert body is not None
    text = str(body.get_content())
    task_no = made.json()["taskId"]
    assert f"{mail_stack.url}/ui/#task={task_no}" in text
    (file_url,) = re.findall(r"https?://[^\s]+/download\?[^\s]+", text)
    assert "下载链接有效期至" in text  # the link (24 h) ends before the file (7 days)
    assert "导出类型：订单 (ORDERS)" in text
    assert file_url.startswith(f"{mail_stack.url}/api/v1/exports/{task_no}/download")
    fetched = httpx.get(file_url, timeout=30)
    assert fetched.status_code == 200 and len(fetched.content) > 1000
    page = li.get("/api/v1/notifications").json()
    assert [i["taskId"] for i in page["items"]] == [made.json()["taskId"]]


def test_empty_defaults_tell_nobody_and_null_brings_the_page_back(mail_stack: Any) -> None:
    bob = mail_stack.client("bob")
    assert bob.put(DEFAULTS, json={"notify": []}).json()["effective"] == []
    quiet = create(bob, parameters={"from": "1995-04-01", "to": "1995-04-30"})
    wait_state(bob, quiet.json()["taskId"], {"succeeded"})
    time.sleep(0.3)
    assert bob.get("/api/v1/notifications").json()["items"] == []
    back = bob.put(DEFAULTS, json={"notify": None}).json()
    assert back["notify"] is None and back["effective"][0]["channel"] == "page"
    loud = create(bob, parameters={"from": "1995-05-01", "to": "1995-05-31"})
    wait_state(bob, loud.json()["taskId"], {"succeeded"})
    deadline = time.monotonic() + 10
    while not bob.get("/api/v1/notifications").json()["items"] and time.monotonic() < deadline:
        time.sleep(0.05)
    items = bob.get("/api/v1/notifications").json()["items"]
    assert [i["taskId"] for i in items] == [loud.json()["taskId"]]


@pytest.mark.parametrize(
    ("notify", "code", "field"),
    [
        ([{"channel": "email", "to": "x@elsewhere.org"}], "RECIPIENT_NOT_ALLOWED", "notify[0].to"),
        ([{"channel": "dingtalk", "robot": "ops"}], "UNKNOWN_ROBOT", "notify[0].robot"),
        ([{"channel": "page"}, {"channel": "page"}], "INVALID_NOTIFY", "notify[1]"),
        ("page", "INVALID_NOTIFY", "notify"),
    ],
)
def test_bad_defaults_are_422_and_keep_the_saved_ones(
    mail_stack: Any, notify: Any, code: str, field: str
) -> None:
    carol = mail_stack.client("carol")
    assert carol.put(DEFAULTS, json={"notify": [{"channel": "page"}]}).status_code == 200
    answer = carol.put(DEFAULTS, json={"notify": notify})
    got = answer.json()
    assert (answer.status_code, got["code"], got["field"]) == (422, code, field), answer.text
    assert got["message"]
    assert carol.get(DEFAULTS).json()["notify"][0]["channel"] == "page"


def test_an_unknown_field_and_no_token_are_refused(mail_stack: Any) -> None:
    answer = mail_stack.client("dan").put(DEFAULTS, json={"notify": [], "sms": True})
    assert answer.status_code == 422 and answer.json()["code"] == "UNKNOWN_FIELD"
    assert mail_stack.client(None).get(DEFAULTS).status_code == 401


def test_a_token_email_that_is_no_address_is_not_used(mail_stack: Any) -> None:
    odd = mail_stack.client("erin", email="erin at example", locale="fr-FR")
    assert odd.get("/api/v1/me").status_code == 200
    assert odd.get(DEFAULTS).json()["email"] is None


def test_notify_is_part_of_the_idempotency_and_duplicate_checks(mail_stack: Any) -> None:
    fay = mail_stack.client("fay")
    params = {"from": "1996-01-01", "to": "1996-12-31"}
    first = create(fay, parameters=params, requestId="k-1", notify=[{"channel": "page"}])
    assert first.status_code == 202, first.text
    again = create(fay, parameters=params, requestId="k-1", notify=[{"channel": "page"}])
    assert again.json()["taskId"] == first.json()["taskId"]
    other = create(
        fay,
        parameters=params,
        requestId="k-1",
        notify=[{"channel": "email", "to": "f@example.com"}],
    )
    assert other.status_code == 409 and other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert "notify" in other.json()["message"]
    # Without a key: asking to tell someone else is not a repeat of the running export.
    told = create(fay, parameters=params, notify=[{"channel": "email", "to": "g@example.com"}])
    assert told.status_code == 202 and told.json()["taskId"] != first.json()["taskId"]
    repeat = create(fay, parameters=params, notify=[{"channel": "email", "to": "g@example.com"}])
    assert repeat.json()["taskId"] == told.json()["taskId"]
