"""``export-center serve --workers N``: N API processes on one port, the loops once.

Which process runs what (the rule this module implements):

- The **parent** (the process ``serve`` started) binds the port once, loads the TPC-H
  sample on the embedded default (before any API process mounts it) and runs the loops
  the settings enable: reconciler, outbox publisher, consumer (the exports), notifier,
  scheduler and the dead-letter handler, with the sample-provider child process. It
  answers no HTTP request itself; with ``--metrics-port P`` its metrics answer on
  ``P``.
- Each of the **N API processes** (uvicorn's process supervisor spawns them and replaces
  one that dies) answers the API, the download center and the sample providers' routes
  on the shared port, and runs no loop except the outbox publisher when the transport is
  a broker: a create is then sent at once by the process that committed it (the
  publisher's claim keeps every command sent once, whichever process sends it). With the
  in-process transport only the parent can deliver a command to its consumer, so a
  created task waits for the parent's next publisher pass (``publisher.loop_seconds``).
- **Metrics**: every process is its own scrape target (:mod:`export_center.metrics`).
  An API process takes a slot ``k`` in 1..N, an exclusive lock on
  ``<data dir>/serve-<port>/slot-<k>.lock`` that the kernel frees when the process ends
  (its replacement takes the same slot, waiting for it while the old process is still
  stopping), and with ``--metrics-port P`` serves its metrics on ``P + k``. ``GET
  /metrics`` on the API port answers for whichever API process took the request.
- **SIGTERM / SIGINT**: the parent hands its running exports back and stops its loops,
  then stops the API processes (each finishes the requests in flight, at most 30 s).
- **SIGHUP**: the parent reloads the registry; when the file is valid the API processes
  are replaced one at a time (each new one is ready before the old one stops), so each
  loads it; an invalid file keeps the old registry in every process. The admin route
  that reloads the registry reaches only the API process that took the request.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from pathlib import Path
from typing import IO, Any

import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors.multiprocess import Multiprocess

from export_center.http_server import bounded_protocol, server_options
from export_center.metrics import MetricsServer, start_metrics_server
from export_center.registry import RegistryError
from export_center.runtime import Runtime
from export_center.settings import Settings

__all__ = ["CHILD_SPEC_VARIABLE", "api_app", "child_settings", "run", "slot_dir"]

log = logging.getLogger("export_center.serve")

#: The environment variable the parent hands each API process its part in: JSON
#: ``{"selfUrl", "slots", "slotDir", "metricsHost", "metricsPort"}`` (port null: none).
CHILD_SPEC_VARIABLE = "EXPORT_CENTER_SERVE_CHILD"

API_PROCESS_HEALTH_SECONDS = 20
"""Seconds a new or running API process may take to answer its supervisor (uvicorn's
``timeout_worker_healthcheck``)."""
#: How often an API process waiting for a free metrics slot looks again, in seconds.
_SLOT_POLL_SECONDS = 0.2

#: The slot lock of this API process: held open for the life of the process.
_held_slot: IO[str] | None = None


def slot_dir(settings: Settings, port: int) -> Path:
    """The directory of the slot locks of the API processes serving ``port``."""
    return settings.data_dir / f"serve-{port}"


def child_settings(settings: Settings) -> Settings:
    """The settings of an API process: every loop off except the outbox publisher, which
    stays as configured when the transport is a broker; no dead-letter handler."""
    off = {"enabled": False}
    publisher = settings.publisher
    if settings.transport == "memory":
        publisher = publisher.model_copy(update=off)
    return settings.model_copy(
        update={
            "publisher": publisher,
            "consumer": settings.consumer.model_copy(update=off),
            "reconciler": settings.reconciler.model_copy(update=off),
            "notify": settings.notify.model_copy(update=off),
            "scheduler": settings.scheduler.model_copy(update=off),
            "rocketmq": settings.rocketmq.model_copy(update={"dlq_enabled": False}),
        }
    )


def __getattr__(name: str) -> Any:
    """``ApiProtocol``: the bounded h11 protocol of the API processes, built from the
    settings in the process that imports it (uvicorn resolves ``http`` by name in each
    spawned process; a class made at run time cannot be handed over)."""
    if name == "ApiProtocol":
        api = Settings().api
        return bounded_protocol(
            request_timeout=api.request_timeout_seconds,
            max_connections=api.max_connections,
            send_timeout=api.send_timeout_seconds,
        )
    raise AttributeError(name)


def _take_slot(directory: Path, slots: int) -> int:
    """Block until one of the slot locks 1..``slots`` is free; hold it; return its
    number."""
    global _held_slot
    import time

    directory.mkdir(parents=True, exist_ok=True)
    while True:
        for k in range(1, slots + 1):
            handle = (directory / f"slot-{k}.lock").open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            _held_slot = handle
            return k
        time.sleep(_SLOT_POLL_SECONDS)


def _serve_metrics_when_slotted(runtime: Runtime, spec: dict[str, Any]) -> None:
    """Take a slot and, with a metrics port, serve this process's metrics on port + slot
    (from a daemon thread, so the API answers while an old process still holds it)."""

    def take() -> None:
        slot = _take_slot(Path(spec["slotDir"]), int(spec["slots"]))
        if spec.get("metricsPort") is None:
            log.info("API process %d took slot %d", os.getpid(), slot)
            return
        port = int(spec["metricsPort"]) + slot
        try:
            server = start_metrics_server(
                runtime.engine,
                spec["metricsHost"],
                port,
                (runtime.storage, runtime.low_space_bytes),
            )
        except OSError as exc:
            log.error("API process slot %d cannot serve metrics on port %d: %s", slot, port, exc)
            return
        runtime.on_stop(server.close)
        log.info("API process %d took slot %d: metrics on port %d", os.getpid(), slot, port)

    threading.Thread(target=take, name="serve-slot", daemon=True).start()


def api_app() -> FastAPI:
    """The app of one API process (uvicorn's factory, called in the spawned process):
    the API with :func:`child_settings`, the sample providers' routes when mounted (not
    loaded: the parent did), and its metrics slot.

    Raises:
        RuntimeError: started outside ``serve --workers N`` (no part handed over).
    """
    from export_center.api.app import create_app
    from export_center.embedded import mount_samples
    from export_center.logs import configure_logging

    raw = os.environ.get(CHILD_SPEC_VARIABLE)
    if not raw:
        raise RuntimeError(f"{CHILD_SPEC_VARIABLE} is not set: run export-center serve --workers N")
    spec = json.loads(raw)
    configure_logging()
    settings = child_settings(Settings())
    samples = mount_samples(settings, loads=False) if settings.mount_sample_providers else None

    def mount(app: FastAPI, runtime: Runtime) -> None:
        if samples is not None:
            samples(app, runtime)
        _serve_metrics_when_slotted(runtime, spec)

    return create_app(
        settings,
        runtime_factory=lambda s: Runtime(s, self_url=spec["selfUrl"]),
        mount=mount,
    )


class _Supervisor(Multiprocess):
    """uvicorn's process supervisor with the parent's loops: they stop before the API
    processes do, and SIGHUP reloads the parent's registry before it replaces them."""

    def __init__(self, config: uvicorn.Config, sockets: list[Any], runtime: Runtime) -> None:
        super().__init__(config, sockets)
        self.runtime = runtime
        self.asked_to_stop = False
        self._stopped = False

    def stop_loops(self) -> None:
        """Hand running exports back and stop the loops (once)."""
        if not self._stopped:
            self._stopped = True
            self.runtime.stop()

    def handle_int(self) -> None:
        self.asked_to_stop = True
        super().handle_int()

    def handle_term(self) -> None:
        self.asked_to_stop = True
        super().handle_term()

    def handle_hup(self) -> None:
        try:
            self.runtime.reload_registry()  # logs what it loaded
        except RegistryError as exc:
            log.error("registry reload refused, the previous registry stays: %s", exc)
            return
        super().handle_hup()

    def terminate_all(self) -> None:
        self.stop_loops()  # the exports may read the sample providers the API serves
        super().terminate_all()


