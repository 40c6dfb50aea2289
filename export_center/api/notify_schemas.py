"""Bodies and answers of the notification routes: the in-page list, a user's defaults
and webhook endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema

__all__ = [
    "NotifyTargets",
    "DeliveryAttemptPublic",
    "DeliveryPublic",
    "DeliveriesPublic",
    "NotificationPublic",
    "NotificationsPublic",
    "NotifyDefaultsBody",
    "NotifyDefaultsPublic",
    "RobotChoice",
    "WebhookCreate",
    "WebhookCreated",
    "WebhookPublic",
    "WebhookUpdate",
    "WebhooksPublic",
]

#: A ``notify`` list in a body: declared an array (or null) in the OpenAPI document, but
#: any JSON is let through to :func:`~export_center.notify.targets.parse_targets`, so a
#: wrong shape is ``INVALID_NOTIFY`` on ``notify`` like every other notify mistake.
NotifyTargets = Annotated[
    Any,
    WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}]}),
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
    enabled: StrictBool | None = Field(default=None, description="true or false")


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
    status: str = Field(
        description="pending, sending, delivered, dead or dropped (the endpoint was switched off)"
    )
    createdAt: datetime
    deliveredAt: datetime | None
    lastStatusCode: int | None
    lastError: str | None
    nextTryAt: datetime | None
    attempts: list[DeliveryAttemptPublic]


class DeliveriesPublic(BaseModel):
    """An endpoint's deliveries, newest first."""

    items: list[DeliveryPublic]


class NotifyDefaultsBody(BaseModel):
    """``PUT /api/v1/me/notification-defaults``: the targets an export or schedule of
    the caller uses when it names no ``notify`` (``[]``: tell nobody; null: forget the
    saved defaults and use the built-in one, the page)."""

    model_config = ConfigDict(extra="forbid")

    notify: NotifyTargets = Field(
        description="Notify targets, as in a create's notify",
        examples=[[{"channel": "page"}, {"channel": "email", "events": ["export.failed"]}]],
    )


class RobotChoice(BaseModel):
    """A chat robot an operator registered, which a target may name."""

    name: str
    channel: str = Field(description="feishu, dingtalk or wecom")


class NotifyDefaultsPublic(BaseModel):
    """The caller's notification defaults and what they may choose from."""

    notify: list[dict[str, Any]] | None = Field(
        description="The saved defaults; null when none are saved"
    )
    effective: list[dict[str, Any]] = Field(
        description="What an export that names no notify gets now"
    )
    email: str | None = Field(
        description="Where an e-mail target without 'to' goes (the token's email claim)"
    )
    emailConfigured: bool = Field(description="This export center can send e-mail")
    emailDomains: list[str] = Field(description="The domains e-mail may go to")
    robots: list[RobotChoice]
    events: list[str] = Field(description="Every event a target may ask for")
