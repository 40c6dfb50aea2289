"""Command transports: the port and its adapters (in-process; RocketMQ)."""

from export_center.transport.base import Delivery, OutgoingMessage, Transport, TransportError
from export_center.transport.memory import MemoryTransport

__all__ = ["Delivery", "MemoryTransport", "OutgoingMessage", "Transport", "TransportError"]
