"""The e-mail and robot channels pass the shared channel conformance checks."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from export_center.notify.channels.email import EmailChannel
from export_center.notify.channels.robots import RobotChannel
from export_center.settings_notify import NotifySettings
from tests.support import smtp_server
from tests.support.channel_conformance import check_channel
from tests.support.robot_receivers import DingTalkReceiver, FeishuReceiver, WeComReceiver


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


def test_email() -> None:
    mailbox = smtp_server.Mailbox()
    controller = smtp_server.start(mailbox)
    try:
        settings = NotifySettings(
            smtp_host="127.0.0.1",
            smtp_port=controller.port,
            smtp_tls="none",
            email_allowed_domains=["example.com"],
        )
        check_channel(
            EmailChannel(settings), "ops@example.com", "ops@other.test", lambda: len(mailbox.mails)
        )
    finally:
        controller.stop()


@pytest.mark.parametrize("kind", ["dingtalk", "feishu", "wecom"])
def test_robot(kind: str, http: httpx.Client) -> None:
    receiver = {
        "dingtalk": lambda: DingTalkReceiver("tok", "SECx"),
        "feishu": lambda: FeishuReceiver("h", "SECx"),
        "wecom": lambda: WeComReceiver("k"),
    }[kind]()
    with receiver as rx:
        robots = {"ops": {"kind": kind, "url": rx.url, "secret": "SECx"}}
        channel = RobotChannel(kind, NotifySettings(robots=robots), http)
        check_channel(channel, "ops", "removed", lambda: len(rx.received))
