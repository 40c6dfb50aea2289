"""The embedded default: API, loops and sample providers on loopback.

``serve`` and ``demo`` use :func:`build_app` and :class:`ServerThread`. The sample
providers (mounted when ``mount_sample_providers`` is on: by default for the embedded
default only) get their own read-only engine on the configured database and are called
over HTTP, exactly as a separate service would be (DESIGN.md "Two ways to run, one code
path"). With ``sample_providers_process`` (the default) the worker loops call them in a
child process (:mod:`export_center.sample_process`), so an export uses a second core;
the API mounts them as well, for workers that reach it by its public URL.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from export_center.api.app import create_app
from export_center.db import make_engine
from export_center.healthz import NotHealthy, wait_healthy
from export_center.http_server import server_config
from export_center.runtime import Runtime
from export_center.sample_process import SampleProviderProcess
from export_center.settings import ApiSettings, Settings, load_or_create_secret

__all__ = [
    "request_orders_export",
    "ServerThread",
    "build_app",
    "free_port",
    "mount_samples",
    "start_sample_providers",
]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def mount_samples(
    settings: Settings,
    progress: Callable[[str], None] | None = None,
    *,
    loads: bool = True,
) -> Callable[[FastAPI, Runtime], None]:
    """Return a mount hook that mounts the sample providers' routes on the app.

    With ``loads`` (one process: ``serve``, ``demo``) the hook also loads the TPC-H sample
    (once) and starts the sample-provider child process (:func:`start_sample_providers`).
    Without it (the API processes of ``serve --workers N``) it only mounts the routes:
    the parent process did both.
    """

    def mount(app: FastAPI, runtime: Runtime) -> None:
        from providers.catalog import sample_router

        _count_served_rows()
        if loads:
            start_sample_providers(settings, runtime, progress)
        engine = make_engine(settings.resolved_sample_database_url, immediate=False)
        app.include_router(
            sample_router(
                engine,
                token=settings.internal_token,
                secret=load_or_create_secret(settings.data_dir / "provider-secret.txt"),
                snapshot_ttl_seconds=settings.provider.snapshot_ttl_seconds,
            )
        )

    return mount


class _RowsServed(Collector):
    """``export_sample_provider_rows_served_total{type}``: rows the sample providers
    mounted in this process answered (every 2xx page, refetches included): the provider's
    side of an export, to compare with the rows the file holds."""

    def collect(self) -> Iterator[Metric]:
        from providers.served import rows_served

        family = CounterMetricFamily(
            "export_sample_provider_rows_served",
            "Rows the sample providers of this process answered, refetches included",
            labels=["type"],
        )
        for export_type, rows in sorted(rows_served().items()):
            family.add_metric([export_type], rows)
        yield family


_ROWS_SERVED = _RowsServed()
_ROWS_SERVED_REGISTERED = threading.Lock()


def _count_served_rows() -> None:
    """Register :class:`_RowsServed` once in this process's registry."""
    if _ROWS_SERVED_REGISTERED.acquire(blocking=False):
        REGISTRY.register(_ROWS_SERVED)


def start_sample_providers(
    settings: Settings, runtime: Runtime, progress: Callable[[str], None] | None = None
) -> None:
    """Load the TPC-H sample once (``load_sample_data``) and, with
    ``sample_providers_process``, start the supervised sample-provider child whose URL the
    runtime's exports call (a restarted child on another port is handed to the runtime);
    the child stops with the runtime."""
    from providers import tpch

    if settings.load_sample_data:
        engine = make_engine(settings.resolved_sample_database_url, immediate=False)
        try:
            tpch.ensure_loaded(engine, settings.sample_scale, settings.data_dir, progress=progress)
        finally:
            engine.dispose()
    if settings.sample_providers_process:
        child = SampleProviderProcess(
            database_url=settings.resolved_sample_database_url,
            token=settings.internal_token,
            secret=load_or_create_secret(settings.data_dir / "provider-secret.txt"),
            snapshot_ttl_seconds=settings.provider.snapshot_ttl_seconds,
            on_restart=runtime.set_self_url,  # a restarted child on another port
        )
        runtime.set_self_url(child.start())  # supervised: restarted when it dies
        runtime.sample_providers = child
        runtime.on_stop(child.stop)


def build_app(
    settings: Settings,
    *,
    self_url: str,
    start_loops: bool = True,
    progress: Callable[[str], None] | None = None,
) -> FastAPI:
    """The full embedded app: API, loops and (when enabled) the sample providers."""

    def factory(s: Settings) -> Runtime:
        return Runtime(s, self_url=self_url)

    return create_app(
        settings,
        runtime_factory=factory,
        start_loops=start_loops,
        mount=mount_samples(settings, progress) if settings.mount_sample_providers else None,
    )


class GracefulServer(uvicorn.Server):
    """uvicorn that hands running exports back before it stops serving (the embedded
    default serves the providers its exports read, so they must stop first)."""

    def handle_exit(self, sig: int, frame: object) -> None:
        runtime = getattr(getattr(self.config.app, "state", None), "runtime", None)
        if runtime is not None:
            # Only flags here: this runs on the event loop that still serves providers.
            runtime.begin_shutdown()
        super().handle_exit(sig, frame)  # type: ignore[arg-type]


class ServerThread:
    """Runs uvicorn in a background thread (demo and tests), configured as ``serve``.

    Args:
        app: the ASGI app.
        host: bind address.
        port: bind port.
        api: the API settings whose server limits apply (request-receipt deadline,
            connection limit); default: the defaults.
    """

    def __init__(self, app: Any, host: str, port: int, *, api: ApiSettings | None = None) -> None:
        self.url = f"http://{host}:{port}"
        self.server = GracefulServer(
            server_config(app, host=host, port=port, api=api or ApiSettings())
        )
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def start(self, timeout: float = 600.0) -> None:
        """Start and wait until ``/healthz`` answers.

        Raises:
            RuntimeError: the server stopped or did not answer in time.
        """
        self.thread.start()
        try:
            wait_healthy(self.url, timeout=timeout, alive=self.thread.is_alive)
        except NotHealthy as exc:
            if exc.stopped:
                raise RuntimeError("the server stopped during start-up (see the log)") from None
            raise RuntimeError(
                f"the server did not answer on {self.url} within {timeout:.0f} s"
            ) from None

    def stop(self) -> None:
        """Hand running exports back, then ask uvicorn to exit and wait for it."""
        runtime = getattr(getattr(self.server.config.app, "state", None), "runtime", None)
        if runtime is not None:
            runtime.begin_shutdown()
            runtime.consumer.stop(timeout=20)
        self.server.should_exit = True
        self.thread.join(60)


def request_orders_export(
    client: httpx.Client,
    fmt: str,
    *,
    name: str,
    key_prefix: str,
    parameters: dict[str, str] | None = None,
) -> str:
    """Ask the served export center for all ORDERS as ``fmt`` (``csv`` or ``xlsx``), with
    a fresh idempotency key; returns the task id (what ``demo`` and the bench do).
    ``parameters`` narrow it (e.g. ``{"from": ..., "to": ...}``: day shards).

    Raises:
        RuntimeError: the API did not accept the export (its status and body).
    """
    answer = client.post(
        "/api/v1/exports",
        json={
            "exportType": "ORDERS",
            "format": fmt,
            "taskName": name,
            "parameters": parameters or {},
            "requestId": f"{key_prefix}-{fmt}-{os.getpid()}-{time.time_ns()}",
        },
    )
    if answer.status_code >= 300:
        raise RuntimeError(f"create {fmt}: HTTP {answer.status_code}: {answer.text}")
    return str(answer.json()["taskId"])
