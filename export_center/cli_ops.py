"""The operator commands: ``tasks``, ``outbox``, ``dlq`` and ``doctor``.

They run on the same settings as the service (``EXPORT_CENTER_*``), against SQLite or
MySQL/MariaDB, and never need SQL typed by hand. Each prints a readable table, or JSON
with ``--json``; lists are bounded by ``--limit``. ``tasks retry`` and ``tasks cancel``
follow the rules of the web API and are written to the audit trail as
``operator:<login>`` with the ``--reason`` given.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import UTC, datetime, timedelta
from enum import Enum
from functools import cached_property
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine

from export_center import operations
from export_center.api.admin_schemas import (
    AdminTask,
    CommandPublic,
    DeadLetterPublic,
    DeadLetterReportPublic,
    TaskReportPublic,
)
from export_center.errors import RequestError
from export_center.registry import Registry
from export_center.settings import Settings
from export_center.states import api_state
from export_center.storage import Storage

__all__ = ["dlq_app", "doctor", "outbox_app", "register", "tasks_app"]

_HELP = {"help_option_names": ["-h", "--help"]}


class _OperatorGroup(typer.core.TyperGroup):
    """Runs a command and turns a database error into one line that says what to do."""

    def invoke(self, ctx: Any) -> Any:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            return super().invoke(ctx)
        except SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
            typer.echo(
                f"database error: {reason}; run `export-center doctor` to see what is wrong",
                err=True,
            )
            raise typer.Exit(1) from None


tasks_app = typer.Typer(
    cls=_OperatorGroup,
    help="Export tasks: list, show, retry, cancel.",
    no_args_is_help=True,
    context_settings=_HELP,
)
outbox_app = typer.Typer(
    cls=_OperatorGroup, help="Commands not yet sent.", no_args_is_help=True, context_settings=_HELP
)
dlq_app = typer.Typer(
    cls=_OperatorGroup,
    help="Quarantined commands (the dead-letter queue).",
    no_args_is_help=True,
    context_settings=_HELP,
)
#: Tables are as wide as the terminal, and 200 columns when the output is not one.
out = Console(width=None if sys.stdout.isatty() else 200)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
LimitOption = Annotated[int, typer.Option(help="At most this many rows", min=1, max=1000)]
TenantOption = Annotated[str | None, typer.Option(help="Only this tenant")]


class _Context:
    """The database, registry and settings of the operator commands."""

    def __init__(self) -> None:
        self.settings = Settings()

    @cached_property
    def engine(self) -> Engine:
        from export_center.db import make_engine

        return make_engine(self.settings.resolved_database_url)

    @cached_property
    def registry(self) -> Registry:
        from export_center.registry import load_registry
        from export_center.runtime import default_registry_path

        return load_registry(
            self.settings.export_types_file or default_registry_path(),
            allowed_hosts=set(self.settings.provider_allowed_hosts),
            allow_self=self.settings.mount_sample_providers,
        )

    @cached_property
    def storage(self) -> Storage:
        from export_center.storage import open_storage

        return open_storage(self.settings)


def _plain(value: Any) -> Any:
    """JSON-able form of rows, dataclasses, datetimes and enums."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, Enum):
        return value.value
    return value


