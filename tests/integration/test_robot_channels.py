"""The Feishu, DingTalk and WeCom robot channels against local receivers that check
what each platform checks (tests/support/robot_receivers.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from export_center.notify.channels.factory import channels_from_settings
from export_center.notify.channels.robots import RobotChannel
from export_center.settings_notify import NotifySettings
from tests.support.helpers import stack_settings
from tests.support.notify_messages import FILE_URL, TASK_URL, failed, succeeded
from tests.support.robot_receivers import DingTalkReceiver, FeishuReceiver, WeComReceiver

SECRET = "SECb7f1c0ffee"


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


def _channel(kind: str, http: httpx.Client, url: str, **robot: Any) -> RobotChannel:
    settings = NotifySettings(robots={"ops": {"kind": kind, "url": url, **robot}})
    return RobotChannel(kind, settings, http)


def _text_of(kind: str, body: dict[str, Any]) -> str:
    if kind == "dingtalk":
        return str(body["markdown"]["title"] + "\n" + body["markdown"]["text"])
    if kind == "wecom":
        return str(body["markdown"]["content"])
    card = body["card"]
    parts = [card["header"]["title"]["content"], card["elements"][0]["text"]["content"]]
    for element in card["elements"][1:]:
        parts += [f"{b['text']['content']} {b['url']}" for b in element["actions"]]
    return "\n".join(parts)


def _receiver(kind: str, secret: str | None, **kw: Any) -> Any:
    if kind == "dingtalk":
        return DingTalkReceiver("tok123", secret, **kw)
    if kind == "feishu":
        return FeishuReceiver("hook-1", secret, **kw)
    return WeComReceiver("key-1", **kw)


KINDS = ["dingtalk", "feishu", "wecom"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("language", ["zh", "en"])
def test_delivered_in_the_robots_language(kind: str, language: str, http: httpx.Client) -> None:
    with _receiver(kind, SECRET) as rx:
        channel = _channel(kind, http, rx.url, secret=SECRET, language=language)
        # The owner's language is the other one: the robot's language wins.
        other = "en" if language == "zh" else "zh"
        outcome = channel.send("ops", succeeded(other, taskName="每周订单 *bold* [x](y)"))
    assert outcome.delivered, outcome
    assert outcome.status_code == 200 and outcome.error is None
    assert len(rx.received) == 1
    text = _text_of(kind, rx.received[0])
    if language == "zh":
        assert "导出任务已完成" in text and "下载文件" in text and "1,234" in text
        assert "Export ready" not in text
    else:
        assert "Export ready" in text and "Download the file" in text
        assert "导出任务已完成" not in text
    assert FILE_URL in text and TASK_URL in text
    # A user's markup is escaped, not rendered.
    assert r"\*bold\*" in text and r"\[x\]\(y\)" in text


@pytest.mark.parametrize("kind", ["dingtalk", "feishu"])
def test_wrong_secret_is_refused_with_the_platforms_code(kind: str, http: httpx.Client) -> None:
    code = {"dingtalk": 310000, "feishu": 19021}[kind]
    with _receiver(kind, SECRET) as rx:
        outcome = _channel(kind, http, rx.url, secret="SECwrong").send("ops", failed("zh"))
    assert not outcome.delivered
    assert outcome.status_code == 200
    assert outcome.error is not None and f"code {code}" in outcome.error
    assert "SECwrong" not in outcome.error and "SECb7f" not in outcome.error
    assert outcome.retry is True  # a rotated secret or a clock is fixed while it backs off
    assert rx.received == []


@pytest.mark.parametrize("kind", ["dingtalk", "feishu"])
def test_missing_sign_is_refused(kind: str, http: httpx.Client) -> None:
    with _receiver(kind, SECRET) as rx:
        outcome = _channel(kind, http, rx.url).send("ops", failed("en"))
    code = {"dingtalk": 310000, "feishu": 19021}[kind]
    assert not outcome.delivered and rx.received == []
    assert outcome.error is not None and f"code {code}" in outcome.error


@pytest.mark.parametrize("kind", ["dingtalk", "feishu"])
@pytest.mark.parametrize("skew", [-3700.0, 3700.0])
def test_stale_timestamp_is_refused(kind: str, skew: float, http: httpx.Client) -> None:
    # The platform's clock is 3700 s off ours: the (correct) sign is too old or too new.
    code = {"dingtalk": 310000, "feishu": 19021}[kind]
    with _receiver(kind, SECRET, skew_seconds=skew) as rx:
        outcome = _channel(kind, http, rx.url, secret=SECRET).send("ops", failed("zh"))
    assert not outcome.delivered and rx.received == []
    assert outcome.error is not None and f"code {code}" in outcome.error
    if kind == "dingtalk":
        assert "invalid timestamp" in outcome.error


@pytest.mark.parametrize("kind", ["dingtalk", "feishu"])
def test_timestamp_within_the_hour_is_accepted(kind: str, http: httpx.Client) -> None:
    with _receiver(kind, SECRET, skew_seconds=3500.0) as rx:
        outcome = _channel(kind, http, rx.url, secret=SECRET).send("ops", failed("zh"))
    assert outcome.delivered, outcome
    assert len(rx.received) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_over_long_message_is_trimmed_and_accepted(kind: str, http: httpx.Client) -> None:
    message = failed("zh", taskName="超长任务名" * 100, failureMessage="数据源返回错误。" * 400)
    with _receiver(kind, SECRET) as rx:
        outcome = _channel(kind, http, rx.url, secret=SECRET).send("ops", message)
    assert outcome.delivered, outcome
    text = _text_of(kind, rx.received[0])
    assert "…" in text
    assert TASK_URL in text  # the links survive the cut
    if kind == "wecom":
        content = rx.received[0]["markdown"]["content"]
        assert 3900 < len(content.encode("utf-8")) <= 4096


def test_wecom_refuses_more_than_4096_bytes(http: httpx.Client) -> None:
    # The receiver really checks the size: a body the channel did not trim is refused.
    with WeComReceiver("key-1") as rx:
        body = {"msgtype": "markdown", "markdown": {"content": "数" * 1366}}
        answer = http.post(rx.url, json=body).json()
    assert answer["errcode"] == 40058 and rx.received == []


def test_wecom_wrong_key_is_permanent(http: httpx.Client) -> None:
    with WeComReceiver("key-1") as rx:
        url = rx.url.replace("key-1", "key-2")
        outcome = _channel("wecom", http, url).send("ops", succeeded("zh"))
    assert not outcome.delivered and outcome.retry is False
    assert outcome.error is not None and "93000" in outcome.error


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("kind", KINDS)
def test_receiver_down_is_retryable(kind: str, http: httpx.Client) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/robot/send?access_token=x&key=x"
    outcome = _channel(kind, http, url, secret=SECRET).send("ops", succeeded("zh"))
    assert not outcome.delivered
    assert outcome.status_code is None and outcome.retry is True
    assert outcome.error is not None and "ConnectError" in outcome.error


@pytest.mark.parametrize("kind", KINDS)
def test_robot_removed_from_settings_is_permanent(kind: str, http: httpx.Client) -> None:
    channel = _channel(kind, http, "http://127.0.0.1:9/x")
    outcome = channel.send("gone", succeeded("zh"))
    assert not outcome.delivered and outcome.retry is False
    assert outcome.status_code is None


def test_robot_of_another_platform_is_permanent(http: httpx.Client) -> None:
    settings = NotifySettings(robots={"ops": {"kind": "wecom", "url": "http://127.0.0.1:9/"}})
    outcome = RobotChannel("dingtalk", settings, http).send("ops", succeeded("zh"))
    assert not outcome.delivered and outcome.retry is False


def test_redirect_is_not_followed(http: httpx.Client) -> None:
    with WeComReceiver("key-1") as rx:

        class Redirect(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.send_response(307)
                self.send_header("Location", rx.url)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/cgi-bin/webhook/send?key=key-1"
            outcome = _channel("wecom", http, url).send("ops", succeeded("zh"))
        finally:
            server.shutdown()
            server.server_close()
    assert not outcome.delivered and outcome.status_code == 307
    assert rx.received == []


def test_channels_from_settings(http: httpx.Client) -> None:
    with WeComReceiver("key-1") as rx:
        settings = stack_settings(
            notify={
                "smtp_host": "127.0.0.1",
                "email_allowed_domains": ["example.com"],
                "robots": {"ops": {"kind": "wecom", "url": rx.url}},
            }
        )
        channels = channels_from_settings(settings, http)
        assert sorted(channels) == ["dingtalk", "email", "feishu", "wecom"]
        assert all(channels[name].name == name for name in channels)
        assert channels["wecom"].send("ops", succeeded("zh")).delivered
    assert len(rx.received) == 1
    assert "email" not in channels_from_settings(stack_settings(), http)


@pytest.mark.parametrize(
    ("kind", "answer", "retry"),
    [
        ("dingtalk", {"errcode": 130101, "errmsg": "send too fast"}, True),
        ("dingtalk", {"errcode": 400102, "errmsg": "robot stopped"}, False),
        ("feishu", {"code": 11232, "msg": "frequency limited psm"}, True),
        ("feishu", {"code": 9499, "msg": "Bad Request"}, False),
        ("wecom", {"errcode": 45009, "errmsg": "api freq out of limit"}, True),
    ],
)
def test_platform_codes(kind: str, answer: dict[str, Any], retry: bool, http: httpx.Client) -> None:
    with _receiver(kind, SECRET) as rx:
        rx.canned.append(answer)
        channel = _channel(kind, http, rx.url, secret=SECRET)
        first = channel.send("ops", succeeded("zh"))
        second = channel.send("ops", succeeded("zh"))
    assert not first.delivered and first.retry is retry
    assert first.error is not None and str(next(iter(answer.values()))) in first.error
    assert second.delivered and len(rx.received) == 1


def test_feishu_legacy_status_code_is_success(http: httpx.Client) -> None:
    with FeishuReceiver("hook-1", None) as rx:
        rx.canned.append({"StatusCode": 0, "StatusMessage": "success", "Extra": None})
        outcome = _channel("feishu", http, rx.url).send("ops", succeeded("zh"))
    assert outcome.delivered and outcome.status_code == 200 and outcome.error is None
