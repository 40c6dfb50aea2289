"""The command transport port (DESIGN.md "Loops and libraries").

The publisher hands each outbox row to :meth:`Transport.send`; consumers pull
:class:`Delivery` objects with :meth:`Transport.receive` and settle each one with
``ack()`` (done: never deliver again) or ``release()`` (not done: let the transport
deliver it again later; RocketMQ dead-letters it after its retry limit).

A message carries only identifiers: ``body`` is the outbox row's
``payload_json``; ``properties`` repeats ``eventId``, ``taskId``, ``dispatchVersion``
and ``schemaVersion`` so a dead-letter handler never needs to parse a broken body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from export_center.errors import TransportError

__all__ = ["Delivery", "OutgoingMessage", "Transport", "TransportError"]


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One command to send.

    Attributes:
        topic: destination topic (with the environment prefix).
        tag: message tag (``EXPORT_TASK``).
        key: message key, the public task id.
        body: UTF-8 JSON bytes of the command payload.
        properties: user properties (string to string).
    """

    topic: str
    tag: str
    key: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)


class Delivery(Protocol):
    """A received message; settle it exactly once."""

    message_id: str
    body: bytes
    properties: dict[str, str]
    delivery_attempt: int

    def ack(self) -> None:
        """Mark the message consumed: it is never delivered again."""

    def release(self) -> None:
        """Give the message back for redelivery (used only for unparseable commands)."""


class Transport(Protocol):
    """Port implemented by the in-process queue and the RocketMQ adapter."""

    def send(self, message: OutgoingMessage) -> str:
        """Send one message; returns its message id. Raises :class:`TransportError`."""

    def receive(self, timeout_seconds: float) -> Delivery | None:
        """Wait up to ``timeout_seconds`` for one message; None when none arrived."""

    def ready(self) -> bool:
        """Whether the broker answers now (a cheap call that sends nothing); the
        publisher asks it while its commands are backed off after failed sends."""

    def close(self) -> None:
        """Release connections and threads."""
