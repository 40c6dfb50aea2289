"""A real webhook receiver on loopback (http.server in a thread) that verifies the
Export Center signature with its secrets and records every delivery."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from export_center.notify.signing import verify


@dataclass
class Delivery:
    """One POST the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    verified: dict[str, bool]  # secret -> its v1 verified

    @property
    def event(self) -> dict[str, Any]:
        return dict(json.loads(self.body))

    @property
    def v1_count(self) -> int:
        return self.headers.get("export-center-signature", "").count("v1=")


@dataclass
class Receiver:
    """Answers each POST with the next status of ``answers`` (then ``default``)."""

    secrets: list[str] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    default: int = 200
    deliveries: list[Delivery] = field(default_factory=list)
    on_delivery: Callable[[Delivery], None] | None = None
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                signature = headers.get("export-center-signature", "")
                delivery = Delivery(
                    self.path,
                    headers,
                    body,
                    {s: verify(s, signature, body) for s in receiver.secrets},
                )
                receiver.deliveries.append(delivery)
                if receiver.on_delivery is not None:  # before answering (kill -9 tests)
                    receiver.on_delivery(delivery)
                status = receiver.answers.pop(0) if receiver.answers else receiver.default
                try:
                    self.send_response(status)
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    self.wfile.flush()
                except OSError:  # the sender is gone
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
