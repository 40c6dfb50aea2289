"""In-process transport: a thread-safe queue inside one process (embedded default).

The database stays the source of truth (DESIGN.md): a message lost with the process
is redispatched by the reconciler, so this adapter weakens no guarantee. A released
message is queued again up to ``max_deliveries`` times and then moved to the
dead-letter queue (:meth:`MemoryTransport.dead_letter_receiver`), as a broker would
dead-letter it.
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field, replace

from export_center.transport.base import OutgoingMessage, TransportError

__all__ = ["MemoryTransport"]


@dataclass(slots=True)
class _MemoryDelivery:
    message_id: str
    body: bytes
    properties: dict[str, str]
    delivery_attempt: int
    transport: MemoryTransport | _DeadLetters
    message: OutgoingMessage = field(repr=False)
    settled: bool = False

    def ack(self) -> None:
        self.settled = True

    def release(self) -> None:
        if not self.settled:
            self.settled = True
            self.transport._redeliver(self)

    def again(
        self, transport: MemoryTransport | _DeadLetters, attempt: int | None = None
    ) -> _MemoryDelivery:
        """The same message delivered once more by ``transport`` (attempt + 1 unless
        ``attempt`` says otherwise), unsettled."""
        next_attempt = self.delivery_attempt + 1 if attempt is None else attempt
        return replace(self, delivery_attempt=next_attempt, transport=transport, settled=False)


class MemoryTransport:
    """Queue-backed :class:`~export_center.transport.base.Transport`.

    Args:
        max_deliveries: deliveries before a released message is dead-lettered.
    """

    def __init__(self, *, max_deliveries: int = 3) -> None:
        self._queue: queue.Queue[_MemoryDelivery] = queue.Queue()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.max_deliveries = max_deliveries
        self.closed = False
        self._dead: queue.Queue[_MemoryDelivery] = queue.Queue()
        self._dead_owner = _DeadLetters(self._dead)

    def send(self, message: OutgoingMessage) -> str:
        """Queue a message and return its id.

        Raises:
            TransportError: the transport is closed.
        """
        with self._lock:
            if self.closed:
                raise TransportError("transport is closed")
            message_id = f"mem-{next(self._ids)}"
        self._queue.put(
            _MemoryDelivery(message_id, message.body, dict(message.properties), 1, self, message)
        )
        return message_id

    def receive(self, timeout_seconds: float) -> _MemoryDelivery | None:
        """Wait up to ``timeout_seconds`` for the next message."""
        return _next(self._queue, timeout_seconds)

    def _redeliver(self, delivery: _MemoryDelivery) -> None:
        if delivery.delivery_attempt >= self.max_deliveries:
            self._dead.put(delivery.again(self._dead_owner, attempt=1))
            return
        self._queue.put(delivery.again(self))

    def dead_letter_receiver(self) -> _DeadLetters:
        """The in-process dead-letter queue, read by the DLQ handler."""
        return self._dead_owner

    def pending(self) -> int:
        """Messages waiting to be received."""
        return self._queue.qsize()

    def ready(self) -> bool:
        """Always: the queue lives in this process."""
        return True

    def close(self) -> None:
        """Refuse further sends."""
        self.closed = True


class _DeadLetters:
    """Dead-lettered messages; a released one is queued again (never lost)."""

    def __init__(self, dead: queue.Queue[_MemoryDelivery]) -> None:
        self._dead = dead

    def receive(self, timeout_seconds: float) -> _MemoryDelivery | None:
        return _next(self._dead, timeout_seconds)

    def _redeliver(self, delivery: _MemoryDelivery) -> None:
        self._dead.put(delivery.again(self))

    def close(self) -> None:
        return None


def _next(source: queue.Queue[_MemoryDelivery], timeout_seconds: float) -> _MemoryDelivery | None:
    """The next delivery of ``source``, or None after ``timeout_seconds``."""
    try:
        return source.get(timeout=timeout_seconds)
    except queue.Empty:
        return None
