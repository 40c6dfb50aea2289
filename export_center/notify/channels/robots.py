"""The chat robot channels: Feishu/Lark custom bots, DingTalk custom robots, WeCom
group robots, each with its platform's message shape and signing.

A target is a robot *name* of ``notify.robots`` (an operator registers the URL and
secret; a user never gives a URL). The text is in the robot's language
(``RobotSettings.language``), not the event owner's: a group robot speaks to a group.

Platforms (shapes from their public custom-robot documentation):

* DingTalk: ``POST {url}&timestamp=<ms>&sign=<urlencoded base64 HMAC-SHA256(key=secret,
  msg="<timestamp>\\n<secret>")>`` (sign only with a secret), body
  ``{"msgtype": "markdown", "markdown": {"title", "text"}}``; ``{"errcode": 0}`` is
  success. Timestamps more than an hour off are refused (310000, like a bad sign).
* Feishu/Lark: ``POST {url}`` with ``{"timestamp": "<unix s>", "sign": base64(HMAC-SHA256(
  key="<timestamp>\\n<secret>", msg=b""))}`` (only with a secret) and an
  ``interactive`` card (header title, ``lark_md`` body, link buttons); ``{"code": 0}``
  (or the legacy ``{"StatusCode": 0}``) is success; 19021 is a failed sign check.
* WeCom: ``POST {url}`` (the key is in the URL, no signature) with
  ``{"msgtype": "markdown", "markdown": {"content"}}``, content at most 4096 bytes of
  UTF-8 (cut safely, links kept); ``{"errcode": 0}`` is success.

Outcomes: a robot name no longer in the settings (or of another platform), or a
platform code that says the robot or the message is invalid for good (below):
``retry=False``. A failed sign check is retryable: it comes from a clock off by an hour
or a secret being rotated, which an operator fixes while the back-off runs. Rate limits,
HTTP errors and connection errors are retryable. Redirects are not followed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import httpx

from export_center.notify.channels.base import Message, Outcome
from export_center.notify.texts import Text, compose, render_markdown, trim_utf8
from export_center.settings_notify import NotifySettings, RobotSettings

__all__ = [
    "DINGTALK_MAX_BYTES",
    "FEISHU_MAX_BYTES",
    "PERMANENT_CODES",
    "RobotChannel",
    "WECOM_MAX_BYTES",
    "dingtalk_sign",
    "feishu_sign",
]

#: WeCom: markdown.content at most this many bytes of UTF-8.
WECOM_MAX_BYTES = 4096
#: DingTalk: markdown.text kept under this many bytes (the platform refuses ~20 000).
DINGTALK_MAX_BYTES = 18000
#: Feishu: card text kept under this many bytes (a request body is at most 20 KB).
FEISHU_MAX_BYTES = 16000

#: Platform codes after which trying again cannot help (robot gone, message invalid).
PERMANENT_CODES = {
    # 300001 token invalid; 400101 / 400102 robot missing or stopped.
    "dingtalk": {300001, 400101, 400102},
    # 9499 bad request (message shape), 19001 param invalid, 19002 body too large.
    "feishu": {9499, 19001, 19002},
    # 93000 webhook URL invalid (robot removed), 40058 parameter invalid (too long).
    "wecom": {93000, 40058},
}


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk's ``sign`` (before URL encoding): base64 of HMAC-SHA256 with the secret
    as key over ``"<timestamp ms>\\n<secret>"``."""
    digest = hmac.new(
        secret.encode("utf-8"), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256
    ).digest()
    return base64.b64encode(digest).decode("ascii")


def feishu_sign(secret: str, timestamp_s: int) -> str:
    """Feishu's ``sign``: base64 of HMAC-SHA256 with ``"<timestamp s>\\n<secret>"`` as
    key over the empty message."""
    digest = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


_TEMPLATE = {
    "export.succeeded": "green",
    "export.failed": "red",
    "export.cancelled": "grey",
    "export.expiring": "orange",
    "schedule.paused": "orange",
    "export.approved": "green",
    "export.rejected": "red",
}


def _dingtalk(robot: RobotSettings, text: Text, now: float) -> tuple[str, dict[str, Any]]:
    url = robot.url
    if robot.secret is not None:
        stamp = int(now * 1000)
        query = urllib.parse.urlencode(
            {"timestamp": stamp, "sign": dingtalk_sign(robot.secret.get_secret_value(), stamp)}
        )
        url += ("&" if "?" in url else "?") + query
    body = {
        "msgtype": "markdown",
        "markdown": {
            "title": trim_utf8(text.title, 200),
            "text": render_markdown(text, limit=DINGTALK_MAX_BYTES),
        },
    }
    return url, body


