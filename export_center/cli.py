"""The ``export-center`` command (Typer).

Commands: ``demo`` (a real export of the TPC-H sample orders, CSV and XLSX, with a
progress bar and a summary), ``serve`` (API, loops and sample providers),
``token`` (print a bearer token), ``db upgrade`` (run migrations) and
``registry check FILE`` (validate an export-type file) and ``verify FILE`` (check a
downloaded export against its signed manifest, ``cli_verify``). Every command keeps the
embedded default's state under ``EXPORT_CENTER_DATA_DIR`` (default: the user's data
directory, ``~/.local/share/export-center`` on Linux) and prints where that is.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from export_center import (
    cli_approvals,
    cli_downloads,
    cli_ops,
    cli_quotas,
    cli_serve,
    cli_verify,
)
from export_center.auth import (
    ADMIN,
    DOWNLOAD_ALL,
    TENANT_ID_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
    email_of,
    issue_token,
    language_of,
)
from export_center.cli_serve import check_port_free as _check_port_free
from export_center.cli_serve import check_startup as _check_startup
from export_center.cli_serve import registry_permissions as _registry_permissions
from export_center.cli_serve import settings_from_env as _settings
from export_center.places import announce as _announce
from export_center.settings import private_dir, settings_problems
from export_center.terminal import cell

__all__ = ["app", "main"]


class AppCode(StrEnum):
    """App codes of the registry's ``app_scope``."""

    PLATFORM = "PLATFORM"
    MERCHANT = "MERCHANT"


_HELP = cli_ops.HELP_SETTINGS
# rich_markup_mode=None: click's own help layout, which never cuts an option name
# ("--no-download-…") nor prints a type such as "<bool>" for a flag.
app = typer.Typer(
    context_settings=_HELP,
    pretty_exceptions_enable=False,
    help="Export Center: background data exports with signed download links.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
db_app = typer.Typer(
    help="Database migrations.", no_args_is_help=True, context_settings=_HELP, rich_markup_mode=None
)
registry_app = typer.Typer(
    help="Export-type registry files.",
    no_args_is_help=True,
    context_settings=_HELP,
    rich_markup_mode=None,
)
app.add_typer(db_app, name="db")
cli_ops.register(app)
cli_downloads.register(app)
cli_approvals.register(app)
app.add_typer(registry_app, name="registry")
app.add_typer(cli_quotas.quotas_app, name="quotas")
app.command("verify")(cli_verify.verify)
app.command(help=cli_serve.SERVE_HELP)(cli_serve.serve)
console = Console(stderr=False)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"export-center {version('export-center')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
) -> None:
    """Export Center: background data exports with signed download links.

    Every command keeps its state in EXPORT_CENTER_DATA_DIR (default:
    ~/.local/share/export-center) and prints where that is. `export-center COMMAND
    --help` lists a command's options.
    """


@app.command()
def token(
    user: Annotated[str, typer.Option(help="Subject (user id)", metavar="USER")],
    tenant: Annotated[str, typer.Option(help="Tenant id", metavar="TENANT")],
    app_code: Annotated[AppCode, typer.Option("--app", help="App code")] = AppCode.PLATFORM,
    perm: Annotated[
        list[str] | None,
        typer.Option(
            help="Permission (repeatable); default: every registered type's", metavar="PERM"
        ),
    ] = None,
    download_all: Annotated[
        bool, typer.Option(help="Grant the tenant-wide download-all permission")
    ] = False,
    admin: Annotated[
        bool, typer.Option(help="Grant the admin permission (registry reload)")
    ] = False,
    ttl: Annotated[
        int,
        typer.Option(
            help="Lifetime in seconds (the server accepts it up to 30 s longer: its "
            "clock leeway, EXPORT_CENTER_API__JWT_LEEWAY_SECONDS)",
            min=1,
            metavar="SECONDS",
        ),
    ] = 24 * 3600,
    email: Annotated[
        str | None,
        typer.Option(help="E-mail address (claim email)", metavar="ADDRESS"),
    ] = None,
    locale: Annotated[
        str | None,
        typer.Option(help="Language (claim locale): en or zh-CN", metavar="TAG"),
    ] = None,
) -> None:
    """Print a bearer token signed with this installation's secret (EXPORT_CENTER_DATA_DIR)."""
    if email is not None and email_of(email) is None:
        raise typer.BadParameter(f"{email!r} is not an e-mail address", param_hint="'--email'")
    if locale is not None and language_of(locale) is None:
        raise typer.BadParameter(
            "notifications are written in English (en) or Chinese (zh-CN)",
            param_hint="'--locale'",
        )
    for name, value, limit in (
        ("--user", user, USER_ID_MAX_LENGTH),
        ("--tenant", tenant, TENANT_ID_MAX_LENGTH),
    ):
        if not value.strip() or value != value.strip():
            raise typer.BadParameter(
                "must not be empty or start or end with a space (ids compare exactly)",
                param_hint=f"'{name}'",
            )
        if len(value) > limit:
            raise typer.BadParameter(
                f"has {len(value)} characters; the server keeps at most {limit}",
                param_hint=f"'{name}'",
            )
    settings = _settings()
    _announce(settings, what="token")
    secret_file = settings.data_dir / "jwt-secret.txt"
    if settings.api.jwt_secret is None and not secret_file.exists():
        typer.echo(
            f"note: no secret yet under {settings.data_dir.resolve()}; created one. Only a "
            "server using this data directory accepts this token.",
            err=True,
        )
    from export_center.registry import RegistryError
    from export_center.registry_source import registry_problem

    try:
        known = _registry_permissions(settings)
    except RegistryError as exc:
        typer.echo(f"cannot issue a token: {registry_problem(exc)}", err=True)
        raise typer.Exit(2) from None
    perms = list(perm) if perm else known
    unknown = sorted(set(perms) - set(known) - {DOWNLOAD_ALL, ADMIN})
    if unknown:
        typer.echo(
            f"note: {', '.join(unknown)} is not a permission of the registry above; "
            "the token carries it anyway",
            err=True,
        )
    if download_all:
        perms.append(DOWNLOAD_ALL)
    if admin:
        perms.append(ADMIN)
    typer.echo(f"permissions: {', '.join(sorted(set(perms)))}", err=True)
    typer.echo(
        issue_token(
            settings.jwt_secret,
            user=user,
            tenant=tenant,
            app_code=app_code.value,
            permissions=perms,
            ttl_seconds=ttl,
            audience=settings.api.jwt_audience,
            email=email,
            locale=locale,
        )
    )


