"""The operator commands: ``tasks``, ``outbox``, ``dlq`` and ``doctor``.

They run on the same settings as the service (``EXPORT_CENTER_*``), against SQLite or
MySQL/MariaDB, and never need SQL typed by hand. Each first says on stderr which data
directory, database and registry it reads (:func:`export_center.places.announce`), and
never creates any of them: a SQLite database that does not exist is reported with its
path and what to do (exit 1). Each prints a readable table, or JSON with ``--json``;
lists are bounded by ``--limit``. Every value is printed as text, whatever it holds
(:mod:`export_center.terminal`). ``tasks retry`` and ``tasks cancel`` follow the rules
of the web API and are written to the audit trail as ``operator:<login>`` with the
``--reason`` given.
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Annotated, Any

import typer
from sqlalchemy import Engine

from export_center import operations, places
from export_center.api.admin_schemas import (
    AdminTask,
    CommandPublic,
    DeadLetterPublic,
    DeadLetterReportPublic,
    TaskReportPublic,
)
from export_center.api.download_schemas import DownloadPublic
from export_center.cli_task_file import file_asked, manifest_tables
from export_center.download_ops import task_downloads
from export_center.download_tables import print_downloads
from export_center.errors import RequestError
from export_center.manifests import signed_manifest
from export_center.registry import Registry
from export_center.settings import Settings
from export_center.states import api_state
from export_center.storage.base import Storage
from export_center.terminal import console, print_json, print_table, visible

__all__ = ["HELP_SETTINGS", "dlq_app", "doctor", "outbox_app", "register", "tasks_app"]

#: Context settings of every command: ``-h`` as well as ``--help``.
HELP_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


class _OperatorGroup(typer.core.TyperGroup):
    """Runs a command and turns a database or registry error into one line that says
    what to do."""

    def invoke(self, ctx: Any) -> Any:
        from sqlalchemy.exc import SQLAlchemyError

        from export_center.registry import RegistryError
        from export_center.registry_source import registry_problem

        try:
            return super().invoke(ctx)
        except RegistryError as exc:  # the registry a command needed (tasks retry)
            typer.echo(visible(registry_problem(exc)), err=True)
            raise typer.Exit(1) from None
        except SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
            try:
                where = places.shown_database(Settings())
            except Exception:  # the settings were read once already; never hide the error
                where = "the database"
            typer.echo(
                visible(
                    f"database error on {where}: {reason}; "
                    "run `export-center doctor` to see what is wrong"
                ),
                err=True,
            )
            raise typer.Exit(1) from None


def _group(help_text: str) -> typer.Typer:
    # rich_markup_mode=None: click's help layout (no "<bool>" types, names never cut).
    return typer.Typer(
        cls=_OperatorGroup,
        help=help_text,
        no_args_is_help=True,
        context_settings=HELP_SETTINGS,
        rich_markup_mode=None,
    )


tasks_app = _group("Export tasks: list, show, retry, cancel.")
outbox_app = _group("Commands not yet sent: due ones, and automatic retries scheduled.")
dlq_app = _group("Quarantined commands (the dead-letter queue).")
out = console()

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
LimitOption = Annotated[
    int, typer.Option(help="At most this many rows", min=1, max=1000, metavar="N")
]
TenantOption = Annotated[str | None, typer.Option(help="Only this tenant", metavar="TENANT")]


class _Context:
    """The database, registry and settings of the operator commands.

    Args:
        what: the command, as :func:`export_center.places.announce` names it.

    Raises:
        typer.Exit: 1, with one sentence on stderr, when the SQLite database does not
            exist (it is never created here).
    """

    def __init__(self, what: str) -> None:
        self.settings = Settings()
        places.announce(self.settings, what=what)
        missing = places.missing_database(self.settings)
        if missing is not None:
            typer.echo(f"cannot open the database: {missing}", err=True)
            raise typer.Exit(1)

    @cached_property
    def engine(self) -> Engine:
        from export_center.db import make_engine

        return make_engine(self.settings.resolved_database_url)

    @cached_property
    def registry(self) -> Registry:
        from export_center.registry_source import open_registry

        return open_registry(self.settings)

    @cached_property
    def storage(self) -> Storage:
        from export_center.runtime import open_storage

        return open_storage(self.settings)


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    print_table(out, title, columns, rows)


def _fail(exc: RequestError) -> typer.Exit:
    typer.echo(visible(f"{exc.code}: {exc.message}"), err=True)
    return typer.Exit(1)


@tasks_app.command("list")
def tasks_list(
    state: Annotated[
        list[str] | None,
        typer.Option(help="queued, running, succeeded, failed... (repeatable)", metavar="STATE"),
    ] = None,
    export_type: Annotated[
        list[str] | None, typer.Option("--type", help="Export type", metavar="TYPE")
    ] = None,
    user: Annotated[str | None, typer.Option(help="Only this requester", metavar="USER")] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="Only tasks whose name contains this (letters without case)", metavar="TEXT"
        ),
    ] = None,
    tenant: TenantOption = None,
    since: Annotated[
        str | None,
        typer.Option(help="Requested since: 2024-12-01, or 2h, 3d ago", metavar="WHEN"),
    ] = None,
    limit: LimitOption = 20,
    as_json: JsonOption = False,
) -> None:
    """List tasks, newest first."""
    ctx = _Context("tasks list")
    try:
        tasks = operations.list_tasks(
            ctx,
            states=state,
            export_types=export_type,
            user=user,
            tenant_id=tenant,
            since=_since(since),
            name=name,
            limit=limit,
        )
    except RequestError as exc:
        raise _fail(exc) from None
    if as_json:
        print_json([AdminTask.of(t) for t in tasks])
        return
    _table(
        f"tasks ({len(tasks)})",
        [
            "task",
            "name",
            "type",
            "fmt",
            "state",
            "phase",
            "rows",
            "tenant",
            "user",
            "requested",
            "error",
        ],
        [
            [
                t.task_no,
                t.task_name,
                t.export_type,
                t.format.lower(),
                api_state(t.status),
                t.phase,
                t.processed_rows,
                t.tenant_id,
                t.requested_by,
                _when(t.requested_at),
                t.failure_message,
            ]
            for t in tasks
        ],
    )


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    units = {"m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].isdigit():
        return datetime.now(UTC) - timedelta(seconds=int(text[:-1]) * units[text[-1]])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            "a date or time (2024-12-01, 2024-12-01T08:00) or an age (90m, 2h, 3d)",
            param_hint="'--since'",
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@tasks_app.command("show")
def tasks_show(
    task: Annotated[str, typer.Argument(help="Task id (exp_...)", metavar="TASK")],
    as_json: JsonOption = False,
) -> None:
    """Show a task, its commands, its audit trail and its last failure."""
    ctx = _Context("tasks show")
    try:
        report = operations.task_report(ctx, task)
    except RequestError as exc:
        raise _fail(exc) from None
    manifest = signed_manifest(report.task, ctx.settings.manifest_secret)
    downloads = task_downloads(ctx.engine, report.task)
    if as_json:
        body = TaskReportPublic.of(report, manifest).model_dump(mode="json")
        rows = [DownloadPublic.of(r).model_dump(mode="json") for r in downloads]
        print_json({**body, "downloads": rows})
        return
    t = report.task
    facts = [
        ("task", t.task_no),
        ("name", t.task_name),
        ("type / format", f"{t.export_type} / {t.format.lower()}"),
        ("state / phase", f"{api_state(t.status)} / {t.phase}"),
        ("tenant / app / user", f"{t.tenant_id} / {t.app_code} / {t.requested_by}"),
        ("dispatch version", t.dispatch_version),
        ("attempts", f"{t.attempt_count} of {t.max_attempts}"),
        ("rows", f"{t.processed_rows} of {t.total_rows if t.total_rows is not None else '?'}"),
        (
            "shards",
            f"{t.shards_done} of {t.shards_total} done"
            if t.shards_total is not None
            else "not sharded",
        ),
        ("file asked for", file_asked(t)),
        ("trace id", t.trace_id),
        ("time zone", t.time_zone),
        (
            "requested / started / finished",
            f"{_when(t.requested_at)} / {_when(t.started_at)} / {_when(t.completed_at)}",
        ),
        ("lease", f"{t.lease_owner} until {_when(t.lease_until)}" if t.lease_owner else "-"),
        (
            "file",
            f"{t.file_name} ({t.size_bytes or 0:,} bytes), expires {_when(t.expires_at)}"
            if t.file_name
            else "-",
        ),
        ("last failure", f"{t.failure_code}: {t.failure_message}" if t.failure_message else "-"),
    ]
    _table(f"task {t.task_no}", ["", ""], [[k, v] for k, v in facts])
    if manifest is not None:
        manifest_tables(out, manifest)
    _table(
        "commands (one per dispatch version) and shard wake-ups",
        ["version", "wakes", "event id", "status", "sends", "created", "sent", "last error"],
        [
            [
                r.dispatch_version,
                "task" if r.unit == "task" else r.unit.replace("-", " "),
                r.event_id,
                r.status.lower(),
                r.attempt_count,
                _when(r.created_at),
                _when(r.sent_at),
                r.last_error,
            ]
            for r in report.outbox
        ],
    )
    _table(
        "audit trail (newest first)",
        ["when", "who", "action", "outcome", "version", "reason"],
        [
            [
                _when(a.occurred_at),
                a.actor,
                a.action,
                a.outcome + (" (fresh)" if (a.details or {}).get("fresh") else ""),
                a.dispatch_version,
                a.reason,
            ]
            for a in report.audit
        ],
    )
    print_downloads(out, "downloads (newest first)", downloads)


def _act(name: str, task: str, reason: str, tenant: str | None, *, fresh: bool = False) -> None:
    ctx = _Context(f"tasks {name}")
    try:
        found = operations.find_task(ctx, task, tenant)
        actor = operations.operator_actor()
        if name == "retry":
            again = operations.retry_task(ctx, found, actor=actor, reason=reason, fresh=fresh)
        else:
            again = operations.cancel_task(ctx, found, actor=actor, reason=reason)
    except RequestError as exc:
        raise _fail(exc) from None
    typer.echo(
        visible(
            f"{again.task_no} ({again.task_name}): {api_state(again.status)} (dispatch "
            f"version {again.dispatch_version}); recorded in the audit trail as "
            f"{operations.operator_actor()}"
        )
    )


def _reason(value: str) -> str:
    """A reason of 3 to 500 characters (what the admin API accepts too)."""
    text = value.strip()
    if not 3 <= len(text) <= 500:
        raise typer.BadParameter("say why in 3 to 500 characters (it is kept in the audit trail)")
    return text


ReasonOption = Annotated[
    str,
    typer.Option(
        help="Why, 3 to 500 characters (kept in the audit trail)",
        callback=_reason,
        show_default=False,
        metavar="TEXT",
    ),
]


@tasks_app.command("retry")
def tasks_retry(
    task: Annotated[str, typer.Argument(help="Task id (exp_...), FAILED", metavar="TASK")],
    reason: ReasonOption,
    tenant: TenantOption = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Start every shard from zero instead of resuming from the checkpoints",
        ),
    ] = False,
) -> None:
    """Run a failed task again (new dispatch version), as the web API's retry does: a
    sharded export resumes from its checkpoints unless --fresh is given."""
    _act("retry", task, reason, tenant, fresh=fresh)


@tasks_app.command("cancel")
def tasks_cancel(
    task: Annotated[
        str, typer.Argument(help="Task id (exp_...), queued or running", metavar="TASK")
    ],
    reason: ReasonOption,
    tenant: TenantOption = None,
) -> None:
    """Cancel a queued task at once, or stop a running one within 10 s."""
    _act("cancel", task, reason, tenant)


@outbox_app.command("list")
def outbox_list(
    stuck: Annotated[
        bool,
        typer.Option(
            "--stuck",
            help="Only commands due for longer than --stuck-seconds (a retry scheduled "
            "for later is never stuck)",
        ),
    ] = False,
    stuck_seconds: Annotated[
        float, typer.Option(help="Seconds due and unsent that count as stuck", metavar="SECONDS")
    ] = 120.0,
    tenant: TenantOption = None,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Commands not yet sent (PENDING or CLAIMED): the longest due first, then the
    automatic retries scheduled for later (they wait by design)."""
    ctx = _Context("outbox list")
    rows = operations.outbox(
        ctx, stuck_seconds=stuck_seconds if stuck else None, tenant_id=tenant, limit=limit
    )
    if as_json:
        print_json([CommandPublic.of_entry(e) for e in rows])
        return
    _table(
        f"unsent commands ({len(rows)}{', stuck' if stuck else ''})",
        [
            "task",
            "name",
            "version",
            "event id",
            "status",
            "sends",
            "due for (s)",
            "due at",
            "last error",
        ],
        [
            [
                e.task_no,
                e.task_name,
                e.row.dispatch_version,
                e.row.event_id,
                "scheduled retry" if e.scheduled else e.row.status.lower(),
                e.row.attempt_count,
                "-" if e.scheduled else f"{e.age_seconds:,.0f}",
                _when(e.due_at),
                e.row.last_error,
            ]
            for e in rows
        ],
    )
    scheduled = [e for e in rows if e.scheduled]
    if scheduled:
        typer.echo(
            f"{len(scheduled)} of them: automatic retries scheduled for later, not stuck "
            f"(the first is due at {_when(scheduled[0].due_at)} UTC)"
        )


