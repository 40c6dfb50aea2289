"""The settings groups of schedules and notifications.

``EXPORT_CENTER_SCHEDULER__*`` (the scheduler loop) and ``EXPORT_CENTER_NOTIFY__*``
(the notifier loop and its channels: webhooks, e-mail over SMTP, chat robots).
:mod:`export_center.settings` assembles them into
:class:`~export_center.settings.Settings` and re-exports them.

List settings given in the environment are comma-separated
(``EXPORT_CENTER_NOTIFY__WEBHOOK_ALLOWED_HOSTS=hooks.example.com,127.0.0.1:9000``);
a JSON list is accepted too.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from export_center.auth import language_of
from export_center.settings_groups import LoopSettings

__all__ = ["NotifySettings", "RobotSettings", "RouteSettings", "SchedulerSettings"]


def _comma_list(value: Any) -> Any:
    """A comma-separated string (or a JSON list in a string) as a list of stripped,
    non-empty items; anything else unchanged (pydantic checks it)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [item.strip() for item in text.split(",") if item.strip()]
    return value


def _json_value(value: Any, empty: Any) -> Any:
    """A JSON text (from the environment) decoded, ``empty`` for a blank one; anything
    else unchanged."""
    if isinstance(value, str):
        text = value.strip()
        return json.loads(text) if text else empty
    return value


class SchedulerSettings(LoopSettings):
    """The scheduler loop: claims due schedules and fires them."""

    enabled: bool | None = Field(
        None, description="Run the scheduler loop here; unset: on, except in production"
    )
    loop_seconds: float = Field(5.0, gt=0, description="Seconds between two scheduler passes")
    lease_seconds: int = Field(
        60, gt=0, description="Lease of a claimed schedule (far above one fire)"
    )
    batch_size: int = Field(20, gt=0, description="Due schedules claimed per pass")


class RobotSettings(BaseModel):
    """A chat robot an operator registered: a group's webhook URL and signing secret."""

    kind: Literal["feishu", "dingtalk", "wecom"] = Field(description="The robot's platform")
    url: str = Field(description="The robot's webhook URL, as the platform gives it")
    secret: SecretStr | None = Field(
        None, description="Signing secret (Feishu/Lark and DingTalk 'sign' security setting)"
    )
    language: Literal["en", "zh"] = Field(
        "zh", description="Language of its messages: zh (also zh-CN, zh-Hans) or en (en-US)"
    )

    @field_validator("language", mode="before")
    @classmethod
    def _language_tag(cls, value: Any) -> Any:
        """A BCP 47 tag of Chinese or English (``zh-CN``, ``en-US``) is its language."""
        return language_of(value) or value


class RouteSettings(BaseModel):
    """An operator's rule: events of an export type (or every type) go to a robot."""

    event: str = Field(description="Event type, e.g. export.failed")
    export_type: str | None = Field(None, description="Export type code; unset: every type")
    robot: str = Field(description="Name of a robot in notify.robots")


class NotifySettings(LoopSettings):
    """The notifier loop and its channels."""

    enabled: bool | None = Field(
        None, description="Run the notifier loop here; unset: on, except in production"
    )
    loop_seconds: float = Field(1.0, gt=0, description="Seconds between two notifier passes")
    lease_seconds: int = Field(
        60, gt=0, description="Lease of a claimed notification (far above one delivery)"
    )
    batch_size: int = Field(50, gt=0, description="Notifications claimed per pass")
    concurrency: int = Field(
        8,
        gt=0,
        le=64,
        description="Deliveries under way at once",
    )
    concurrency_per_target: int = Field(
        2,
        gt=0,
        le=64,
        description="Deliveries under way at once to one endpoint, address or robot",
    )
    backoff_seconds: list[float] = Field(
        default_factory=lambda: [5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0],
        description="Wait after failed delivery n (the last repeats)",
    )
    max_age_hours: float = Field(
        24.0,
        gt=0,
        description="A notification not delivered this long after it was written is marked dead",
    )
    send_timeout_seconds: float = Field(10.0, gt=0, description="Timeout of one delivery")
    expiring_notice_hours: float = Field(
        24.0, gt=0, description="export.expiring is sent this long before a file's retention ends"
    )
    webhook_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Hosts a webhook endpoint URL may name (host or host:port, comma-separated)",
    )
    webhook_allow_http_loopback: bool = Field(
        True,
        description="Accept plain http:// for listed loopback hosts (127.0.0.1, ::1, "
        "localhost); every other endpoint must be https://",
    )
    webhook_rotation_hours: float = Field(
        24.0, gt=0, description="How long a rotated-out webhook secret still signs deliveries"
    )
    smtp_host: str | None = Field(None, description="SMTP server; unset: no e-mail channel")
    smtp_port: int = Field(587, description="SMTP port")
    smtp_tls: Literal["none", "starttls", "tls"] = Field(
        "starttls", description="none, STARTTLS after connecting, or TLS from the start"
    )
    smtp_ca_file: str | None = Field(
        None,
        description="PEM file of the CA that signed the SMTP server's certificate; "
        "unset: the system's CAs",
    )
    smtp_username: str | None = Field(None, description="SMTP login; unset: no login")
    smtp_password: SecretStr | None = Field(None, description="SMTP password")
    mail_from: str = Field("export-center@localhost", description="The From address")
    email_allowed_domains: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Recipient domains e-mail may go to (comma-separated); empty: none",
    )
    robots: Annotated[dict[str, RobotSettings], NoDecode] = Field(
        default_factory=dict,
        description="Chat robots by name (JSON object: name -> {kind, url, secret, language})",
    )
    routes: Annotated[list[RouteSettings], NoDecode] = Field(
        default_factory=list,
        description="Operator routes (JSON list of {event, export_type?, robot})",
    )

    @field_validator("webhook_allowed_hosts", "email_allowed_domains", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _comma_list(value)

    @field_validator("robots", mode="before")
    @classmethod
    def _robots(cls, value: Any) -> Any:
        return _json_value(value, {})

    @field_validator("routes", mode="before")
    @classmethod
    def _routes(cls, value: Any) -> Any:
        return _json_value(value, [])
