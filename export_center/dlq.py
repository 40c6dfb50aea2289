"""The dead-letter handler.

Reads ``%DLQ%<worker group>`` with its own consumer group. It reads the message's
user properties (``eventId``, ``taskId``, ``dispatchVersion``, ``schemaVersion``), never
the body, which is the part that was broken. Outcomes:

* properties match the current attempt -> in one transaction the outbox row becomes
  QUARANTINED and the task FAILED ("command message corrupted; create the export
  again"); acknowledged after the commit. Both updates must touch exactly one row or
  the transaction rolls back and the message stays unacknowledged.
* version or event no longer matches -> logged for audit, acknowledged, nothing touched.
* a property missing or malformed -> logged at CRITICAL with the message id and the
  properties, acknowledged (never a second-level dead-letter loop).
* a database error -> not acknowledged: the broker delivers it again.

``export_dlq_messages_total`` counts every message read. DLQ messages page an operator
(docs/operations.md "DLQ runbook").
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping
from typing import Protocol

from sqlalchemy import Engine

from export_center import commands, metrics, repository
from export_center.loops import receive_loop
from export_center.outages import Backoff, is_database_blip, outage_log
from export_center.transport.base import Delivery

__all__ = ["DlqHandler", "DlqReceiver"]

log = logging.getLogger(__name__)
REQUIRED = commands.REQUIRED_PROPERTIES
#: Who the audit trail names for the handler's disposals.
ACTOR = "system:dlq-handler"
#: Pause after a dead letter could not be handled (the database failed), doubling.
_FIRST_PAUSE_SECONDS = 0.5
_MAX_PAUSE_SECONDS = 30.0


class DlqReceiver(Protocol):
    """The port the handler reads dead letters from; its adapters satisfy it
    structurally (the in-process queue's
    :meth:`~export_center.transport.memory.MemoryTransport.dead_letter_receiver`, and
    :class:`~export_center.transport.rocketmq.RocketMQDeadLetters`)."""

    def receive(self, timeout_seconds: float) -> Delivery | None:
        """Wait up to ``timeout_seconds`` for one dead letter; None when none arrived.

        Raises:
            Exception: the broker does not answer (the handler backs off and retries).
        """

    def close(self) -> None:
        """Release connections and threads."""


class DlqHandler:
    """Quarantines dead-lettered commands.

    Args:
        engine: the export center's database.
        receiver: the dead-letter source (RocketMQ DLQ consumer, or the in-process one).
    """

    def __init__(self, engine: Engine, receiver: DlqReceiver | None = None) -> None:
        self.engine = engine
        self.receiver = receiver
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The last outcomes as ``(messageId, outcome, taskId)`` (bounded diagnostic).
        self.outcomes: deque[tuple[str, str, str | None]] = deque(maxlen=1000)

    def handle(self, message_id: str, properties: Mapping[str, str]) -> str:
        """Handle one dead letter; returns ``quarantined``, ``stale`` or ``missing_properties``.

        Raises:
            Exception: a database error or a quarantine mismatch (do not acknowledge).
        """
        metrics.DLQ_MESSAGES.inc()
        missing = [name for name in REQUIRED if not properties.get(name)]
        version_text = properties.get("dispatchVersion", "")
        if missing or not version_text.isdigit():
            reason = f"missing {missing or ['dispatchVersion']}"
            log.critical(
                "dead letter without usable properties; acknowledged without changes",
                extra={"messageId": message_id, "reason": reason, "properties": dict(properties)},
            )
            with self.engine.begin() as conn:
                repository.record_audit(
                    conn,
                    actor=ACTOR,
                    action=repository.AuditAction.DEAD_LETTER,
                    outcome="missing_properties",
                    task_no=properties.get("taskId") or None,
                    event_id=properties.get("eventId") or None,
                    reason=reason,
                    details={"messageId": message_id, "properties": dict(properties)},
                )
            return "missing_properties"
        reason = f"message {message_id} dead-lettered (schemaVersion {properties['schemaVersion']})"
        with self.engine.begin() as conn:
            outcome = repository.quarantine(
                conn,
                event_id=properties["eventId"],
                task_no=properties["taskId"],
                version=int(version_text),
                reason=reason,
            )
            # The disposal and its record commit together (or neither does).
            repository.record_audit(
                conn,
                actor=ACTOR,
                action=repository.AuditAction.DEAD_LETTER,
                outcome=outcome,
                task=repository.read_task_by_no(conn, properties["taskId"]),
                task_no=properties["taskId"],
                event_id=properties["eventId"],
                dispatch_version=int(version_text),
                reason=reason,
                details={"messageId": message_id, "properties": dict(properties)},
            )
        level = logging.ERROR if outcome == "quarantined" else logging.WARNING
        log.log(
            level,
            "dead letter %s",
            "quarantined: task failed"
            if outcome == "quarantined"
            else "is stale: nothing changed (audit)",
            extra={
                "messageId": message_id,
                "taskId": properties["taskId"],
                "eventId": properties["eventId"],
                "dispatchVersion": int(version_text),
            },
        )
        return outcome

    def handle_delivery(self, delivery: Delivery) -> str:
        """Handle and settle one delivery: acknowledged unless the database failed."""
        try:
            outcome = self.handle(delivery.message_id, delivery.properties)
        except Exception as exc:
            if is_database_blip(exc):  # one line per outage, not one traceback per letter
                outage_log(self.engine).failed(exc, "quarantine a dead letter")
            else:
                log.exception(
                    "dead letter not handled; left for redelivery",
                    extra={"messageId": delivery.message_id},
                )
            delivery.release()
            return "error"
        outage_log(self.engine).worked()
        delivery.ack()
        self.outcomes.append((delivery.message_id, outcome, delivery.properties.get("taskId")))
        return outcome

    def start(self) -> None:
        """Read the dead-letter source in a background thread."""
        if self.receiver is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="dlq-handler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop reading."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def _loop(self) -> None:
        assert self.receiver is not None
        # After a letter the database could not handle (it went back), wait before the
        # next one: 0.5 s doubling up to 30 s, instead of spinning on the same failure.
        receive_loop(
            self.receiver.receive,
            self.handle_delivery,
            self._stop,
            what="dead-letter receive",
            logger=log,
            timeout_seconds=1.0,
            failed=lambda outcome: outcome == "error",
            pause=Backoff(_FIRST_PAUSE_SECONDS, _MAX_PAUSE_SECONDS),
        )
