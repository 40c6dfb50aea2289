"""Daily quotas in the API: ``GET /api/v1/me/quota`` (what is left to the caller today),
and ``/api/v1/admin/quotas`` (platform operators read and set overrides per tenant or
per user; tenant admins read their own tenant's). The rule is
:mod:`export_center.quotas`; every override change is written to the audit trail with
the caller and the reason given.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from export_center import quotas
from export_center.api import service
from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, BODY, errors
from export_center.api.quota_schemas import (
    OverridePublic,
    QuotaBody,
    QuotaPublic,
    TenantQuotaPublic,
    quota_public,
    tenant_report,
)
from export_center.auth import ADMIN, OPERATOR, TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH, Identity
from export_center.db import reading
from export_center.errors import Forbidden
from export_center.repository import quotas as qrepo

__all__ = ["router"]

router = APIRouter(tags=["quotas"], dependencies=[Depends(strict_query)])

_ADMIN = {403: ["PERMISSION_DENIED"]}
TenantPath = Annotated[str, Path(min_length=1, max_length=TENANT_ID_MAX_LENGTH)]
_BODY = {422: ["MISSING_FIELD", "UNKNOWN_FIELD", "TOO_SHORT", "TOO_LONG", "INVALID_TYPE"]}


@router.get("/api/v1/me/quota", response_model=QuotaPublic, responses=errors(AUTH))
def my_quota(user: CurrentUser, runtime: RuntimeDep) -> QuotaPublic:
    """What the caller may still export today. ``tasks``: exports created; ``rows``: rows
    written by the caller's exports that succeeded today. Each figure is the stricter of
    the caller's own quota and the tenant's: the one with fewer ``remaining`` (its
    ``used`` and ``limit`` are shown); ``limit`` and ``remaining`` are null when neither
    is limited (``used`` is then the caller's). The day is the calendar day in the export
    time zone; ``resetsAt`` is its end."""
    with reading(runtime.engine) as conn:
        return quota_public(quotas.status_of(conn, runtime.settings, user.tenant, user.user))


def _reader(user: Identity, tenant: str) -> None:
    if not user.can(ADMIN):
        raise Forbidden("this needs the admin permission", code="PERMISSION_DENIED")
    if tenant != user.tenant and not user.can(OPERATOR):
        raise Forbidden(
            "only platform operators (platform:operator) see other tenants",
            code="PERMISSION_DENIED",
        )


def _writer(user: Identity) -> None:
    if not (user.can(ADMIN) and user.can(OPERATOR)):
        raise Forbidden(
            "only platform operators (platform:export:admin and platform:operator) set quotas",
            code="PERMISSION_DENIED",
        )


@router.get(
    "/api/v1/admin/quotas",
    response_model=list[OverridePublic],
    responses=errors(AUTH, _ADMIN),
    tags=["admin"],
)
def list_overrides(
    user: CurrentUser,
    runtime: RuntimeDep,
    tenant: Annotated[
        str | None, Query(max_length=TENANT_ID_MAX_LENGTH, description="platform operators")
    ] = None,
) -> list[OverridePublic]:
    """The quota overrides of the admin's tenant (any tenant, or all, for operators)."""
    scope = tenant or user.tenant
    _reader(user, scope)
    with reading(runtime.engine) as conn:
        found = qrepo.list_overrides(conn, tenant if user.can(OPERATOR) else user.tenant)
    return [OverridePublic.model_validate(o.to_json()) for o in found]


def _tenant_quota(runtime: RuntimeDep, tenant: str, member: str | None) -> TenantQuotaPublic:
    with reading(runtime.engine) as conn:
        return tenant_report(conn, runtime.settings, tenant, member)


@router.get(
    "/api/v1/admin/quotas/{tenant}",
    response_model=TenantQuotaPublic,
    responses=errors(AUTH, _ADMIN),
    tags=["admin"],
)
def tenant_quota(
    tenant: TenantPath,
    user: CurrentUser,
    runtime: RuntimeDep,
    member: Annotated[
        str | None,
        Query(alias="user", max_length=USER_ID_MAX_LENGTH, description="one user's figures"),
    ] = None,
) -> TenantQuotaPublic:
    """A tenant's overrides and today's figures: the tenant's totals, or with ``user``
    that user's figures (the stricter of user and tenant, as ``/me/quota``)."""
    _reader(user, tenant)
    return _tenant_quota(runtime, tenant, member)


@router.put(
    "/api/v1/admin/quotas/{tenant}",
    response_model=TenantQuotaPublic,
    responses=errors(BODY, AUTH, _ADMIN, _BODY, {422: ["INVALID_VALUE"]}),
    tags=["admin"],
)
def set_quota(
    tenant: TenantPath, body: QuotaBody, user: CurrentUser, runtime: RuntimeDep
) -> TenantQuotaPublic:
    """Set the override of a tenant (no ``user``) or of one user (platform operators);
    it replaces any earlier one and applies to the next create. Audited."""
    _writer(user)
    with runtime.engine.begin() as conn:
        qrepo.set_override(
            conn,
            tenant_id=tenant,
            user_id=body.user or "",
            tasks_per_day=body.tasksPerDay,
            rows_per_day=body.rowsPerDay,
            actor=service.actor_of(user),
            reason=body.reason,
        )
    return _tenant_quota(runtime, tenant, body.user)


@router.delete(
    "/api/v1/admin/quotas/{tenant}",
    response_model=TenantQuotaPublic,
    responses=errors(AUTH, _ADMIN, {422: ["TOO_SHORT", "TOO_LONG"]}),
    tags=["admin"],
)
def clear_quota(
    tenant: TenantPath,
    user: CurrentUser,
    runtime: RuntimeDep,
    reason: Annotated[str, Query(min_length=3, max_length=500, description="why (audited)")],
    member: Annotated[
        str | None, Query(alias="user", min_length=1, max_length=USER_ID_MAX_LENGTH)
    ] = None,
) -> TenantQuotaPublic:
    """Remove the override of a tenant (no ``user``) or of one user (platform
    operators): the settings' defaults apply again. Audited (nothing to remove: no row)."""
    _writer(user)
    with runtime.engine.begin() as conn:
        qrepo.clear_override(
            conn,
            tenant_id=tenant,
            user_id=member or "",
            actor=service.actor_of(user),
            reason=reason,
        )
    return _tenant_quota(runtime, tenant, member)
