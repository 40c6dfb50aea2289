"""The bodies of the quota routes (``/api/v1/me/quota``, ``/api/v1/admin/quotas``),
shared with the CLI (``export-center quotas``), and :func:`tenant_report`, the one
answer both give about a tenant or a user."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection

from export_center import quotas
from export_center.auth import USER_ID_MAX_LENGTH
from export_center.repository import quotas as qrepo
from export_center.settings import Settings

__all__ = [
    "MAX_QUOTA",
    "OverridePublic",
    "QuotaBody",
    "QuotaFigure",
    "QuotaPublic",
    "TenantQuotaPublic",
    "quota_public",
    "tenant_report",
]

#: The largest limit an override may name (rows of a day: far above any real export).
MAX_QUOTA = 10**15


class QuotaFigure(BaseModel):
    """One daily quota: ``used`` of ``limit``, ``remaining``; limit and remaining are
    null when there is no limit; ``resetsAt`` is the next day boundary (ISO 8601 with
    the offset of the quota's time zone)."""

    used: int
    limit: int | None
    remaining: int | None
    resetsAt: str


class QuotaPublic(BaseModel):
    """What is left today: exports created (``tasks``) and rows exported (``rows``)."""

    tasks: QuotaFigure
    rows: QuotaFigure


class QuotaBody(BaseModel):
    """An override: the per-day limits of a tenant (no ``user``: the tenant's totals) or
    of one user of it. A null limit keeps the setting's default; 0 allows nothing."""

    model_config = ConfigDict(extra="forbid")

    user: str | None = Field(None, min_length=1, max_length=USER_ID_MAX_LENGTH)
    tasksPerDay: int | None = Field(None, ge=0, le=MAX_QUOTA)
    rowsPerDay: int | None = Field(None, ge=0, le=MAX_QUOTA)
    reason: str = Field(min_length=3, max_length=500, description="Why, for the audit trail")


class OverridePublic(BaseModel):
    """An override as stored (``user`` null: the tenant's row)."""

    tenant: str
    user: str | None
    tasksPerDay: int | None
    rowsPerDay: int | None
    updatedBy: str
    updatedAt: str


class TenantQuotaPublic(BaseModel):
    """A tenant's (or one of its users') overrides and figures today."""

    tenant: str
    user: str | None
    tenantOverride: OverridePublic | None
    userOverride: OverridePublic | None
    quota: QuotaPublic


def quota_public(status: quotas.QuotaStatus) -> QuotaPublic:
    return QuotaPublic.model_validate(status.to_json())


def override_public(found: qrepo.Override | None) -> OverridePublic | None:
    return None if found is None else OverridePublic.model_validate(found.to_json())


def tenant_report(
    conn: Connection, settings: Settings, tenant: str, member: str | None
) -> TenantQuotaPublic:
    """A tenant's overrides and today's figures: the tenant's totals, or with ``member``
    that user's (the stricter of user and tenant, as ``/me/quota``)."""
    of_tenant, of_user = qrepo.overrides_of(conn, tenant, member or "")
    return TenantQuotaPublic(
        tenant=tenant,
        user=member,
        tenantOverride=override_public(of_tenant),
        userOverride=override_public(of_user),
        quota=quota_public(quotas.status_of(conn, settings, tenant, member)),
    )
