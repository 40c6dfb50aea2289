"""The sample providers in a child process: the embedded default's second core.

In the embedded default (``serve``, ``demo``) the export center and the TPC-H sample
providers share one machine. In one process they share one interpreter lock: the
provider's SQL, JSON and HTTP serving take turns with the export's parsing, conversion
and writing, so an export uses one core however many the machine has. A business
service runs its provider in its own process anyway; this module does the same for the
samples:

* :class:`SampleProviderProcess` (the parent side) starts ``python -m
  export_center.sample_process``, writes one line of JSON configuration to its stdin
  (database URL, internal token, signing secret, snapshot lifetime: nothing secret goes
  on the command line or in the environment), reads the bound port from its stdout, and
  keeps the stdin pipe open;
* the child serves the same ``providers.catalog.sample_router`` as the API mounts, on
  127.0.0.1 and a port the kernel picks, with ``/healthz``;
* the child exits when its stdin reaches end of file: when the parent stops it, and
  also when the parent dies without stopping it (the kernel closes the pipe), so no
  orphan keeps the port or the database open. It runs in its own session and ignores
  SIGINT, so a Ctrl-C in the terminal stops the parent, which then closes the pipe.

The API still mounts the sample routers itself, so a separate ``export-center worker``
reaching the API's public URL keeps working; only the embedded worker loops call the
child (``Runtime.set_self_url``).
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Any

__all__ = ["SampleProviderProcess", "main"]

log = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 60.0
"""How long the parent waits for the child to report its port and answer ``/healthz``."""


class SampleProviderProcess:
    """A child process serving the sample providers on loopback.

    Args:
        database_url: SQLAlchemy URL of the sample data (read only).
        token: the ``X-Internal-Service-Token`` the providers check.
        secret: the key that signs cursors and snapshot tokens.
        snapshot_ttl_seconds: how long a snapshot token is accepted (then 410).
        log_level: the child's log level (its JSON lines go to the parent's stderr).
    """

    def __init__(
        self,
        *,
        database_url: str,
        token: str,
        secret: str,
        snapshot_ttl_seconds: int,
        log_level: str = "WARNING",
    ) -> None:
        self._config = {
            "database_url": database_url,
            "token": token,
            "secret": secret,
            "snapshot_ttl_seconds": snapshot_ttl_seconds,
            "log_level": log_level,
        }
        self._proc: subprocess.Popen[bytes] | None = None
        self.url: str | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs, else None."""
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> str:
        """Start the child and wait until it serves.

        Returns:
            The child's base URL, e.g. ``http://127.0.0.1:40123``.

        Raises:
            RuntimeError: the child exited, or did not report a port and answer
                ``/healthz`` within ``timeout`` seconds (it is stopped then).
        """
        import httpx

        proc = subprocess.Popen(
            [sys.executable, "-m", "export_center.sample_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            # Its own session: a Ctrl-C in the terminal goes to the parent's process
            # group only; the parent stops the child by closing its stdin.
            start_new_session=True,
        )
        self._proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(self._config).encode() + b"\n")
            proc.stdin.flush()
            deadline = time.monotonic() + timeout
            port = _read_port(proc, proc.stdout, deadline)
            url = f"http://127.0.0.1:{port}"
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the sample provider process did not answer on {url}")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise
        self.url = url
        log.info("sample providers serve from process %d on %s", proc.pid, url)
        return url

    def stop(self, timeout: float = 10.0) -> None:
        """Close the child's stdin (it exits at end of file) and wait; kill it after
        ``timeout`` seconds. Safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def _read_port(proc: subprocess.Popen[bytes], stdout: IO[bytes], deadline: float) -> int:
    """The port line the child writes once it has bound its socket.

    Raises:
        RuntimeError: the child exited or wrote something else before ``deadline``.
    """
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            raise RuntimeError("the sample provider process stopped before it served")
        ready, _, _ = select.select([stdout], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(stdout.fileno(), 64)
            if not chunk:
                raise RuntimeError("the sample provider process stopped before it served")
            line += chunk
    text = line.decode().strip()
    if not text.isdigit():
        raise RuntimeError(f"the sample provider process reported {text[:80]!r}, not a port")
    return int(text)


def _exit_at_end_of_input() -> None:
    """Block on stdin; at end of file (parent stopped or died) end this process."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)


def main() -> None:
    """The child: read the configuration line, bind 127.0.0.1:0, print the port, serve.

    The configuration line is a JSON object ``{database_url, token, secret,
    snapshot_ttl_seconds, log_level}``.
    """
    import uvicorn
    from fastapi import FastAPI

    from export_center.api.guards import guard_stack
    from export_center.db import make_engine
    from export_center.hosts import HostPatterns
    from export_center.http_server import bounded_protocol
    from export_center.logs import configure_logging
    from providers.catalog import sample_router

    # A Ctrl-C meant for the parent must not print a traceback here (the child runs in
    # its own session, so only a signal sent to it by pid can still arrive).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    config: dict[str, Any] = json.loads(sys.stdin.buffer.readline())
    configure_logging(str(config.get("log_level", "WARNING")))
    engine = make_engine(str(config["database_url"]), immediate=False)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(
        sample_router(
            engine,
            token=str(config["token"]),
            secret=str(config["secret"]),
            snapshot_ttl_seconds=int(config["snapshot_ttl_seconds"]),
        )
    )

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    threading.Thread(target=_exit_at_end_of_input, name="stdin-watch", daemon=True).start()
    # The same boundary as the API's: loopback names only, no other site's page, and
    # the request-receipt deadline of serve.
    server = uvicorn.Server(
        uvicorn.Config(
            guard_stack(app, HostPatterns(())),
            http=bounded_protocol(request_timeout=10.0, max_connections=500),
            ws="none",
            log_config=None,
            access_log=False,
            lifespan="off",
        )
    )
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    server.run(sockets=[sock])
    # Stopped by a signal (uvicorn handles SIGTERM itself): end now, without the
    # interpreter's shutdown racing the thread that blocks on stdin.
    engine.dispose()
    os._exit(0)


if __name__ == "__main__":
    main()