@db_app.command("upgrade")
def db_upgrade(
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL (default: settings)")
    ] = None,
) -> None:
    """Run the migrations up to head."""
    from export_center.db import make_engine
    from export_center.runtime import upgrade_database

    settings = _settings(database_url=database_url)
    _announce(settings, what="db upgrade")
    if settings.database_url is None:
        private_dir(settings.data_dir)
    try:
        engine = make_engine(settings.resolved_database_url)
        upgrade_database(engine)
        engine.dispose()
    except Exception as exc:  # one line for the operator, not a traceback
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        typer.echo(f"db upgrade failed: {type(exc).__name__}: {reason}", err=True)
        raise typer.Exit(1) from None
    # markup=False: a path or URL is text, whatever brackets it holds.
    shown = engine.url.render_as_string(hide_password=True)
    console.print(f"database at head: {shown}", markup=False, highlight=False)


@registry_app.command("check")
def registry_check(
    file: Annotated[Path, typer.Argument(help="YAML or TOML registry file")],
) -> None:
    """Validate a registry file; exits 1 naming the first invalid key and rule."""
    from export_center.registry import RegistryError, load_registry
    from export_center.registry_source import registry_source

    settings = _settings()
    typer.echo(f"export-center registry check: {file.resolve()}", err=True)
    try:
        registry = load_registry(
            file,
            allowed_hosts=set(settings.provider_allowed_hosts),
            allow_self=registry_source(settings).samples_mounted,
        )
    except RegistryError as exc:
        typer.echo(f"invalid: {exc}", err=True)
        raise typer.Exit(1) from None
    console.print(
        f"valid: {len(registry.types)} export types ({', '.join(sorted(registry.types))})"
    )


