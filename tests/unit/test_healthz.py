"""The one ``/healthz`` poll (``export_center.healthz.wait_healthy``) against a real
HTTP server on loopback: it returns once the answer is 200, reports a process that
stopped at once, and reports a silent one when its time runs out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from export_center.embedded import free_port
from export_center.healthz import NotHealthy, wait_healthy


class _Starting(BaseHTTPRequestHandler):
    """Answers 503 to the first ``not_ready`` requests, then 200."""

    not_ready = 3
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        type(self).seen.append(self.path)
        ready = len(type(self).seen) > type(self).not_ready
        self.send_response(200 if ready else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def starting() -> Iterator[str]:
    _Starting.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Starting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_it_returns_once_healthz_answers_200(starting):
    wait_healthy(starting, timeout=30, interval=0.01)
    assert _Starting.seen == ["/healthz"] * 4  # three 503s, then the 200


def test_a_stopped_process_is_reported_before_any_request():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(NotHealthy) as stopped:
        wait_healthy(url, timeout=30, alive=lambda: False)
    assert stopped.value.stopped is True
    assert str(stopped.value) == f"{url} stopped before it answered /healthz"


def test_a_process_that_never_answers_runs_out_of_time():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    with pytest.raises(NotHealthy) as late:
        wait_healthy(url, timeout=0.3, alive=lambda: True, interval=0.05)
    assert late.value.stopped is False
    assert str(late.value) == f"{url} did not answer /healthz within 0.3 s"


def test_a_server_that_answers_but_not_200_is_not_healthy(starting):
    _Starting.not_ready = 10_000
    try:
        with pytest.raises(NotHealthy, match="did not answer"):
            wait_healthy(starting, timeout=0.3, interval=0.05)
    finally:
        _Starting.not_ready = 3
    assert len(_Starting.seen) >= 2  # it kept asking until the time ran out
