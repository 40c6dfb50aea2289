"""Local stand-ins of the DingTalk, Feishu/Lark and WeCom robot webhooks.

Each is a real HTTP server on 127.0.0.1 (a thread) that checks what the platform
checks and answers as the platform answers (HTTP 200 with a JSON code):

* DingTalk: ``access_token`` in the query; with a secret, ``timestamp`` (ms) and
  ``sign`` in the query, the timestamp within an hour of now and the sign equal to
  base64 HMAC-SHA256(secret, "<timestamp>\\n<secret>"), else ``310000``; the body a
  ``markdown`` message with a title and text (``300005`` otherwise).
* Feishu: with a secret, ``timestamp`` (s) and ``sign`` in the body, within an hour
  and equal to base64 HMAC-SHA256(key="<timestamp>\\n<secret>", msg=""), else
  ``19021``; ``msg_type`` one of text/post/interactive with its content (``9499``).
* WeCom: ``key`` in the query equal to the robot's key (``93000``); a markdown
  message whose content is at most 4096 bytes of UTF-8 (``40058``).

Accepted messages are kept in ``received`` (the parsed JSON body).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOUR = 3600


class _Receiver:
    """A robot webhook on loopback; ``check`` returns the platform's answer."""

    path = "/"

    def __init__(self, *, skew_seconds: float = 0.0) -> None:
        self.skew_seconds = skew_seconds
        self.received: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        #: Answers given instead of checking (first in, first out): rate limits and the like.
        self.canned: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                parsed = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError):
                    body = None
                if parsed.path != receiver.path:
                    answer = receiver.bad_request("path")
                elif not isinstance(body, dict) or "json" not in (
                    self.headers.get("Content-Type") or ""
                ):
                    answer = receiver.bad_request("not a JSON object")
                elif receiver.canned:
                    answer = receiver.canned.pop(0)
                else:
                    answer = receiver.check(query, body)
                    if answer == receiver.ok():
                        receiver.received.append(body)
                receiver.answers.append(answer)
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def now(self) -> float:
        """The platform's clock (Unix seconds), ``skew_seconds`` off the machine's."""
        return time.time() + self.skew_seconds

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def ok(self) -> dict[str, Any]:
        raise NotImplementedError

    def bad_request(self, why: str) -> dict[str, Any]:
        raise NotImplementedError

    def check(self, query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def __enter__(self) -> _Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class DingTalkReceiver(_Receiver):
    """``https://oapi.dingtalk.com/robot/send?access_token=...`` on loopback."""

    path = "/robot/send"

    def __init__(self, token: str, secret: str | None, **kw: Any) -> None:
        super().__init__(**kw)
        self.token = token
        self.secret = secret

    @property
    def url(self) -> str:
        return f"{self.base}?access_token={self.token}"

    def ok(self) -> dict[str, Any]:
        return {"errcode": 0, "errmsg": "ok"}

    def bad_request(self, why: str) -> dict[str, Any]:
        return {"errcode": 300005, "errmsg": f"invalid request: {why}"}

    def check(self, query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        if query.get("access_token") != self.token:
            return {"errcode": 300001, "errmsg": "token is not exist"}
        if self.secret is not None:
            stamp, sign = query.get("timestamp", ""), query.get("sign", "")
            if not stamp.isdigit() or abs(self.now() * 1000 - int(stamp)) > HOUR * 1000:
                return {"errcode": 310000, "errmsg": "invalid timestamp"}
            expected = base64.b64encode(
                hmac.new(
                    self.secret.encode(), f"{stamp}\n{self.secret}".encode(), hashlib.sha256
                ).digest()
            ).decode()
            # parse_qsl already URL-decoded the sign once, as the platform does.
            if not hmac.compare_digest(sign, expected):
                return {"errcode": 310000, "errmsg": "sign not match"}
        md = body.get("markdown")
        if (
            body.get("msgtype") != "markdown"
            or not isinstance(md, dict)
            or not isinstance(md.get("title"), str)
            or not md["title"]
            or not isinstance(md.get("text"), str)
            or not md["text"]
        ):
            return self.bad_request("markdown.title and markdown.text are required")
        if len(json.dumps(body, ensure_ascii=False).encode()) > 20000:
            return {"errcode": 460101, "errmsg": "message too long"}
        return self.ok()


class FeishuReceiver(_Receiver):
    """``https://open.feishu.cn/open-apis/bot/v2/hook/<id>`` on loopback."""

    def __init__(self, hook_id: str, secret: str | None, **kw: Any) -> None:
        self.path = f"/open-apis/bot/v2/hook/{hook_id}"
        super().__init__(**kw)
        self.secret = secret

    @property
    def url(self) -> str:
        return self.base

    def ok(self) -> dict[str, Any]:
        return {"code": 0, "data": {}, "msg": "success"}

    def bad_request(self, why: str) -> dict[str, Any]:
        return {"code": 9499, "data": {}, "msg": f"Bad Request: {why}"}

    def check(self, query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        if self.secret is not None:
            stamp, sign = body.get("timestamp"), body.get("sign")
            if not isinstance(stamp, str) or not stamp.isdigit() or not isinstance(sign, str):
                return {
                    "code": 19021,
                    "data": {},
                    "msg": "sign match fail or timestamp is not within one hour from current time",
                }  # noqa: E501
            if abs(self.now() - int(stamp)) > HOUR:
                return {
                    "code": 19021,
                    "data": {},
                    "msg": "sign match fail or timestamp is not within one hour from current time",
                }  # noqa: E501
            expected = base64.b64encode(
                hmac.new(f"{stamp}\n{self.secret}".encode(), b"", hashlib.sha256).digest()
            ).decode()
            if not hmac.compare_digest(sign, expected):
                return {
                    "code": 19021,
                    "data": {},
                    "msg": "sign match fail or timestamp is not within one hour from current time",
                }  # noqa: E501
        kind = body.get("msg_type")
        if kind == "interactive":
            card = body.get("card")
            good = (
                isinstance(card, dict)
                and isinstance(card.get("elements"), list)
                and bool(card["elements"])
                and isinstance(card.get("header", {}).get("title", {}).get("content"), str)
            )
        elif kind == "text":
            good = isinstance(body.get("content", {}).get("text"), str)
        elif kind == "post":
            good = isinstance(body.get("content", {}).get("post"), dict)
        else:
            good = False
        if not good:
            return self.bad_request("msg_type and its content")
        if len(json.dumps(body, ensure_ascii=False).encode()) > 20 * 1024:
            return {"code": 19002, "data": {}, "msg": "request body too large"}
        return self.ok()


class WeComReceiver(_Receiver):
    """``https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...`` on loopback."""

    path = "/cgi-bin/webhook/send"

    def __init__(self, key: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.key = key

    @property
    def url(self) -> str:
        return f"{self.base}?key={self.key}"

    def ok(self) -> dict[str, Any]:
        return {"errcode": 0, "errmsg": "ok"}

    def bad_request(self, why: str) -> dict[str, Any]:
        return {"errcode": 40008, "errmsg": f"invalid message type: {why}"}

    def check(self, query: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        if query.get("key") != self.key:
            return {"errcode": 93000, "errmsg": "invalid webhook url"}
        md = body.get("markdown")
        if body.get("msgtype") != "markdown" or not isinstance(md, dict):
            return self.bad_request("markdown")
        content = md.get("content")
        if not isinstance(content, str) or not content:
            return {"errcode": 40058, "errmsg": "markdown.content is empty"}
        if len(content.encode("utf-8")) > 4096:
            return {"errcode": 40058, "errmsg": "markdown.content exceed max length 4096"}
        return self.ok()
