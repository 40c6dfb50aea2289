"""SQLAlchemy models of schedules and notifications (migration 0011).

Same rules as :mod:`export_center.models` (whose :class:`~export_center.models.Base`
they share): times are ``DATETIME(3)`` UTC written by the database clock, identity and
key columns compare byte for byte (:class:`~export_center.db.ExactString`).

* ``export_schedule``: a saved export definition (the create body without
  ``requestId``) with a cron expression, an IANA time zone and an optional relative
  window; ``next_fire_at`` (UTC) is the next fire time, ``NULL`` once the schedule has
  ended. A scheduler pass claims due rows with a lease on the database clock.
* ``export_schedule_run``: one row per fire (coalesced fires make one row that counts
  the fires it stands for); unique per (schedule, fire time).
* ``export_principal``: what the service last saw of a user's token (app, permissions,
  e-mail, language) and the user's notification defaults, so that a schedule can check
  its owner's permission when it fires and a notification can reach the user.
* ``export_notification``: the notification outbox. One row per event and target,
  written in the transaction of the change it announces; a notifier pass delivers it
  with a lease, retries with back-off and ends it ``SENT`` or ``DEAD``. The ``page``
  channel's rows are the in-page notification list (``read_at``).
* ``export_delivery_attempt``: append-only, one row per delivery attempt of a
  notification (answer code, error, duration): the delivery history.
* ``export_webhook_endpoint``: a tenant's webhook endpoint: URL, events, secret and the
  previous secret during a rotation.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from export_center.auth import APP_CODE_MAX_LENGTH, TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH
from export_center.db import ExactString
from export_center.model_base import Base, BigId, Ts

__all__ = [
    "ExportDeliveryAttempt",
    "ExportNotification",
    "ExportPrincipal",
    "ExportSchedule",
    "ExportScheduleRun",
    "ExportWebhookEndpoint",
]


class ExportSchedule(Base):
    """A saved export definition that fires on a cron schedule in a time zone."""

    __tablename__ = "export_schedule"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    app_code: Mapped[str] = mapped_column(ExactString(APP_CODE_MAX_LENGTH), nullable=False)
    owner: Mapped[str] = mapped_column(ExactString(USER_ID_MAX_LENGTH), nullable=False)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    export_type: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    # The create body of the export, without requestId (canonical JSON).
    export_json: Mapped[str] = mapped_column(Text, nullable=False)
    cron: Mapped[str] = mapped_column(String(120), nullable=False)
    time_zone: Mapped[str] = mapped_column(String(64), nullable=False)
    # "previous_day", ..., or {"lastNDays": N} as JSON; NULL: no window.
    window_json: Mapped[str | None] = mapped_column(String(200))
    start_at: Mapped[datetime | None] = mapped_column(Ts)
    end_at: Mapped[datetime | None] = mapped_column(Ts)
    # The notify list of the schedule's runs (JSON), NULL: none.
    notify_json: Mapped[str | None] = mapped_column(Text)
    # ACTIVE | PAUSED | ENDED
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    pause_reason: Mapped[str | None] = mapped_column(String(1000))
    next_fire_at: Mapped[datetime | None] = mapped_column(Ts)
    lease_owner: Mapped[str | None] = mapped_column(ExactString(128))
    lease_until: Mapped[datetime | None] = mapped_column(Ts)
    # Grows at every change (update, pause, resume, fire): fences concurrent writers.
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    created_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    deleted_at: Mapped[datetime | None] = mapped_column(Ts)

    __table_args__ = (
        Index("ix_export_schedule_due", "status", "next_fire_at", "id"),
        Index("ix_export_schedule_owner", "tenant_id", "owner", "id"),
    )


class ExportScheduleRun(Base):
    """One fire of a schedule (or several missed fires coalesced into one run)."""

    __tablename__ = "export_schedule_run"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    schedule_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    # The scheduled instant (UTC) the run stands for: the latest one when coalesced.
    fire_time: Mapped[datetime] = mapped_column(Ts, nullable=False)
    fired_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    # Fires this run stands for (1, or more when missed fires were coalesced).
    fires: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    manual: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    task_id: Mapped[int | None] = mapped_column(BigInteger)
    # CREATED | FAILED (no task: permission lost, limit, bad definition)
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    window_from: Mapped[str | None] = mapped_column(String(40))
    window_to: Mapped[str | None] = mapped_column(String(40))
    failure_code: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(String(1000))

    __table_args__ = (
        UniqueConstraint("schedule_id", "fire_time"),
        Index("ix_export_schedule_run_schedule", "schedule_id", "id"),
    )


class ExportPrincipal(Base):
    """What the service last saw of a user: the token's claims and the user's defaults."""

    __tablename__ = "export_principal"

    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), primary_key=True)
    user_id: Mapped[str] = mapped_column(ExactString(USER_ID_MAX_LENGTH), primary_key=True)
    app_code: Mapped[str] = mapped_column(ExactString(APP_CODE_MAX_LENGTH), nullable=False)
    permissions_json: Mapped[str] = mapped_column(Text, nullable=False)
    email: Mapped[str | None] = mapped_column(String(320))
    language: Mapped[str | None] = mapped_column(String(16))
    # The user's notification defaults (JSON list of targets), NULL: in the page only.
    notify_defaults_json: Mapped[str | None] = mapped_column(Text)
    seen_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)


class ExportNotification(Base):
    """One event for one target: the notification outbox row."""

    __tablename__ = "export_notification"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    # The event's id: the same for every target of one event, and for every delivery.
    event_id: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    # export.succeeded | export.failed | export.cancelled | export.expiring | schedule.paused
    event_type: Mapped[str] = mapped_column(String(32), nullable=False)
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    # The user the event is about (a task's owner); the page channel's reader.
    user_id: Mapped[str | None] = mapped_column(ExactString(USER_ID_MAX_LENGTH))
    task_id: Mapped[int | None] = mapped_column(BigInteger)
    schedule_id: Mapped[int | None] = mapped_column(BigInteger)
    # page | webhook | email | feishu | dingtalk | wecom
    channel: Mapped[str] = mapped_column(String(16), nullable=False)
    # The channel's address: a user id, an endpoint id, an e-mail address, a robot name.
    target: Mapped[str] = mapped_column(ExactString(512), nullable=False)
    payload_json: Mapped[str] = mapped_column(Text, nullable=False)
    # PENDING | CLAIMED | SENT | DEAD
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    attempt_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_retry_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    lease_owner: Mapped[str | None] = mapped_column(ExactString(128))
    lease_until: Mapped[datetime | None] = mapped_column(Ts)
    sent_at: Mapped[datetime | None] = mapped_column(Ts)
    dead_at: Mapped[datetime | None] = mapped_column(Ts)
    read_at: Mapped[datetime | None] = mapped_column(Ts)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)

    __table_args__ = (
        UniqueConstraint("event_id", "channel", "target"),
        Index("ix_export_notification_deliver", "status", "next_retry_at", "id"),
        Index("ix_export_notification_inbox", "tenant_id", "user_id", "channel", "id"),
        Index("ix_export_notification_target", "channel", "target", "id"),
    )


class ExportDeliveryAttempt(Base):
    """One delivery attempt of a notification: append-only."""

    __tablename__ = "export_delivery_attempt"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    notification_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    attempt_no: Mapped[int] = mapped_column(Integer, nullable=False)
    attempted_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(1000))
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    manual: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)

    __table_args__ = (Index("ix_export_delivery_attempt_notification", "notification_id", "id"),)


class ExportWebhookEndpoint(Base):
    """A tenant's webhook endpoint and its signing secrets."""

    __tablename__ = "export_webhook_endpoint"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    public_id: Mapped[str] = mapped_column(ExactString(40), nullable=False, unique=True)
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    url: Mapped[str] = mapped_column(String(2048), nullable=False)
    events_json: Mapped[str] = mapped_column(Text, nullable=False)
    description: Mapped[str | None] = mapped_column(String(500))
    secret: Mapped[str] = mapped_column(ExactString(128), nullable=False)
    previous_secret: Mapped[str | None] = mapped_column(ExactString(128))
    previous_secret_until: Mapped[datetime | None] = mapped_column(Ts)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    created_by: Mapped[str] = mapped_column(ExactString(USER_ID_MAX_LENGTH), nullable=False)
    created_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    deleted_at: Mapped[datetime | None] = mapped_column(Ts)

    __table_args__ = (Index("ix_export_webhook_endpoint_tenant", "tenant_id", "id"),)
