"""``export-center serve``, and the start-up checks every long-running command shares.

One process (the default) runs the API, the loops and, on the embedded default, the
sample providers. ``--workers N`` runs N API processes on the same port and the loops
once, in the process ``serve`` started (:mod:`export_center.serve_workers` says which
process runs what). Every check refuses before anything binds or runs, with one line and
exit code 2.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from export_center.places import announce
from export_center.settings import Settings

__all__ = [
    "SERVE_HELP",
    "check_port_free",
    "check_startup",
    "registry_permissions",
    "serve",
    "settings_from_env",
]


def settings_from_env(**overrides: Any) -> Settings:
    """The settings from the environment, with the non-None ``overrides`` applied (and
    validated like the rest)."""
    base = Settings()
    data = base.model_dump()
    data.update({k: v for k, v in overrides.items() if v is not None})
    return Settings.model_validate(data)


def check_port_free(host: str, port: int) -> None:
    """Refuse to start, before any loop runs, when the port is taken.

    Raises:
        typer.Exit: code 2, after one line naming the address.
    """
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            typer.echo(f"cannot start: {host}:{port} is not free ({exc.strerror})", err=True)
            raise typer.Exit(2) from None


def check_startup(settings: Settings) -> None:
    """Refuse to start on settings that would fail later.

    Raises:
        typer.Exit: code 2, after one line naming the setting.
    """
    try:
        settings.check_startup()
    except ValueError as exc:
        typer.echo(f"cannot start: {exc}", err=True)
        raise typer.Exit(2) from None


def registry_permissions(settings: Settings) -> list[str]:
    """The permissions of the registry the settings name (``registry_source``).

    Raises:
        RegistryError: there is none, or it is invalid.
    """
    from export_center.registry_source import open_registry

    return sorted({t.required_permission for t in open_registry(settings)})


SERVE_HELP = (
    "Run the API, the loops and (embedded default) the sample providers.\n\n"
    "State lives in EXPORT_CENTER_DATA_DIR (default: ~/.local/share/export-center): the "
    "SQLite database, the files and the secrets; the command prints where each is. "
    "Every setting is an EXPORT_CENTER_* variable (docs/settings.md). Logs are JSON lines "
    "on stderr. SIGHUP reloads the export-type registry (an invalid file keeps the old one). "
    "--workers N runs N API processes on the port and the loops once, in this process "
    "(docs/operations.md, 'Several API processes')."
)


def serve(
    host: Annotated[
        str | None,
        typer.Option(help="Bind address", show_default="127.0.0.1, or EXPORT_CENTER_API__HOST"),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Bind port", min=1, max=65535, show_default="8000, or EXPORT_CENTER_API__PORT"
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            help="API processes on the port (the loops run once, in this process)",
            min=1,
            max=64,
        ),
    ] = 1,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="With --workers N: this process's metrics on this port, API process k's on "
            "this port + k (each process is its own scrape target)",
            min=1,
            max=65535,
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="Bind address of the metrics ports (0.0.0.0: every interface)")
    ] = "127.0.0.1",
) -> None:
    """Run the API, the loops and (embedded default) the sample providers (help: SERVE_HELP)."""
    from export_center.logs import configure_logging
    from export_center.registry import RegistryError
    from export_center.registry_source import registry_problem

    settings = settings_from_env()
    host = host or settings.api.host
    port = port or settings.api.port
    self_url = (
        settings.api.public_base_url
        or f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    )
    if metrics_port is not None and workers == 1:
        typer.echo(
            "cannot start: --metrics-port needs --workers 2 or more (one process serves its "
            "metrics on GET /metrics of the API port)",
            err=True,
        )
        raise typer.Exit(2)
    if metrics_port is not None and metrics_port + workers > 65535:
        last = metrics_port + workers
        typer.echo(f"cannot start: metrics ports {metrics_port}..{last} exceed 65535", err=True)
        raise typer.Exit(2)
    announce(settings, what="serve", also={"download center": f"{self_url.rstrip('/')}/ui/"})
    check_startup(settings)
    check_port_free(host, port)
    for extra in range(workers + 1) if metrics_port is not None else ():
        check_port_free(metrics_host, metrics_port + extra)  # type: ignore[operator]
    try:  # fail before binding, with one line naming the key and the rule
        registry_permissions(settings)
    except RegistryError as exc:
        typer.echo(f"cannot start: {registry_problem(exc)}", err=True)
        raise typer.Exit(2) from None
    configure_logging()
    if workers > 1:
        from export_center.serve_workers import run

        stopped = run(
            settings,
            host=host,
            port=port,
            self_url=self_url,
            workers=workers,
            metrics_host=metrics_host,
            metrics_port=metrics_port,
        )
        if not stopped:
            typer.echo("stopped: an API process could not start (see the log)", err=True)
            raise typer.Exit(1)
        return
    _serve_one(settings, host=host, port=port, self_url=self_url)


def _serve_one(settings: Settings, *, host: str, port: int, self_url: str) -> None:
    """The API, the loops and the sample providers in this one process."""
    import logging
    import signal

    from export_center.embedded import GracefulServer, build_app
    from export_center.http_server import server_config
    from export_center.registry import RegistryError

    app = build_app(settings, self_url=self_url)
    # uvicorn with a request-receipt deadline and a connection limit (settings
    # api.request_timeout_seconds, api.max_connections); its log lines go through our
    # JSON handler.
    server = GracefulServer(server_config(app, host=host, port=port, api=settings.api))

    def reload_on_sighup(*_: object) -> None:
        runtime = getattr(app.state, "runtime", None)
        if runtime is None:
            return
        try:
            runtime.reload_registry()  # logs what it loaded
        except RegistryError as exc:
            logging.getLogger("export_center.registry").error(
                "registry reload refused, the previous registry stays: %s", exc
            )

    signal.signal(signal.SIGHUP, reload_on_sighup)
    server.run()
