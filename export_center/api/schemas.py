"""Request and response bodies of the public API (JSON, camelCase)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ErrorBody",
    "ExportAccepted",
    "ExportCreate",
    "ExportPublic",
    "ExportTypePublic",
    "ExportsPublic",
    "LegacyOrderExport",
    "TaskError",
]


class ExportCreate(BaseModel):
    """Body of ``POST /api/v1/exports``."""

    model_config = ConfigDict(extra="forbid")

    exportType: str = Field(min_length=1, max_length=64, description="Registered export type")
    format: str = Field(description="csv or xlsx")
    taskName: str | None = Field(default=None, max_length=100, description="Shown in the download center")
    parameters: dict[str, Any] = Field(default_factory=dict, description="Filters of the export type")
    requestId: str | None = Field(
        default=None, min_length=1, max_length=128, description="Idempotency key"
    )
    timeZone: str | None = Field(
        default=None,
        max_length=64,
        description="IANA time zone the file's date-times are written in "
        "(default: the deployment's)",
    )


class LegacyOrderExport(BaseModel):
    """Body of ``POST /api/orders/export`` (seed 000 shape, an alias of ORDERS)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    requestId: str | None = Field(default=None, min_length=1, max_length=128)
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
    format: str = "csv"


class ExportAccepted(BaseModel):
    """Answer to a create: where to watch progress."""

    taskId: str
    state: str
    progressUrl: str


class TaskError(BaseModel):
    """Why an attempt failed."""

    code: str | None
    message: str


class ExportPublic(BaseModel):
    """One task as the download center shows it."""

    taskId: str
    exportType: str
    format: str
    taskName: str
    timeZone: str
    state: str
    phase: str
    processed: int
    total: int | None
    attempts: int
    requestedAt: datetime | None
    startedAt: datetime | None
    finishedAt: datetime | None
    expiresAt: datetime | None
    error: TaskError | None
    warning: str | None = None
    downloadUrl: str | None
    fileName: str | None
    sizeBytes: int | None


class ExportsPublic(BaseModel):
    """A page of tasks, newest first."""

    items: list[ExportPublic]
    nextCursor: str | None


class ExportTypePublic(BaseModel):
    """An export type the caller may use."""

    exportType: str
    title: str
    formats: list[str]
    parameters: list[dict[str, Any]]


class ErrorBody(BaseModel):
    """Every 4xx answer: a machine-readable code, the field when one is at fault, a sentence."""

    code: str
    message: str
    field: str | None = None
