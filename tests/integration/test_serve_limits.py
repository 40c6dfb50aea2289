"""The server of ``serve`` bounds how long a request may take to arrive and how many
connections it holds (export_center.http_server): slow-header connections are cut at
the deadline with 408, /healthz answers meanwhile, and beyond the connection limit a
request gets a JSON 503 at once instead of waiting.

SQLite only: the limits act before the app (and its database) sees a request.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.helpers import Stack, idle_connection_reused
from tests.support.slowloris import hold

DEADLINE = 2.0


@pytest.fixture
def db_url(tmp_path: Path) -> Iterator[str]:
    """SQLite only (module docstring)."""
    yield f"sqlite:///{tmp_path / 'export-center.db'}"


def port_of(stack: Stack) -> int:
    return int(stack.url.rsplit(":", 1)[1])


def _answer_of(data: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), orjson.loads(body)


def test_slow_header_connections_are_cut_at_the_deadline_and_healthz_answers_meanwhile(
    make_stack,
):
    stack = make_stack(api={"request_timeout_seconds": DEADLINE, "max_connections": 100})
    # One header line every 0.5 s, 40 lines: 20 s to finish the headers, 10x the deadline.
    clients = hold(port_of(stack), 30, interval=0.5, lines=40)
    answered = 0
    while any(c.is_alive() for c in clients):
        if sum(c.is_alive() for c in clients) >= 20:  # most of them still open
            health = httpx.get(f"{stack.url}/healthz", timeout=5)
            assert health.status_code == 200 and health.json() == {"status": "ok"}
            answered += 1
        time.sleep(0.2)
    assert answered >= 3
    for client in clients:
        assert client.cut and client.sent < client.lines, (client.sent, client.answer)
        status, body = _answer_of(client.answer)
        assert status == 408 and body == {
            "code": "REQUEST_TIMEOUT",
            "message": f"the request did not arrive within {DEADLINE:g} s",
            "field": None,
        }


def test_a_silent_connection_and_a_slow_body_are_cut_too(make_stack):
    stack = make_stack(api={"request_timeout_seconds": DEADLINE})
    with socket.create_connection(("127.0.0.1", port_of(stack)), timeout=30) as silent:
        # Closed (recv would time out after 30 s otherwise), with no answer to no request.
        assert silent.recv(65536) == b""
    headers = stack.client("alice").headers
    with socket.create_connection(("127.0.0.1", port_of(stack)), timeout=30) as slow_body:
        slow_body.sendall(
            b"POST /api/v1/exports HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"content-type: application/json\r\ncontent-length: 1000\r\n"
            b"authorization: " + headers["authorization"].encode() + b"\r\n\r\n{"
        )
        sent = 0
        try:
            for _ in range(40):  # a byte every 0.25 s: 1000 bytes would take 250 s
                time.sleep(0.25)
                slow_body.sendall(b" ")
                sent += 1
        except OSError:
            pass
        data = slow_body.recv(65536) if sent < 40 else b""
    assert sent < 40, "the slow body was not cut"
    assert not data or data.startswith(b"HTTP/1.1 408 ")


def test_a_keep_alive_connection_gets_a_new_deadline_per_request_and_long_answers_are_not_cut(
    make_stack,
):
    stack = make_stack(api={"request_timeout_seconds": DEADLINE})
    alice = stack.client("alice")
    for _ in range(3):  # one connection, requests spread over more than the deadline
        assert alice.get("/api/v1/me").status_code == 200
        time.sleep(DEADLINE / 2)
    # An answer that takes longer than the deadline to read is not a request arriving.
    with httpx.stream(
        "GET", f"{stack.url}/ui/app.js", headers={"accept-encoding": "identity"}
    ) as r:
        received = b""
        for chunk in r.iter_raw(1024):
            received += chunk
            time.sleep(DEADLINE / 20)
    assert len(received) == int(r.headers["content-length"])


def test_an_idle_connection_outlives_a_client_pools_expiry_then_is_closed(make_stack):
    # httpx reuses an idle connection for up to 5 s. The server keeps one longer
    # (api.keep_alive_seconds), so a request sent at 5 s of idleness never meets a
    # server that is closing it ("Server disconnected without sending a response").
    stack = make_stack(api={"keep_alive_seconds": 7})
    # Past the pool expiry of httpx, before the server's 7 s: the same connection.
    first = idle_connection_reused(port_of(stack), 5.5)
    try:
        time.sleep(8)  # past the server's keep-alive: it closed the connection
        first.settimeout(2)
        assert first.recv(1) == b""
    finally:
        first.close()


def test_beyond_the_connection_limit_a_request_gets_a_json_503_at_once(make_stack):
    stack = make_stack(api={"request_timeout_seconds": DEADLINE, "max_connections": 10})
    clients = hold(port_of(stack), 10, interval=0.5, lines=40)
    busy = httpx.get(f"{stack.url}/healthz", timeout=5)
    assert busy.status_code == 503, busy.text
    assert busy.headers["retry-after"] == "1" and busy.headers["connection"] == "close"
    assert busy.json() == {
        "code": "SERVER_BUSY",
        "message": "the server has as many connections as it takes; try again in a second",
        "field": None,
    }
    for client in clients:
        client.join(30)
    assert all(client.cut for client in clients)
    assert httpx.get(f"{stack.url}/healthz", timeout=5).status_code == 200


def _unread_download(port: int, path: str) -> socket.socket:
    """A client that asks for a download and never reads its answer (small buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def _closed_by_the_server(sock: socket.socket, timeout: float) -> bool:
    """Read what the server sent; True when it closed or reset the connection."""
    sock.settimeout(timeout)
    try:
        while sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def test_downloads_nobody_reads_are_cut_and_cannot_lock_everyone_out(make_stack):
    from tests.support.helpers import create, wait_state

    stack = make_stack(
        api={"send_timeout_seconds": 2.0, "max_connections": 12, "keep_alive_seconds": 3}
    )
    client = stack.client()
    detail = wait_state(client, create(client, "csv").json()["taskId"])
    assert detail["state"] == "succeeded" and detail["sizeBytes"] > 1 << 20
    port = port_of(stack)
    stalled: list[socket.socket] = []
    try:
        for _ in range(20):  # unread downloads until they hold every connection
            stalled.append(_unread_download(port, detail["downloadUrl"]))
            time.sleep(0.05)
            busy = httpx.get(f"{stack.url}/healthz", timeout=5)
            if busy.status_code == 503:
                break
        assert busy.status_code == 503 and busy.json()["code"] == "SERVER_BUSY"
        # Each took none of its bytes for 2 s: the server closed them all. (The first
        # answer can fit whole in the loopback buffers: to the server it is done and
        # its connection idle, closed after the 3 s keep-alive.)
        assert all(_closed_by_the_server(s, 10) for s in stalled)
        health = httpx.get(f"{stack.url}/healthz", timeout=5)
        assert health.status_code == 200
    finally:
        for sock in stalled:
            sock.close()
    # A slow client that keeps reading is never cut: the whole file arrives.
    with httpx.stream("GET", f"{stack.url}{detail['downloadUrl']}", timeout=30) as answer:
        got = 0
        for chunk in answer.iter_bytes(1 << 16):
            got += len(chunk)
            time.sleep(0.01)
    assert got == detail["sizeBytes"]
