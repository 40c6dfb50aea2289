"""Operator commands of downloads, links and files: ``downloads list``, ``links revoke``
and ``trace FILE``.

``export-center trace FILE`` hashes the file (SHA-256) and looks the hash up among the
files the service stored: a known file prints the task id, its requester and every
download of the task and exits 0; a file no task produced, or one whose bytes were
edited, prints that it is unknown and exits 1 (it is never matched by any other
property than its bytes).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from export_center import download_ops, operations
from export_center.api.download_schemas import DownloadPublic, TraceMatch, TracePublic
from export_center.cli_ops import (
    JsonOption,
    LimitOption,
    ReasonOption,
    TenantOption,
    _Context,
    _fail,
    _group,
)
from export_center.db import reading
from export_center.download_tables import print_downloads
from export_center.errors import RequestError
from export_center.repository.downloads import DOWNLOAD_KINDS, download_rows
from export_center.terminal import console, print_json, print_table, visible

__all__ = ["register", "trace"]

out = console()


downloads_app = _group("Recorded downloads: every bearer, signed-link and presigned answer.")
links_app = _group("Signed download links: revoke one link or every link of a task.")


def _moment(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{name}: an ISO 8601 time, e.g. 2026-12-01T08:00") from None
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


@downloads_app.command("list")
def downloads_list(
    task: Annotated[str | None, typer.Option(help="Only this task", metavar="TASK")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user", metavar="USER")] = None,
    kind: Annotated[
        str | None, typer.Option("--type", help="bearer, link or presigned", metavar="TYPE")
    ] = None,
    since: Annotated[str | None, typer.Option(help="From (ISO 8601, UTC)", metavar="TIME")] = None,
    until: Annotated[
        str | None, typer.Option(help="Before (ISO 8601, UTC)", metavar="TIME")
    ] = None,
    tenant: TenantOption = None,
    limit: LimitOption = 100,
    as_json: JsonOption = False,
) -> None:
    """List recorded downloads, newest first, filtered by task, user, type and time."""
    if kind is not None and kind not in DOWNLOAD_KINDS:
        raise typer.BadParameter("--type: bearer, link or presigned")
    ctx = _Context("downloads list")
    task_id = None
    if task is not None:
        try:
            task_id = operations.find_task(ctx, task, tenant).id
        except RequestError as exc:
            raise _fail(exc) from None
    with reading(ctx.engine) as conn:
        rows = download_rows(
            conn,
            task_id=task_id,
            tenant_id=tenant,
            user=user,
            kind=kind,
            since=_moment(since, "--since"),
            until=_moment(until, "--until"),
            limit=limit,
        )
    if as_json:
        print_json([DownloadPublic.of(r) for r in rows] or [])
        return
    print_downloads(out, "downloads (newest first)", rows)


@links_app.command("revoke")
def links_revoke(
    task: Annotated[str, typer.Argument(help="Task id (exp_...)", metavar="TASK")],
    reason: ReasonOption,
    link: Annotated[
        str | None,
        typer.Option(help="Only this link (the link= of its URL); default: every link"),
    ] = None,
    tenant: TenantOption = None,
) -> None:
    """Revoke one link of a task, or every link issued so far: they answer 410
    LINK_REVOKED on every API process from now on."""
    ctx = _Context("links revoke")
    actor = operations.operator_actor()
    try:
        found = operations.find_task(ctx, task, tenant)
        download_ops.revoke_task_links(
            ctx.engine,
            found,
            link,
            secret=ctx.settings.download_secret,
            actor=actor,
            reason=reason,
        )
    except RequestError as exc:
        if exc.code == "LINK_NOT_FOUND":  # link ids are bound to the server's secret
            exc = type(exc)(
                f"{exc} (or this command does not read the API's download secret: "
                "EXPORT_CENTER_API__DOWNLOAD_SECRET or the data directory's "
                "download-secret.txt)",
                code=exc.code,
            )
        raise _fail(exc) from None
    which = f"link {link}" if link else "every link"
    typer.echo(visible(f"{found.task_no}: {which} revoked; recorded in the audit trail as {actor}"))


def trace(
    file: Annotated[
        Path,
        typer.Argument(
            help="The file to trace", exists=True, dir_okay=False, readable=True, metavar="FILE"
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Which task and user produced FILE, and every download of it (exit 0); an unknown
    or edited file exits 1."""
    ctx = _Context("trace")

    def chunks() -> Iterator[bytes]:
        with file.open("rb") as handle:
            while block := handle.read(1 << 20):
                yield block

    sha, found = download_ops.trace_file(ctx.engine, chunks())
    if as_json:
        matches = [TraceMatch.of(t) for t in found]
        print_json(TracePublic(sha256=sha, known=bool(found), matches=matches))
        if not found:
            raise typer.Exit(1)
        return
    if not found:
        typer.echo(
            visible(
                f"{file.name}: unknown (SHA-256 {sha}): no export produced these bytes; "
                "a file edited after its download is unknown too"
            ),
            err=True,
        )
        raise typer.Exit(1)
    for t in found:
        task = t.task
        facts = [
            ("file", f"{file.name} (SHA-256 {sha})"),
            ("task", task.task_no),
            ("requester", f"{task.tenant_id} / {task.app_code} / {task.requested_by}"),
            ("type / format", f"{task.export_type} / {task.format.lower()}"),
            ("requested", str(task.requested_at)),
            ("matched", f"{t.file_name} ({t.kind})"),
        ]
        print_table(out, f"traced to {task.task_no}", ["", ""], [[k, v] for k, v in facts])
        print_downloads(out, f"downloads of {task.task_no} (newest first)", t.downloads)


def register(app: typer.Typer) -> None:
    """Add ``downloads``, ``links`` and ``trace`` to the CLI."""
    app.add_typer(downloads_app, name="downloads")
    app.add_typer(links_app, name="links")
    app.command("trace")(trace)
