"""``export-center quotas``: read a tenant's (or a user's) daily quota and usage, list
the overrides, set or clear an override. The rule is :mod:`export_center.quotas`; the
answers are the admin API's (``/api/v1/admin/quotas``) and every change is written to
the audit trail as ``operator:<login>`` with the ``--reason`` given.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from export_center import operations
from export_center.api.quota_schemas import (
    MAX_QUOTA,
    OverridePublic,
    TenantQuotaPublic,
    tenant_report,
)
from export_center.auth import TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH
from export_center.cli_ops import JsonOption, ReasonOption, _Context, _group
from export_center.db import reading
from export_center.repository import quotas as qrepo
from export_center.settings_quotas import QuotaSettings
from export_center.terminal import console, print_json, print_table, visible

__all__ = ["quotas_app"]

quotas_app = _group("Daily quotas: usage, overrides per tenant or user.")
out = console()


def _bounded(limit: int, what: str) -> Any:
    def check(value: str) -> str:
        if not 0 < len(value) <= limit:
            raise typer.BadParameter(f"{what} must have 1 to {limit} characters")
        return value

    return check


TenantArg = Annotated[
    str,
    typer.Option(
        "--tenant",
        help="The tenant",
        metavar="TENANT",
        callback=_bounded(TENANT_ID_MAX_LENGTH, "--tenant"),
    ),
]
UserOption = Annotated[
    str | None,
    typer.Option(
        "--user", metavar="USER", help="One user of the tenant (default: the tenant as a whole)"
    ),
]
LimitArg = Annotated[
    int | None,
    typer.Option(min=0, max=MAX_QUOTA, metavar="N", help="Per day; unset: the setting's default"),
]


def _limit(value: int | None) -> str:
    return "no limit" if value is None else f"{value:,}"


def _defaults_note(quotas: QuotaSettings) -> str:
    """Where the default limits come from: this command's settings, which must be the
    API's for the figures to be the API's (a default unset here says "no limit")."""
    named = ", ".join(
        f"EXPORT_CENTER_QUOTAS__{name.upper()}={_limit(getattr(quotas, name))}"
        for name in QuotaSettings.model_fields
    )
    return (
        f"defaults (read by this command, not from the API): {named}; run it with the "
        "API's environment, or the limits shown are not the ones the API applies"
    )


def _show(report: TenantQuotaPublic, quotas: QuotaSettings) -> None:
    who = report.tenant + (f" / {report.user}" if report.user else "")
    rows = []
    for name, fig in (("exports", report.quota.tasks), ("rows", report.quota.rows)):
        rows.append([name, f"{fig.used:,}", _limit(fig.limit), _limit(fig.remaining), fig.resetsAt])
    print_table(out, f"quota of {who} today", ["", "used", "limit", "left", "resets at"], rows)
    overrides = [o for o in (report.tenantOverride, report.userOverride) if o is not None]
    _overrides(overrides)
    out.print(Text(visible(_defaults_note(quotas))))


def _overrides(found: list[OverridePublic]) -> None:
    print_table(
        out,
        "overrides",
        ["tenant", "user", "exports/day", "rows/day", "set by", "at"],
        [
            [
                o.tenant,
                o.user or "(tenant)",
                _limit(o.tasksPerDay) if o.tasksPerDay is not None else "default",
                _limit(o.rowsPerDay) if o.rowsPerDay is not None else "default",
                o.updatedBy,
                o.updatedAt,
            ]
            for o in found
        ],
    )


def _user(user: str | None) -> str | None:
    if user is not None and not 0 < len(user) <= USER_ID_MAX_LENGTH:
        raise typer.BadParameter(f"--user must have 1 to {USER_ID_MAX_LENGTH} characters")
    return user


@quotas_app.command("show")
def quotas_show(tenant: TenantArg, user: UserOption = None, as_json: JsonOption = False) -> None:
    """Today's usage and limits of a tenant (or of one user: the stricter of user and
    tenant), and the overrides that apply."""
    ctx = _Context("quotas show")
    with reading(ctx.engine) as conn:
        report = tenant_report(conn, ctx.settings, tenant, _user(user))
    if as_json:
        print_json(report)
    else:
        _show(report, ctx.settings.quotas)


@quotas_app.command("list")
def quotas_list(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant", metavar="TENANT")] = None,
    as_json: JsonOption = False,
) -> None:
    """Every quota override (of one tenant with --tenant)."""
    ctx = _Context("quotas list")
    with reading(ctx.engine) as conn:
        found = [
            OverridePublic.model_validate(o.to_json())
            for o in qrepo.list_overrides(conn, tenant, limit=1000)
        ]
    if as_json:
        print_json(found)
    else:
        _overrides(found)


@quotas_app.command("set")
def quotas_set(
    tenant: TenantArg,
    reason: ReasonOption,
    user: UserOption = None,
    tasks_per_day: LimitArg = None,
    rows_per_day: LimitArg = None,
    as_json: JsonOption = False,
) -> None:
    """Set the override of a tenant (its totals) or of one user; it replaces any earlier
    one. A limit left out keeps the setting's default."""
    ctx = _Context("quotas set")
    actor = operations.operator_actor()
    with ctx.engine.begin() as conn:
        qrepo.set_override(
            conn,
            tenant_id=tenant,
            user_id=_user(user) or "",
            tasks_per_day=tasks_per_day,
            rows_per_day=rows_per_day,
            actor=actor,
            reason=reason,
        )
    with reading(ctx.engine) as conn:
        report = tenant_report(conn, ctx.settings, tenant, user)
    if as_json:
        print_json(report)
        return
    _show(report, ctx.settings.quotas)
    typer.echo(visible(f"recorded in the audit trail as {actor}"))


@quotas_app.command("clear")
def quotas_clear(tenant: TenantArg, reason: ReasonOption, user: UserOption = None) -> None:
    """Remove the override of a tenant or of one user: the settings' defaults apply again."""
    ctx = _Context("quotas clear")
    actor = operations.operator_actor()
    with ctx.engine.begin() as conn:
        removed = qrepo.clear_override(
            conn, tenant_id=tenant, user_id=_user(user) or "", actor=actor, reason=reason
        )
    who = tenant + (f" / {user}" if user else "")
    if removed is None:
        typer.echo(visible(f"{who} has no override; nothing changed"), err=True)
        raise typer.Exit(1)
    typer.echo(visible(f"cleared the override of {who}; recorded in the audit trail as {actor}"))
