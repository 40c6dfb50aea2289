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
  SIGINT, so a Ctrl-C in the terminal stops the parent, which then closes the pipe;
* the parent supervises the child: when it dies (killed, out of memory, a crash), the
  death is logged once with its exit code or signal and counted
  (``export_sample_provider_exits_total``), and the child is started again after a
  back-off (:data:`RESTART_BACKOFF_SECONDS`, growing while it keeps dying, from the
  start again once it has served a minute). The new child binds the same port when it
  is free, so the address the workers call stays valid; otherwise the parent hands the
  new address on (``on_restart``). :meth:`SampleProviderProcess.health` says what
  ``/readyz`` and ``doctor`` report: running, or restarting and why.

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
from collections.abc import Callable, Sequence
from typing import IO, Any

__all__ = ["RESTART_BACKOFF_SECONDS", "SampleProviderProcess", "describe_exit", "main"]

log = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 60.0
"""How long the parent waits for the child to report its port and answer ``/healthz``."""

RESTART_BACKOFF_SECONDS: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Pauses before each restart of a child that keeps dying (the last one repeats)."""

STABLE_SECONDS = 60.0
"""A child that served this long before it died is restarted after the first pause."""


def describe_exit(returncode: int) -> str:
    """How a process ended, from its ``returncode`` (negative: the signal that killed it).

    Returns:
        ``killed by SIGKILL`` or ``exited with code 1``.
    """
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


class SampleProviderProcess:
    """A child process serving the sample providers on loopback, restarted when it dies.

    Args:
        database_url: SQLAlchemy URL of the sample data (read only).
        token: the ``X-Internal-Service-Token`` the providers check.
        secret: the key that signs cursors and snapshot tokens.
        snapshot_ttl_seconds: how long a snapshot token is accepted (then 410).
        log_level: the child's log level (its JSON lines go to the parent's stderr).
        on_restart: called with the new base URL when a restarted child could not
            bind its old port (the workers must call the new one).
        backoff_seconds: the pauses before successive restarts (the last repeats).
    """

    def __init__(
        self,
        *,
        database_url: str,
        token: str,
        secret: str,
        snapshot_ttl_seconds: int,
        log_level: str = "WARNING",
        on_restart: Callable[[str], None] | None = None,
        backoff_seconds: Sequence[float] = RESTART_BACKOFF_SECONDS,
    ) -> None:
        self._config: dict[str, Any] = {
            "database_url": database_url,
            "token": token,
            "secret": secret,
            "snapshot_ttl_seconds": snapshot_ttl_seconds,
            "log_level": log_level,
            "port": 0,
        }
        self._on_restart = on_restart
        self._backoff = tuple(backoff_seconds) or RESTART_BACKOFF_SECONDS
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._watcher: threading.Thread | None = None
        self._state = "stopped"
        self._since = time.monotonic()
        self.url: str | None = None
        self.restarts = 0
        self.last_exit: str | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs, else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def health(self) -> dict[str, Any]:
        """What readiness reports: ``state`` (``running``, ``restarting`` or
        ``stopped``), ``pid``, ``url``, ``restarts`` (times it was started again),
        ``lastExit`` (how the last child ended, e.g. ``killed by SIGKILL``) and, while
        restarting, ``downSeconds``."""
        state = self._state
        if state == "running" and self.pid is None:
            state = "restarting"  # dead, and the watcher has not woken up yet
        answer: dict[str, Any] = {
            "state": state,
            "pid": self.pid,
            "url": self.url,
            "restarts": self.restarts,
            "lastExit": self.last_exit,
        }
        if state == "restarting":
            answer["downSeconds"] = round(time.monotonic() - self._since, 1)
        return answer

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> str:
        """Start the child, wait until it serves, then watch it (restart when it dies).

        Returns:
            The child's base URL, e.g. ``http://127.0.0.1:40123``.

        Raises:
            RuntimeError: the child exited, or did not report a port and answer
                ``/healthz`` within ``timeout`` seconds (it is stopped then).
        """
        self._stopping.clear()
        url = self._spawn(timeout)
        self.url = url
        self._running()
        self._watcher = threading.Thread(
            target=self._watch, name="sample-providers-watch", daemon=True
        )
        self._watcher.start()
        return url

    def _running(self) -> None:
        self._state = "running"
        self._since = time.monotonic()

    def _spawn(self, timeout: float) -> str:
        """Start one child (on the port of the last one when there was one) and wait
        until it serves; returns its URL. The child is stopped when it does not serve.

        Raises:
            RuntimeError: it exited or did not serve within ``timeout`` seconds, or this
                object is stopping.
        """
        from export_center.healthz import NotHealthy, wait_healthy

        proc = subprocess.Popen(
            [sys.executable, "-m", "export_center.sample_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            # Its own session: a Ctrl-C in the terminal goes to the parent's process
            # group only; the parent stops the child by closing its stdin.
            start_new_session=True,
        )
        with self._lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._proc = proc
        if stopping:
            _end(proc)
            raise RuntimeError("the sample provider process is being stopped")
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(self._config).encode() + b"\n")
            proc.stdin.flush()
            deadline = time.monotonic() + timeout
            port = _read_port(proc, proc.stdout, deadline)
            url = f"http://127.0.0.1:{port}"
            try:
                wait_healthy(
                    url,
                    timeout=max(0.0, deadline - time.monotonic()),
                    alive=lambda: proc.poll() is None,
                    interval=0.05,
                )
            except NotHealthy:
                raise RuntimeError(f"the sample provider process did not answer on {url}") from None
        except BaseException:
            with self._lock:
                if self._proc is proc:
                    self._proc = None
            _end(proc)
            raise
        self._config["port"] = port  # the next child binds it again when it is free
        log.info("sample providers serve from process %d on %s", proc.pid, url)
        return url

    def _watch(self) -> None:
        """Wait for the child to end; unless stopping, log it once and restart it."""
        step = 0
        while not self._stopping.is_set():
            proc = self._proc
            if proc is None:
                return
            code = proc.wait()
            if self._stopping.is_set():
                return
            served = time.monotonic() - self._since
            self._state = "restarting"
            self._since = time.monotonic()
            self.last_exit = describe_exit(code)
            _close_pipes(proc)
            from export_center import metrics

            metrics.SAMPLE_PROVIDER_EXITS.inc()
            if served >= STABLE_SECONDS:
                step = 0
            log.error(
                "the sample provider process %d %s after %.0f s; exports that call it fail "
                "until it is back: starting it again",
                proc.pid,
                self.last_exit,
                served,
            )
            step = self._restart(step)

    def _restart(self, step: int) -> int:
        """Start a new child after the back-off of ``step``, trying again (longer
        pauses, one warning) until one serves or this object stops; returns the next
        step of the back-off."""
        warned = False
        while not self._stopping.wait(self._backoff[min(step, len(self._backoff) - 1)]):
            step += 1
            try:
                url = self._spawn(START_TIMEOUT_SECONDS)
            except Exception as exc:
                if self._stopping.is_set():
                    return step
                if not warned:
                    log.warning(
                        "the sample provider process did not start again (%s); trying "
                        "again with longer pauses",
                        exc,
                    )
                    warned = True
                continue
            down = time.monotonic() - self._since
            self.restarts += 1
            self._running()
            if url != self.url:
                self.url = url
                if self._on_restart is not None:
                    self._on_restart(url)
            log.info("sample providers serve again from %s after %.1f s", url, down)
            return step
        return step

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching, close the child's stdin (it exits at end of file) and wait;
        kill it after ``timeout`` seconds. Safe to call twice."""
        self._stopping.set()
        with self._lock:
            proc, self._proc = self._proc, None
        self._state = "stopped"
        if proc is not None:
            _end(proc, timeout)
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout)


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


def _end(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Close the child's stdin (it exits at end of file), wait, kill after ``timeout``."""
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
    _close_pipes(proc)


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


def _listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1: ``port`` when it is free, else one the kernel
    picks (SO_REUSEADDR: the port of a killed child is free again at once)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def main() -> None:
    """The child: read the configuration line, bind 127.0.0.1:0, print the port, serve.

    The configuration line is a JSON object ``{database_url, token, secret,
    snapshot_ttl_seconds, log_level, port}``; ``port`` is the port of the child this one
    replaces (0 for the first): bound again when free, else the kernel picks one.
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

    sock = _listen(int(config.get("port") or 0))
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
