"""What every notification channel implements, and what it is given.

The notifier claims a notification row, builds its :class:`Message` and calls the
channel named by the row's ``channel`` with the row's ``target``. A channel sends once
and says how it went in an :class:`Outcome`; it never retries by itself and never
writes to the database (the notifier records the attempt, the back-off and the end
state). A channel must not raise for a failed delivery: it returns
``Outcome(delivered=False, ...)``; an exception is treated as a retryable failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

__all__ = ["Channel", "Message", "Outcome"]


@dataclass(frozen=True, slots=True)
class Message:
    """One event as a channel delivers it.

    Attributes:
        event_id: the event's id (the same on every delivery and every target:
            receivers deduplicate by it).
        event_type: one of :data:`export_center.notify.targets.EVENT_TYPES`.
        created_at: when the event happened (UTC, aware).
        tenant_id: the tenant the event belongs to.
        user_id: the user it is about (the task's or schedule's owner), or None.
        data: the event's data, the webhook body's ``data``: at least ``taskId``,
            ``state`` and ``exportType`` for export events (``scheduleId`` when a
            schedule made the task), ``scheduleId`` and ``reason`` for
            ``schedule.paused``; also ``taskName``, ``rows``, ``fileName``,
            ``failureCode``, ``failureMessage``, ``expiresAt`` when known.
        language: the recipient's language, ``en`` or ``zh``.
        links: absolute URLs a person may open: ``task`` (the task in the download
            center page; the page asks for a sign-in) and, for a succeeded export,
            ``file`` (a signed, expiring download link) when one could be made.
    """

    event_id: str
    event_type: str
    created_at: datetime
    tenant_id: str
    user_id: str | None
    data: Mapping[str, Any]
    language: str = "en"
    links: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one delivery attempt went.

    Attributes:
        delivered: the receiver accepted it (HTTP 2xx, SMTP 250, a robot's ok code).
        status_code: the receiver's answer code (HTTP status, SMTP reply code), or None
            when there was no answer (connection refused, timeout).
        error: why it was not delivered (one line, no secret), None when delivered.
        retry: False when trying again cannot help (an address refused for good, a
            robot removed from the settings): the notification is marked dead at once.
        dropped: the target was switched off or deleted on purpose (a webhook endpoint
            an admin disabled): the notification ends DROPPED, which is nobody's
            failure, so it neither counts as dead nor alerts.
    """

    delivered: bool
    status_code: int | None = None
    error: str | None = None
    retry: bool = True
    dropped: bool = False


class Channel(Protocol):
    """A way to deliver a :class:`Message` to a target."""

    name: str
    """The channel name a notification row carries (``webhook``, ``email``, ...)."""

    def send(self, target: str, message: Message) -> Outcome:
        """Deliver ``message`` to ``target`` once (the row's ``target``: an endpoint id,
        an e-mail address, a robot name) and say how it went; never raises for a
        failed delivery."""
