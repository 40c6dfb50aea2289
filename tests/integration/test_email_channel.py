"""The e-mail channel against a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from export_center.embedded import free_port
from export_center.notify.channels.email import EmailChannel
from export_center.settings_notify import NotifySettings
from tests.support import smtp_server
from tests.support.notify_messages import FILE_URL, TASK_URL, failed, succeeded


@pytest.fixture
def mailbox() -> smtp_server.Mailbox:
    return smtp_server.Mailbox()


@pytest.fixture
def plain_server(mailbox: smtp_server.Mailbox) -> Iterator[Controller]:
    controller = smtp_server.start(mailbox)
    yield controller
    controller.stop()


def _settings(port: int, **values: Any) -> NotifySettings:
    data: dict[str, Any] = {
        "smtp_host": "127.0.0.1",
        "smtp_port": port,
        "smtp_tls": "none",
        "mail_from": "exports@example.com",
        "email_allowed_domains": ["example.com", "Example.CN"],
        "send_timeout_seconds": 5,
    }
    data.update(values)
    return NotifySettings(**data)


def _parse(envelope: Any) -> EmailMessage:
    mail = email.message_from_bytes(envelope.content, policy=email.policy.default)
    assert isinstance(mail, EmailMessage)
    return mail


def _bodies(mail: EmailMessage) -> tuple[str, str]:
    plain = mail.get_body(("plain",))
    html = mail.get_body(("html",))
    assert plain is not None and html is not None
    return str(plain.get_content()), str(html.get_content())


def _no_attachment(mail: EmailMessage) -> None:
    assert mail.get_content_type() == "multipart/alternative"
    parts = list(mail.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
    assert list(mail.iter_attachments()) == []
    assert all(p.get_content_disposition() is None for p in parts)


def test_english_mail(plain_server: Controller, mailbox: smtp_server.Mailbox) -> None:
    channel = EmailChannel(_settings(plain_server.port))
    outcome = channel.send("Alice@Example.com", succeeded("en", taskName="Q4 <orders> & co"))
    assert outcome.delivered and outcome.status_code == 250 and outcome.error is None
    assert len(mailbox.mails) == 1
    envelope = mailbox.mails[0]
    assert envelope.mail_from == "exports@example.com"
    assert envelope.rcpt_tos == ["Alice@Example.com"]
    mail = _parse(envelope)
    assert mail["Subject"] == "Export ready: Q4 <orders> & co"
    assert mail["X-Export-Center-Event-Id"] == "evt_01JTEST"
    assert mail["Message-ID"].startswith("<evt_01JTEST.") and mail["Message-ID"].endswith(
        "@example.com>"
    )
    assert mail["To"] == "Alice@Example.com"
    _no_attachment(mail)
    plain, html = _bodies(mail)
    assert FILE_URL in plain and TASK_URL in plain
    assert "1,234 rows" in plain and "orders-2026-11.xlsx" in plain
    assert "2026-12-09 08:00 UTC" in plain
    assert f'href="{FILE_URL.replace("&", "&amp;")}"' in html
    assert "Q4 &lt;orders&gt; &amp; co" in html and "<orders>" not in html


def test_chinese_mail(plain_server: Controller, mailbox: smtp_server.Mailbox) -> None:
    channel = EmailChannel(_settings(plain_server.port))
    assert channel.send("ops@example.cn", succeeded("zh", taskName="每周订单")).delivered
    mail = _parse(mailbox.mails[0])
    # The raw header is RFC 2047 encoded; the parsed one reads back as written.
    assert "=?utf-8?" in mailbox.mails[0].content.decode("ascii").split("\r\n\r\n")[0].lower()
    assert mail["Subject"] == "导出任务已完成：每周订单"
    assert "下载中心" in mail["From"]
    _no_attachment(mail)
    plain, html = _bodies(mail)
    assert "您的导出任务「每周订单」已完成，共 1,234 行" in plain
    assert f"下载文件：{FILE_URL}" in plain
    assert "有效期至：2026-12-09 08:00 UTC" in plain
    assert "下载文件</a>" in html and 'lang="zh-CN"' in html


def test_failed_mail_names_the_reason(
    plain_server: Controller, mailbox: smtp_server.Mailbox
) -> None:
    channel = EmailChannel(_settings(plain_server.port))
    message = failed("zh", failureMessage="line one\nline two " + "x" * 3000)
    assert channel.send("ops@example.com", message).delivered
    mail = _parse(mailbox.mails[0])
    assert mail["Subject"] == "导出任务失败：Orders"
    plain, _ = _bodies(mail)
    reason = next(line for line in plain.splitlines() if line.startswith("失败原因："))
    assert reason.startswith("失败原因：PROVIDER_TIMEOUT：line one line two xxx")
    assert reason.endswith("…") and len(reason) < 1300
    assert FILE_URL not in plain and TASK_URL in plain


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_login_with_credentials(mailbox: smtp_server.Mailbox) -> None:
    controller = smtp_server.start(
        mailbox,
        authenticator=smtp_server.Credentials(mailbox, "robot", "s3cret"),
        auth_required=True,
        auth_require_tls=False,
    )
    try:
        good = _settings(controller.port, smtp_username="robot", smtp_password="s3cret")
        assert EmailChannel(good).send("a@example.com", succeeded()).delivered
        bad = _settings(controller.port, smtp_username="robot", smtp_password="wrong")
        refused = EmailChannel(bad).send("a@example.com", succeeded())
        anonymous = EmailChannel(_settings(controller.port)).send("a@example.com", succeeded())
    finally:
        controller.stop()
    assert len(mailbox.mails) == 1
    # One good login, then the wrong password (smtplib tries PLAIN, then LOGIN).
    assert mailbox.logins[:2] == [("PLAIN", "robot"), ("PLAIN", "robot")]
    assert not refused.delivered and refused.status_code == 535 and refused.retry is True
    assert refused.error is not None and "wrong" not in refused.error
    # Without a login the server refuses the sender (530): retryable, configuration.
    assert not anonymous.delivered and anonymous.status_code == 530 and anonymous.retry


def test_starttls_with_a_self_signed_certificate(
    tmp_path: Path, mailbox: smtp_server.Mailbox
) -> None:
    cert, key = smtp_server.self_signed(tmp_path)
    controller = smtp_server.start(
        mailbox,
        tls_context=smtp_server.server_context(cert, key),
        require_starttls=True,
        authenticator=smtp_server.Credentials(mailbox, "robot", "s3cret"),
        auth_required=True,
    )
    try:
        trusted = _settings(
            controller.port,
            smtp_tls="starttls",
            smtp_ca_file=str(cert),
            smtp_username="robot",
            smtp_password="s3cret",
        )
        assert EmailChannel(trusted).send("a@example.com", succeeded("zh")).delivered
        # The system CAs do not trust the certificate: no mail, retryable.
        untrusted = _settings(
            controller.port, smtp_tls="starttls", smtp_username="robot", smtp_password="s3cret"
        )
        refused = EmailChannel(untrusted).send("a@example.com", succeeded("zh"))
        # No STARTTLS at all: the server requires it.
        bare = EmailChannel(_settings(controller.port)).send("a@example.com", succeeded())
    finally:
        controller.stop()
    assert len(mailbox.mails) == 1
    assert _parse(mailbox.mails[0])["Subject"].startswith("导出任务已完成")
    assert not refused.delivered and refused.retry and refused.status_code is None
    assert refused.error is not None and "CERTIFICATE_VERIFY_FAILED" in refused.error
    assert not bare.delivered and bare.retry


def test_implicit_tls(tmp_path: Path, mailbox: smtp_server.Mailbox) -> None:
    cert, key = smtp_server.self_signed(tmp_path)
    controller = smtp_server.start(mailbox, ssl_context=smtp_server.server_context(cert, key))
    try:
        settings = _settings(controller.port, smtp_tls="tls", smtp_ca_file=str(cert))
        outcome = EmailChannel(settings).send("a@example.com", succeeded("en"))
    finally:
        controller.stop()
    assert outcome.delivered, outcome
    assert len(mailbox.mails) == 1


def test_permanent_refusal_is_not_retried(
    plain_server: Controller, mailbox: smtp_server.Mailbox
) -> None:
    outcome = EmailChannel(_settings(plain_server.port)).send("nobody@example.com", succeeded())
    assert not outcome.delivered
    assert outcome.status_code == 550 and outcome.retry is False
    assert outcome.error is not None and "mailbox unavailable" in outcome.error
    assert mailbox.mails == []


def test_temporary_refusal_is_retried(
    plain_server: Controller, mailbox: smtp_server.Mailbox
) -> None:
    outcome = EmailChannel(_settings(plain_server.port)).send("busy@example.com", succeeded())
    assert not outcome.delivered and outcome.status_code == 451 and outcome.retry is True
    assert mailbox.mails == []


def test_server_down_is_retryable() -> None:
    outcome = EmailChannel(_settings(free_port())).send("a@example.com", succeeded())
    assert not outcome.delivered and outcome.retry is True
    assert outcome.status_code is None
    assert outcome.error is not None and "ConnectionRefusedError" in outcome.error


@pytest.mark.parametrize("address", ["a@mail.example.com", "a@evil.test", "no-at-sign"])
def test_domain_not_allowed_at_send(
    address: str, plain_server: Controller, mailbox: smtp_server.Mailbox
) -> None:
    outcome = EmailChannel(_settings(plain_server.port)).send(address, succeeded())
    assert not outcome.delivered and outcome.retry is False
    assert outcome.error is not None and "not allowed" in outcome.error
    assert mailbox.mails == []


def test_same_event_same_message_id(plain_server: Controller, mailbox: smtp_server.Mailbox) -> None:
    channel = EmailChannel(_settings(plain_server.port))
    for address in ("a@example.com", "a@example.com", "b@example.com"):
        assert channel.send(address, succeeded()).delivered
    ids = [_parse(m)["Message-ID"] for m in mailbox.mails]
    assert ids[0] == ids[1] != ids[2]