def _feishu(robot: RobotSettings, text: Text, now: float) -> tuple[str, dict[str, Any]]:
    buttons = [
        {
            "tag": "button",
            "text": {"tag": "plain_text", "content": label},
            "url": url,
            "type": "primary" if i == 0 else "default",
        }
        for i, (label, url) in enumerate(text.links)
    ]
    elements: list[dict[str, Any]] = [
        {
            "tag": "div",
            "text": {
                "tag": "lark_md",
                "content": render_markdown(
                    Text(
                        text.language,
                        text.event_type,
                        text.title,
                        text.opening,
                        text.facts,
                        (),
                        text.footer,
                    ),
                    limit=FEISHU_MAX_BYTES,
                    heading=False,
                ),
            },
        }
    ]
    if buttons:
        elements.append({"tag": "action", "actions": buttons})
    body: dict[str, Any] = {
        "msg_type": "interactive",
        "card": {
            "config": {"wide_screen_mode": True},
            "header": {
                "title": {"tag": "plain_text", "content": trim_utf8(text.title, 300)},
                "template": _TEMPLATE.get(text.event_type, "blue"),
            },
            "elements": elements,
        },
    }
    if robot.secret is not None:
        stamp = int(now)
        body = {
            "timestamp": str(stamp),
            "sign": feishu_sign(robot.secret.get_secret_value(), stamp),
            **body,
        }
    return robot.url, body


def _wecom(robot: RobotSettings, text: Text, now: float) -> tuple[str, dict[str, Any]]:
    content = render_markdown(text, limit=WECOM_MAX_BYTES)
    return robot.url, {"msgtype": "markdown", "markdown": {"content": content}}


_BUILDERS: dict[str, Callable[[RobotSettings, Text, float], tuple[str, dict[str, Any]]]] = {
    "dingtalk": _dingtalk,
    "feishu": _feishu,
    "wecom": _wecom,
}


class RobotChannel:
    """One chat platform's robots (``feishu``, ``dingtalk`` or ``wecom``).

    Args:
        kind: the platform, also the channel name.
        settings: the ``notify`` settings (``robots``, ``send_timeout_seconds``); read at
            every send, so a robot removed from the settings stops at once.
        http_client: the client to post with (not closed here).
    """

    def __init__(
        self,
        kind: str,
        settings: NotifySettings,
        http_client: httpx.Client,
    ) -> None:
        if kind not in _BUILDERS:
            raise ValueError(f"unknown robot platform {kind!r}")
        self.name = kind
        self._settings = settings
        self._http = http_client

    def build(self, robot: RobotSettings, message: Message) -> tuple[str, dict[str, Any]]:
        """The URL and JSON body a send to ``robot`` posts (text in the robot's
        language, signed with the current time when the robot has a secret)."""
        text = compose(message, robot.language)
        return _BUILDERS[self.name](robot, text, time.time())

    def send(self, target: str, message: Message) -> Outcome:
        """Post ``message`` to the robot named ``target`` once (rules in the module
        docstring); never raises for a failed delivery."""
        robot = self._settings.robots.get(target)
        if robot is None or robot.kind != self.name:
            return Outcome(
                False, error=f"no {self.name} robot named {target!r} any more", retry=False
            )
        url, body = self.build(robot, message)
        try:
            answer = self._http.post(
                url,
                content=json.dumps(body, ensure_ascii=False).encode("utf-8"),
                headers={"Content-Type": "application/json; charset=utf-8"},
                timeout=self._settings.send_timeout_seconds,
                follow_redirects=False,
            )
        except httpx.HTTPError as exc:
            return Outcome(False, error=f"{self.name} robot {target}: {type(exc).__name__}")
        return self._outcome(target, answer)

    def _outcome(self, target: str, answer: httpx.Response) -> Outcome:
        status = answer.status_code
        try:
            said = answer.json()
        except ValueError:
            said = None
        if not isinstance(said, dict):
            return Outcome(
                False, status, f"{self.name} robot {target}: HTTP {status}, not a JSON object"
            )
        if self.name == "feishu":
            code = said.get("code", said.get("StatusCode"))
            text = said.get("msg", said.get("StatusMessage"))
        else:
            code = said.get("errcode")
            text = said.get("errmsg")
        if code == 0 and 200 <= status < 300:
            return Outcome(True, status)
        return Outcome(
            False,
            status,
            f"{self.name} robot {target}: HTTP {status}, code {code}: {text}"[:300],
            retry=code not in PERMANENT_CODES[self.name],
        )