def run(
    settings: Settings,
    *,
    host: str,
    port: int,
    self_url: str,
    workers: int,
    metrics_host: str = "127.0.0.1",
    metrics_port: int | None = None,
) -> bool:
    """Run ``workers`` API processes on ``host:port`` and the loops in this process until
    SIGTERM or SIGINT (the rule of this module).

    Args:
        settings: this process's settings (the API processes read the same environment).
        host: bind address of the API.
        port: bind port of the API.
        self_url: the URL the exports call the ``self`` providers on.
        workers: number of API processes, at least 2.
        metrics_host: bind address of the metrics ports.
        metrics_port: this process's metrics port (the API processes take the next
            ``workers`` ports); None: no metrics ports.

    Returns:
        True when asked to stop; False when an API process could not start (the log says
        why) and everything stopped.
    """
    from export_center.embedded import start_sample_providers

    runtime = Runtime(settings, self_url=self_url)
    if settings.mount_sample_providers:
        start_sample_providers(settings, runtime)
    os.environ[CHILD_SPEC_VARIABLE] = json.dumps(
        {
            "selfUrl": self_url,
            "slots": workers,
            "slotDir": str(slot_dir(settings, port)),
            "metricsHost": metrics_host,
            "metricsPort": metrics_port,
        }
    )
    config = uvicorn.Config(
        "export_center.serve_workers:api_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http="export_center.serve_workers:ApiProtocol",
        **server_options(settings.api),
        # How long the supervisor waits for a new API process to answer (SIGHUP
        # replacement) and for a ping of a running one before it kills it: starting one
        # imports the app and builds the registry, seconds on a busy host (uvicorn's
        # 5 s gave up on a loaded 2-core host and killed healthy children). Not much
        # longer: the supervisor pings its children one after the other, so a dead one
        # is replaced only after the pings before it.
        timeout_worker_healthcheck=API_PROCESS_HEALTH_SECONDS,
    )
    supervisor = _Supervisor(config, [config.bind_socket()], runtime)
    exporter: MetricsServer | None = None
    try:
        runtime.start()
        if metrics_port is not None:
            storage = (runtime.storage, runtime.low_space_bytes)
            exporter = start_metrics_server(runtime.engine, metrics_host, metrics_port, storage)
        log.info(
            "serving with %d API processes on %s:%d; the loops run in process %d",
            workers,
            host,
            port,
            os.getpid(),
        )
        supervisor.run()
    finally:
        supervisor.stop_loops()
        if exporter is not None:
            exporter.close()
    return supervisor.asked_to_stop