@app.command()
def worker(
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Serve this process's Prometheus metrics on this port (any path, /metrics "
            "included); unset: none. Each worker is its own scrape target "
            "(docs/operations.md).",
            min=1,
            max=65535,
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="Bind address of --metrics-port (0.0.0.0: every interface)")
    ] = "127.0.0.1",
) -> None:
    """Run only the loops (reconciler, publisher, consumer) without the API.

    Providers registered as ``self`` are called on ``EXPORT_CENTER_API__PUBLIC_BASE_URL``.
    Stops cleanly on SIGTERM/SIGINT: running exports end or are recovered by lease. With
    ``--metrics-port`` the process's metrics stay scrapeable until the loops have stopped.
    """
    import signal
    import threading

    from export_center.logs import configure_logging
    from export_center.metrics import start_metrics_server
    from export_center.runtime import Runtime

    settings = _settings()
    _announce(settings, what="worker")
    _check_startup(settings)
    if metrics_port is not None:
        _check_port_free(metrics_host, metrics_port)
    configure_logging()
    runtime = Runtime(settings, self_url=settings.api.public_base_url)
    exporter = (
        start_metrics_server(
            runtime.engine,
            metrics_host,
            metrics_port,
            (runtime.storage, runtime.low_space_bytes),
        )
        if metrics_port is not None
        else None
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    runtime.start()
    try:
        stop.wait()
    finally:
        runtime.stop()
        if exporter is not None:
            exporter.close()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _run_one(client: httpx.Client, fmt: str, out: Path, progress: Progress) -> dict[str, Any]:
    from export_center.embedded import request_orders_export

    started = time.perf_counter()
    task_id = request_orders_export(client, fmt, name="orders", key_prefix="demo")
    bar = progress.add_task(f"{fmt.upper():4} {task_id}", total=None)
    while True:
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        progress.update(
            bar,
            completed=detail["processed"],
            total=detail["total"],
            description=f"{fmt.upper():4} {detail['state']:9} {detail['phase']:6}",
        )
        if detail["state"] in ("succeeded", "failed", "cancelled", "expired", "rejected"):
            break
        time.sleep(0.2)
    seconds = time.perf_counter() - started
    if detail["state"] != "succeeded":
        raise RuntimeError(f"{fmt} export ended {detail['state']}: {detail['error']}")
    target = out / f"orders.{fmt}"
    with client.stream("GET", detail["downloadUrl"]) as response:
        if response.status_code != 200:
            raise RuntimeError(f"download {fmt}: HTTP {response.status_code}")
        with open(target, "wb") as fh:
            for chunk in response.iter_bytes(1 << 20):
                fh.write(chunk)
    rows = int(detail["processed"])
    return {
        "taskId": task_id,
        "rows": rows,
        "seconds": round(seconds, 3),
        "rowsPerSecond": round(rows / seconds, 1),
        "bytes": target.stat().st_size,
        "file": str(target),
    }


@app.command()
def demo(
    scale: Annotated[
        float,
        typer.Option(help="TPC-H scale factor, above 0 and at most 10 (0.27 = 405,000 orders)"),
    ] = 0.27,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL (default: SQLite under the data dir)")
    ] = None,
    output_dir: Annotated[
        Path, typer.Option(help="Where orders.csv, orders.xlsx and summary.json go")
    ] = Path("out"),
) -> None:
    """Export all TPC-H sample orders as CSV and XLSX over HTTP and print a summary."""
    from export_center.embedded import ServerThread, build_app, free_port
    from export_center.logs import configure_logging

    if not 0 < scale <= 10:
        raise typer.BadParameter(
            f"must be above 0 and at most 10 (0.27 = 405,000 orders), got {scale:g}",
            param_hint="'--scale'",
        )
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise typer.BadParameter(
            f"cannot create {output_dir}: {exc.strerror or exc}", param_hint="'--output-dir'"
        ) from None
    settings = _settings(
        database_url=database_url,
        sample_scale=scale,
        mount_sample_providers=True,
        load_sample_data=True,
    )
    _announce(settings, what="demo")
    configure_logging("INFO", file=settings.data_dir / "logs" / "demo.log")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with console.status("[bold]Preparing the TPC-H sample and starting the service…") as status:
        server = ServerThread(
            build_app(settings, self_url=url, progress=lambda m: status.update(f"[bold]{m}")),
            "127.0.0.1",
            port,
        )
        server.start()
    results: dict[str, Any] = {}
    try:
        bearer = issue_token(
            settings.jwt_secret,
            user="demo",
            tenant="demo",
            permissions=["export:orders:create"],
            ttl_seconds=3600,
        )
        with (
            httpx.Client(
                base_url=url,
                headers={"authorization": f"Bearer {bearer}"},
                timeout=60,
                follow_redirects=True,
            ) as client,
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            ) as progress,
        ):
            for fmt in ("csv", "xlsx"):
                results[fmt] = _run_one(client, fmt, output_dir, progress)
    finally:
        server.stop()
    results["peakRssMb"] = round(_peak_rss_mb(), 1)
    results["database"] = settings.resolved_database_url.split("://")[0]
    results["transport"] = settings.transport
    results["scale"] = scale
    (output_dir / "summary.json").write_text(json.dumps(results, indent=2) + "\n")
    table = Table(title=f"Export Center demo: TPC-H orders, scale {scale}")
    for column in ("format", "rows", "seconds", "rows/s", "bytes", "file"):
        table.add_column(
            column, justify="right" if column in ("rows", "seconds", "rows/s", "bytes") else "left"
        )
    for fmt in ("csv", "xlsx"):
        r = results[fmt]
        table.add_row(
            fmt,
            f"{r['rows']:,}",
            f"{r['seconds']:.1f}",
            f"{r['rowsPerSecond']:,.0f}",
            f"{r['bytes']:,}",
            cell(r["file"]),
        )
    console.print(table)
    console.print(
        f"peak RSS {results['peakRssMb']:.0f} MB · summary: {output_dir / 'summary.json'}",
        markup=False,
    )


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except ValidationError as exc:  # settings from the environment or a .env file
        sys.stderr.write(settings_problems(exc))
        sys.exit(2)
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
