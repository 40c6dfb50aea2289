"""Bodies and answers of the notification routes: the in-page list and webhook endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DeliveryAttemptPublic",
    "DeliveryPublic",
    "DeliveriesPublic",
    "NotificationPublic",
    "NotificationsPublic",
    "WebhookCreate",
    "WebhookCreated",
    "WebhookPublic",
    "WebhookUpdate",
    "WebhooksPublic",
]


class NotificationPublic(BaseModel):
    """One in-page notification."""

    id: str
    type: str = Field(description="export.succeeded, export.failed, ... schedule.paused")
    createdAt: datetime
    read: bool
    taskId: str | None
    state: str | None = Field(description="The task's state when the event happened")
    exportType: str | None
    taskName: str | None
    scheduleId: int | None
    message: str = Field(description="One sentence in English")
    messageZh: str = Field(description="The same sentence in Chinese")


class NotificationsPublic(BaseModel):
    """The caller's in-page notifications, newest first."""

    items: list[NotificationPublic]
    unreadCount: int
    nextBefore: str | None = Field(
        description="Pass as ?before= for the next (older) page; None: no more"
    )


class WebhookCreate(BaseModel):
    """Body of ``POST /api/v1/webhook-endpoints``."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=2048, description="https:// URL on an allowed host")
    events: list[str] = Field(description="Event types to receive")
    description: str | None = Field(default=None, max_length=500)


class WebhookUpdate(BaseModel):
    """Body of ``PATCH /api/v1/webhook-endpoints/{id}``: the fields to change."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, max_length=2048)
    events: list[str] | None = None
    description: str | None = Field(default=None, max_length=500)
    enabled: bool | None = None


class WebhookPublic(BaseModel):
    """A webhook endpoint (never its secret)."""

    id: str
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    createdBy: str
    createdAt: datetime
    updatedAt: datetime
    previousSecretValidUntil: datetime | None = Field(
        description="While set and ahead, deliveries are signed with the old secret too"
    )


class WebhookCreated(WebhookPublic):
    """A new (or newly rotated) endpoint with its secret: shown only in this answer."""

    secret: str


class WebhooksPublic(BaseModel):
    """The tenant's webhook endpoints."""

    items: list[WebhookPublic]


class DeliveryAttemptPublic(BaseModel):
    """One try of a delivery."""

    attempt: int
    at: datetime
    statusCode: int | None
    error: str | None
    durationMs: int | None


class DeliveryPublic(BaseModel):
    """One event sent (or being sent) to an endpoint."""

    id: str
    eventId: str
    type: str
    status: str = Field(description="pending, sending, delivered or dead")
    createdAt: datetime
    deliveredAt: datetime | None
    lastStatusCode: int | None
    lastError: str | None
    nextTryAt: datetime | None
    attempts: list[DeliveryAttemptPublic]


class DeliveriesPublic(BaseModel):
    """An endpoint's deliveries, newest first."""

    items: list[DeliveryPublic]
