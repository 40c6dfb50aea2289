"""A slowloris client: a connection that sends its request one header line at a time."""

from __future__ import annotations

import socket
import threading
import time


class Slowloris(threading.Thread):
    """Opens a connection to 127.0.0.1:``port`` and sends ``GET /healthz`` one header
    line every ``interval`` seconds, ``lines`` lines in all (then it would end its
    headers), reading what the server answers.

    Attributes:
        sent: header lines sent before the server cut the connection (or all of them).
        answer: the bytes the server sent back.
        cut: whether the server closed the connection before the headers were whole.
    """

    def __init__(self, port: int, *, interval: float = 1.0, lines: int = 60) -> None:
        super().__init__(daemon=True)
        self.port, self.interval, self.lines = port, interval, lines
        self.sent = 0
        self.answer = b""
        self.cut = False
        self.connected = threading.Event()

    def run(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            self.connected.set()
            sock.settimeout(self.interval)
            for line in range(self.lines):
                if self._read(sock):
                    self.cut = True
                    return
                try:
                    sock.sendall(f"X-Slow-{line}: x\r\n".encode())
                except OSError:  # reset: the server closed with our bytes unread
                    self.cut = True
                    self._read(sock)
                    return
                self.sent += 1

    def _read(self, sock: socket.socket) -> bool:
        """Read what has arrived within one interval; True at end of file."""
        try:
            while chunk := sock.recv(65536):
                self.answer += chunk
        except TimeoutError:
            return False
        except OSError:
            return True
        return True


def hold(port: int, count: int, *, interval: float = 1.0, lines: int = 60) -> list[Slowloris]:
    """Start ``count`` slowloris connections and wait until each is connected."""
    clients = [Slowloris(port, interval=interval, lines=lines) for _ in range(count)]
    for client in clients:
        client.start()
    deadline = time.monotonic() + 30
    for client in clients:
        client.connected.wait(max(0.0, deadline - time.monotonic()))
    return clients
