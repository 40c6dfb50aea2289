"""RocketMQ 5.x transport: the official ``rocketmq-python-client`` (gRPC through the proxy).

Producer: message key = public task id, tag ``EXPORT_TASK``, user properties
``eventId``, ``taskId``, ``dispatchVersion``, ``schemaVersion`` (equal to the payload and
to the outbox row; :mod:`export_center.commands`); the body holds identifiers only.

Consumer: ``SimpleConsumer`` in the worker group. A long export does not hold its
message: the consumer acknowledges it as soon as the claim UPDATE has committed
(``Consumer.handle``). From then on the database protects the running task (lease,
watchdog, reconciler), so renewing the invisible time for 30 minutes would add nothing
but a second, weaker lease; and an ack after a long run risks the redelivery of a
message whose invisible time ran out (CASES E23). Every claim branch acknowledges too.
A body that does not parse, or an unsupported ``schemaVersion``, is not acknowledged:
the proxy delivers it again after the invisible time and, after the group's retry
limit, moves it to ``%DLQ%<worker group>``, which :class:`RocketMQDeadLetters` reads.

The client is imported lazily so the embedded default never needs it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from export_center.transport.base import OutgoingMessage, TransportError

__all__ = ["RocketMQDeadLetters", "RocketMQTransport"]

log = logging.getLogger(__name__)


def _client() -> Any:
    try:
        import rocketmq
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise TransportError(
            "the RocketMQ transport needs rocketmq-python-client "
            "(pip install 'export-center[rocketmq]')"
        ) from exc
    return rocketmq


def _whole_seconds(seconds: float) -> int:
    # rocketmq-python-client 5.1.2 needs an int here: with a float every route lookup
    # fails ("failed to fetch topic ... route") although the proxy answered.
    return max(1, int(round(seconds)))


@dataclass(slots=True)
class _RocketDelivery:
    message_id: str
    body: bytes
    properties: dict[str, str]
    delivery_attempt: int
    consumer: Any = field(repr=False)
    message: Any = field(repr=False)
    settled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ack(self) -> None:
        with self.lock:
            if self.settled:
                return
            self.settled = True
        try:
            self.consumer.ack(self.message)
        except Exception as exc:  # the database already decided; a redelivery is harmless
            log.warning(
                "ack failed (%s); the command may be delivered again",
                exc,
                extra={"messageId": self.message_id},
            )

    def release(self) -> None:
        # Not acknowledged: the proxy delivers it again when its invisible time ends.
        with self.lock:
            self.settled = True


class _SimpleReceiver:
    """A SimpleConsumer that is rebuilt after a failed receive (e.g. a proxy restart)."""

    def __init__(
        self,
        endpoint: str,
        group: str,
        topic: str,
        *,
        invisible_seconds: int,
        await_seconds: int,
        request_timeout: float,
        tag: str = "*",
    ) -> None:
        self._rmq = _client()
        self._config = self._rmq.ClientConfiguration(
            endpoint, self._rmq.Credentials(), request_timeout=_whole_seconds(request_timeout)
        )
        self._group, self._topic, self._tag = group, topic, tag
        self.invisible_seconds = max(10, invisible_seconds)
        self.await_seconds = await_seconds
        self._consumer: Any = None
        self._closed = False
        self._lock = threading.Lock()
        self._connect()

    def _connect(self) -> Any:
        with self._lock:
            if self._consumer is None and not self._closed:
                consumer = self._rmq.SimpleConsumer(
                    self._config,
                    self._group,
                    {self._topic: self._rmq.FilterExpression(self._tag)},
                    await_duration=self.await_seconds,
                )
                consumer.startup()
                self._consumer = consumer
            return self._consumer

    def _drop(self) -> None:
        with self._lock:
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.shutdown()
            except Exception:  # pragma: no cover - best effort
                log.debug("consumer shutdown failed", exc_info=True)

    def receive(self, timeout_seconds: float) -> _RocketDelivery | None:
        consumer = self._connect()
        if consumer is None:
            return None
        try:
            messages = consumer.receive(1, self.invisible_seconds)
        except Exception as exc:
            self._drop()
            raise TransportError(f"receive failed: {exc}") from exc
        if not messages:
            return None
        m = messages[0]
        return _RocketDelivery(
            message_id=str(m.message_id),
            body=bytes(m.body or b""),
            properties=dict(m.properties or {}),
            delivery_attempt=int(m.delivery_attempt or 1),
            consumer=consumer,
            message=m,
        )

    def close(self) -> None:
        self._closed = True
        self._drop()


class RocketMQTransport:
    """:class:`~export_center.transport.base.Transport` on a RocketMQ 5.x proxy.

    Args:
        endpoint: proxy gRPC ``host:port``.
        topic: command topic.
        group: worker consumer group.
        tag: the tag expression the worker consumes: commands (``EXPORT_TASK``) and
            the shard wake-ups of distributed exports (``EXPORT_SHARD``).
        invisible_seconds: invisible time of a received command (>= 10 s).
        await_seconds: long-poll wait of one receive.
        request_timeout: gRPC request timeout in seconds.
        consume: start a consumer (False for a publisher-only process).
    """

    def __init__(
        self,
        endpoint: str,
        topic: str,
        group: str,
        *,
        tag: str = "EXPORT_TASK || EXPORT_SHARD",
        invisible_seconds: int = 60,
        await_seconds: int = 5,
        request_timeout: float = 5.0,
        consume: bool = True,
    ) -> None:
        rmq = _client()
        self._rmq = rmq
        self.topic = topic
        self.tag = tag
        self._config = rmq.ClientConfiguration(
            endpoint, rmq.Credentials(), request_timeout=_whole_seconds(request_timeout)
        )
        self._producer: Any = None
        self._receiver = (
            _SimpleReceiver(
                endpoint,
                group,
                topic,
                invisible_seconds=invisible_seconds,
                await_seconds=await_seconds,
                request_timeout=request_timeout,
                tag=tag,
            )
            if consume
            else None
        )
        self._lock = threading.Lock()

    def send(self, message: OutgoingMessage) -> str:
        """Send one command; raises :class:`TransportError` when the proxy refuses or is down."""
        m = self._rmq.Message()
        m.topic = message.topic
        m.body = message.body
        m.tag = message.tag
        m.keys = message.key  # the setter adds one key per assignment
        for name, value in message.properties.items():
            m.add_property(name, value)
        with self._lock:
            try:
                if self._producer is None:
                    self._producer = self._rmq.Producer(self._config, (self.topic,))
                    self._producer.startup()
                receipt = self._producer.send(m)
            except Exception as exc:
                # A new producer next time: after a proxy restart the old channel may
                # stay broken. The outbox row backs off and is sent again.
                self._drop_producer()
                raise TransportError(f"send failed: {exc}") from exc
        return str(receipt.message_id)

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.shutdown()
            except Exception:  # pragma: no cover - best effort
                log.debug("producer shutdown failed", exc_info=True)

    def ready(self) -> bool:
        """Whether the proxy answers a route lookup of the command topic (nothing is
        sent); a failure drops the producer so that the next send starts a new one."""
        with self._lock:
            try:
                if self._producer is None:
                    self._producer = self._rmq.Producer(self._config, (self.topic,))
                    self._producer.startup()
                self._producer._retrieve_topic_route_data(self.topic)
            except Exception as exc:
                log.debug("the broker does not answer yet: %s", exc)
                self._drop_producer()
                return False
        return True

    def receive(self, timeout_seconds: float) -> _RocketDelivery | None:
        """Long-poll one command (blocks up to the proxy's await time)."""
        if self._receiver is None:
            return None
        return self._receiver.receive(timeout_seconds)

    def close(self) -> None:
        """Shut the producer and consumer down."""
        if self._receiver is not None:
            self._receiver.close()
        with self._lock:
            self._drop_producer()


class RocketMQDeadLetters(_SimpleReceiver):
    """Reads ``%DLQ%<worker group>`` with the dead-letter handler's own group."""

    def __init__(
        self,
        endpoint: str,
        dlq_topic: str,
        group: str,
        *,
        invisible_seconds: int = 30,
        await_seconds: int = 5,
        request_timeout: float = 5.0,
    ) -> None:
        super().__init__(
            endpoint,
            group,
            dlq_topic,
            invisible_seconds=invisible_seconds,
            await_seconds=await_seconds,
            request_timeout=request_timeout,
            tag="*",
        )


def check_topic(endpoint: str, topic: str, timeout_seconds: float) -> None:
    """Ask the proxy at ``endpoint`` for the route of ``topic`` (``export-center doctor``),
    through a producer that sends nothing.

    The client 5.1.2 fetches routes lazily (a producer of an unknown topic starts fine),
    so the route is asked for explicitly with its route lookup (pinned client version).

    Raises:
        TransportError: the client is not installed.
        Exception: the client's error when the route cannot be fetched ("failed to fetch
            topic ... route").
    """
    rmq = _client()
    config = rmq.ClientConfiguration(
        endpoint, rmq.Credentials(), request_timeout=_whole_seconds(timeout_seconds)
    )
    producer = rmq.Producer(config, ())
    try:
        producer.startup()
        producer._retrieve_topic_route_data(topic)
    finally:
        with contextlib.suppress(Exception):  # one that never started has nothing to stop
            producer.shutdown()