@dlq_app.command("list")
def dlq_list(
    tenant: TenantOption = None, limit: LimitOption = 50, as_json: JsonOption = False
) -> None:
    """Quarantined commands: why, which task and version, when."""
    ctx = _Context("dlq list")
    letters = operations.dead_letters(ctx, tenant_id=tenant, limit=limit)
    if as_json:
        print_json([DeadLetterPublic.of(d) for d in letters])
        return
    _table(
        f"quarantined commands ({len(letters)})",
        ["event id", "task", "name", "version", "task state", "when", "reason"],
        [
            [
                d.entry.row.event_id,
                d.entry.task_no,
                d.entry.task_name,
                d.entry.row.dispatch_version,
                api_state(d.entry.task_status),
                _when(d.audit.occurred_at if d.audit else d.entry.row.updated_at),
                d.entry.row.last_error,
            ]
            for d in letters
        ],
    )


@dlq_app.command("show")
def dlq_show(
    event: Annotated[str, typer.Argument(help="Event id of the command", metavar="EVENT")],
    as_json: JsonOption = False,
) -> None:
    """Show one command and every audit entry about it (broker message id, properties)."""
    ctx = _Context("dlq show")
    try:
        entry, audit = operations.dead_letter(ctx, event)
    except RequestError as exc:
        raise _fail(exc) from None
    if as_json:
        print_json(DeadLetterReportPublic.of(entry, audit))
        return
    r = entry.row
    _table(
        f"command {r.event_id}",
        ["", ""],
        [
            ["task", entry.task_no],
            ["name", entry.task_name],
            ["task state", api_state(entry.task_status)],
            ["dispatch version", r.dispatch_version],
            ["status", r.status.lower()],
            ["sends", r.attempt_count],
            ["last error", r.last_error],
            ["payload", r.payload_json],
        ],
    )
    _table(
        "audit trail",
        ["when", "who", "action", "outcome", "reason", "details"],
        [
            [
                _when(a.occurred_at),
                a.actor,
                a.action,
                a.outcome,
                a.reason,
                json.dumps(a.details, ensure_ascii=False) if a.details else "",
            ]
            for a in audit
        ],
    )


def doctor(as_json: JsonOption = False) -> None:
    """Check settings, database, migrations, broker, storage, registry, providers and
    clock; exit 1 when any check fails. Creates nothing: a missing database, data
    directory or secret is reported, with what to do."""
    from export_center.doctor import check_lines, run_checks

    settings = Settings()
    places.announce(settings, what="doctor")
    checks = run_checks(settings)
    if as_json:
        print_json(checks)
    else:
        width = shutil.get_terminal_size((100, 24)).columns
        for check in checks:
            for line in check_lines(check, width):
                typer.echo(line)
    failed = [c.name for c in checks if not c.ok]
    if failed:
        if not as_json:
            many = "checks" if len(failed) > 1 else "check"
            typer.echo(f"\n{len(failed)} {many} failed: {', '.join(failed)}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the operator commands to the ``export-center`` command."""
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(outbox_app, name="outbox")
    app.add_typer(dlq_app, name="dlq")
    app.command("doctor")(doctor)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it as: export-center tasks|outbox|dlq|doctor")
