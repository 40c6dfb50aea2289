"""Bodies of the download audit, link revocation and trace routes (camelCase)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from export_center.download_ops import Traced
from export_center.repository import Task
from export_center.repository.downloads import DownloadRow

__all__ = [
    "DownloadPublic",
    "DownloadsPublic",
    "AdminRevokeBody",
    "RevokeBody",
    "RevokedPublic",
    "TraceBody",
    "TraceMatch",
    "TracePublic",
]


def _aware(value: datetime | str | None) -> datetime | None:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class DownloadPublic(BaseModel):
    """One recorded download answer."""

    at: datetime = Field(description="When (database clock, UTC)")
    user: str = Field(description="The link's bound user, or the bearer caller")
    clientAddress: str = Field(description="Client address (X-Forwarded-For of trusted proxies)")
    userAgent: str | None
    linkId: str | None = Field(description="The signed link's id (null: a link without id)")
    status: int = Field(description="The HTTP answer code")
    type: Literal["bearer", "link", "presigned"] = Field(
        description="bearer: the 307 to a signed link; link: the signed link's answer; "
        "presigned: the 307 to a presigned GET of the bucket"
    )
    range: str | None = Field(description="The Range header asked, if any")
    code: str | None = Field(description="The error code of a refusal")
    taskId: str

    @classmethod
    def of(cls, row: DownloadRow) -> DownloadPublic:
        """Present one ``export_download`` row."""
        at = _aware(row.at)
        assert at is not None
        return cls(
            at=at,
            user=row.user,
            clientAddress=row.client_address,
            userAgent=row.user_agent,
            linkId=row.link_id,
            status=row.status,
            type=row.kind,
            range=row.byte_range,
            code=row.code,
            taskId=row.task_no,
        )


class DownloadsPublic(BaseModel):
    """Download answers, newest first; ``nextBefore`` pages on (admin list)."""

    items: list[DownloadPublic]
    nextBefore: int | None = None


class RevokeBody(BaseModel):
    """Body of a revoke: one link (``linkId``), or none for every link of the task."""

    model_config = ConfigDict(extra="forbid")

    linkId: str | None = Field(
        None, max_length=64, description="The link's id (link= in its URL); none: every link"
    )
    reason: str | None = Field(None, max_length=500, description="Why, for the audit trail")


class AdminRevokeBody(RevokeBody):
    """Body of an admin revoke: the reason is required."""

    reason: str = Field(min_length=3, max_length=500, description="Why, for the audit trail")


class RevokedPublic(BaseModel):
    """What a revoke did."""

    taskId: str
    linkId: str | None
    scope: Literal["link", "all"]


class TraceBody(BaseModel):
    """Body of a trace by hash."""

    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(max_length=64, description="SHA-256 of the file, 64 hex digits")


class TraceMatch(BaseModel):
    """A task that produced the file."""

    taskId: str
    requester: str
    tenantId: str
    exportType: str
    requestedAt: datetime | None
    fileName: str
    kind: Literal["file", "archive"]
    downloads: list[DownloadPublic]

    @classmethod
    def of(cls, traced: Traced) -> TraceMatch:
        """Present one traced task."""
        task: Task = traced.task
        return cls(
            taskId=task.task_no,
            requester=task.requested_by,
            tenantId=task.tenant_id,
            exportType=task.export_type,
            requestedAt=_aware(task.requested_at),
            fileName=traced.file_name,
            kind=traced.kind,
            downloads=[DownloadPublic.of(r) for r in traced.downloads],
        )


class TracePublic(BaseModel):
    """What a trace found: ``known`` false (and no matches) for bytes no task produced."""

    sha256: str
    known: bool
    matches: list[TraceMatch]