def _json(value: Any) -> None:
    """Print ``value`` as JSON; the admin API's bodies print as that API answers them."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
        value = [v.model_dump(mode="json") for v in value]
    typer.echo(json.dumps(_plain(value), ensure_ascii=False, indent=2))


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    if not rows:
        out.print(f"{title}: (none)")
        return
    table = Table(title=title, title_justify="left", show_header=any(columns))
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    out.print(table)


def _fail(exc: RequestError) -> typer.Exit:
    typer.echo(f"{exc.code}: {exc.message}", err=True)
    return typer.Exit(1)


@tasks_app.command("list")
def tasks_list(
    state: Annotated[
        list[str] | None, typer.Option(help="queued, running, succeeded, failed... (repeatable)")
    ] = None,
    export_type: Annotated[list[str] | None, typer.Option("--type", help="Export type")] = None,
    user: Annotated[str | None, typer.Option(help="Only this requester")] = None,
    tenant: TenantOption = None,
    since: Annotated[
        str | None, typer.Option(help="Requested since: 2024-12-01, or 2h, 3d ago")
    ] = None,
    limit: LimitOption = 20,
    as_json: JsonOption = False,
) -> None:
    """List tasks, newest first."""
    ctx = _Context()
    try:
        tasks = operations.list_tasks(
            ctx,
            states=state,
            export_types=export_type,
            user=user,
            tenant_id=tenant,
            since=_since(since),
            limit=limit,
        )
    except RequestError as exc:
        raise _fail(exc) from None
    if as_json:
        _json([AdminTask.of(t) for t in tasks])
        return
    _table(
        f"tasks ({len(tasks)})",
        ["task", "type", "fmt", "state", "phase", "rows", "tenant", "user", "requested", "error"],
        [
            [
                t.task_no,
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
    task: Annotated[str, typer.Argument(help="Task id (exp_...)")],
    as_json: JsonOption = False,
) -> None:
    """Show a task, its commands, its audit trail and its last failure."""
    ctx = _Context()
    try:
        report = operations.task_report(ctx, task)
    except RequestError as exc:
        raise _fail(exc) from None
    if as_json:
        _json(TaskReportPublic.of(report))
        return
    t = report.task
    facts = [
        ("task", t.task_no),
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
    _table(
        "commands (one per dispatch version)",
        ["version", "event id", "status", "sends", "created", "sent", "last error"],
        [
            [
                r.dispatch_version,
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


def _act(name: str, task: str, reason: str, tenant: str | None, *, fresh: bool = False) -> None:
    ctx = _Context()
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
        f"{again.task_no}: {api_state(again.status)} (dispatch version {again.dispatch_version}); "
        f"recorded in the audit trail as {operations.operator_actor()}"
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
    ),
]


@tasks_app.command("retry")
def tasks_retry(
    task: Annotated[str, typer.Argument(help="Task id (exp_...), FAILED")],
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
    task: Annotated[str, typer.Argument(help="Task id (exp_...), queued or running")],
    reason: ReasonOption,
    tenant: TenantOption = None,
) -> None:
    """Cancel a queued task at once, or stop a running one within 10 s."""
    _act("cancel", task, reason, tenant)


@outbox_app.command("list")
def outbox_list(
    stuck: Annotated[
        bool, typer.Option("--stuck", help="Only commands older than --stuck-seconds")
    ] = False,
    stuck_seconds: Annotated[float, typer.Option(help="Age that counts as stuck")] = 120.0,
    tenant: TenantOption = None,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Commands not yet sent (PENDING or CLAIMED), oldest first."""
    ctx = _Context()
    rows = operations.outbox(
        ctx, stuck_seconds=stuck_seconds if stuck else None, tenant_id=tenant, limit=limit
    )
    if as_json:
        _json([CommandPublic.of_entry(e) for e in rows])
        return
    _table(
        f"unsent commands ({len(rows)}{', stuck' if stuck else ''})",
        ["task", "version", "event id", "status", "sends", "age (s)", "next try", "last error"],
        [
            [
                e.task_no,
                e.row.dispatch_version,
                e.row.event_id,
                e.row.status.lower(),
                e.row.attempt_count,
                f"{e.age_seconds:,.0f}",
                _when(e.row.next_retry_at),
                e.row.last_error,
            ]
            for e in rows
        ],
    )


@dlq_app.command("list")
def dlq_list(
    tenant: TenantOption = None, limit: LimitOption = 50, as_json: JsonOption = False
) -> None:
    """Quarantined commands: why, which task and version, when."""
    ctx = _Context()
    letters = operations.dead_letters(ctx, tenant_id=tenant, limit=limit)
    if as_json:
        _json([DeadLetterPublic.of(d) for d in letters])
        return
    _table(
        f"quarantined commands ({len(letters)})",
        ["event id", "task", "version", "task state", "when", "reason"],
        [
            [
                d.entry.row.event_id,
                d.entry.task_no,
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
    event: Annotated[str, typer.Argument(help="Event id of the command")],
    as_json: JsonOption = False,
) -> None:
    """Show one command and every audit entry about it (broker message id, properties)."""
    ctx = _Context()
    try:
        entry, audit = operations.dead_letter(ctx, event)
    except RequestError as exc:
        raise _fail(exc) from None
    if as_json:
        _json(DeadLetterReportPublic.of(entry, audit))
        return
    r = entry.row
    _table(
        f"command {r.event_id}",
        ["", ""],
        [
            ["task", entry.task_no],
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
    clock; exit 1 when any check fails."""
    from export_center.doctor import run_checks

    checks = run_checks(Settings())
    if as_json:
        _json(checks)
    else:
        for check in checks:
            mark = "ok  " if check.ok else "FAIL"
            typer.echo(f"{mark} {check.name:24} {check.message}")
    failed = [c for c in checks if not c.ok]
    if failed:
        if not as_json:
            typer.echo(f"\n{len(failed)} check(s) failed", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the operator commands to the ``export-center`` command."""
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(outbox_app, name="outbox")
    app.add_typer(dlq_app, name="dlq")
    app.command("doctor")(doctor)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it as: export-center tasks|outbox|dlq|doctor")
