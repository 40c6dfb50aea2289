"""Where a command's state lives, said before it does anything.

Every ``export-center`` command prints, on stderr and on its first lines, its data
directory (and where that setting came from), its database, its registry and where its
files go (:func:`announce`): a command started from another directory or with other
settings must never silently become another installation.

The operator commands (``tasks``, ``outbox``, ``dlq``, ``doctor``) only look at an
installation; they never make one. :func:`missing_database` is their check: a SQLite
database that does not exist is reported with its path and what to do, never created
(opening it would create an empty file, and later commands would take that for an
installation).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer
from sqlalchemy.engine import make_url

from export_center.registry_source import registry_source
from export_center.settings import Settings

__all__ = ["announce", "files_place", "missing_database", "shown_database"]


def files_place(settings: Settings) -> str:
    """Where the export files go: the directory, or the bucket and its endpoint."""
    if settings.storage.backend == "s3":
        s3 = settings.storage.s3
        return f"s3://{s3.bucket or '(no bucket set)'}/exports/ at {s3.endpoint_url or 'AWS S3'}"
    return str(settings.files_dir.resolve())


def shown_database(settings: Settings) -> str:
    """The database URL with its password hidden (what may be printed)."""
    return make_url(settings.resolved_database_url).render_as_string(hide_password=True)


def announce(settings: Settings, *, what: str = "", also: dict[str, str] | None = None) -> None:
    """Say on stderr where this command's state lives.

    Args:
        settings: the command's settings.
        what: the command (``serve``, ``tasks list``...), printed in the first line.
        also: lines added after the data directory, database, registry and files
            (``serve``: the download center's address).
    """
    origin = (
        "from EXPORT_CENTER_DATA_DIR"
        if os.environ.get("EXPORT_CENTER_DATA_DIR", "").strip()
        else "default; EXPORT_CENTER_DATA_DIR changes it"
    )
    where = {
        "data directory": f"{settings.data_dir.resolve()} ({origin})",
        "database": shown_database(settings),
        "registry": registry_source(settings).shown,
        "files": files_place(settings),
        **(also or {}),
    }
    lines = "\n".join(f"  {name:15} {value}" for name, value in where.items())
    typer.echo(f"export-center{' ' + what if what else ''}:\n{lines}", err=True)


def missing_database(settings: Settings) -> str | None:
    """Why the settings' database cannot be opened without creating it, or None.

    The rule: only a SQLite file can be created by opening it, so only a SQLite file
    that does not exist is refused (a server database that does not answer is the
    connection's own error). The sentence names the path, says whether the data
    directory exists, and what to do.

    Returns:
        One sentence, or None when the database file exists (or is not a file).
    """
    url = make_url(settings.resolved_database_url)
    name = url.database
    if url.get_backend_name() != "sqlite" or not name or name == ":memory:":
        return None
    if name.startswith("file:"):  # a URI filename: file:path?mode=...
        name = name[5:].split("?", 1)[0]
    path = Path(name).expanduser()
    if path.exists():
        return None
    data_dir = settings.data_dir.resolve()
    if not data_dir.exists():
        where = f"the data directory {data_dir} does not exist"
    elif settings.database_url is None:
        where = f"the data directory {data_dir} holds no export-center database"
    else:
        where = "EXPORT_CENTER_DATABASE_URL names a file that does not exist"
    return (
        f"no database at {path} ({where}); nothing was created. Point "
        "EXPORT_CENTER_DATA_DIR at the service's data directory (`export-center serve` "
        "prints it on its first lines) or set EXPORT_CENTER_DATABASE_URL; "
        "`export-center db upgrade` creates a new, empty one"
    )
