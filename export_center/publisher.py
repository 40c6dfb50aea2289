"""The outbox publisher.

One pass claims at most ``batch_size`` due rows (``PENDING`` and ``next_retry_at <=
db now``, oldest first), each with its own conditional UPDATE to ``CLAIMED`` and a
lease, hands each command to the transport and marks it ``SENT``. A failed send puts
the row back to ``PENDING`` with backoff 5 s, 15 s, 1 min, 5 min, then 15 min forever;
the row's ``attempt_count`` is its own and never the task's.

An outage of the broker fails every send, so every row backs off. It must not end with
the backlog waiting for each row's next try (up to 15 minutes): while sends fail, a
pass with nothing due asks the transport every ``probe_seconds`` whether the broker
answers (a route lookup; nothing is sent and no row's count grows), and the first
answer, or the first successful send, makes every backed-off row due at once. A
process starts in that state, so rows backed off by a previous process are probed too.

A row claimed by a
publisher that died is released by the reconciler when its lease runs out; a crash
between send and mark-sent therefore sends the command again, which the consumer's
claim makes harmless (CASES E28).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

from sqlalchemy import Engine

from export_center import commands, metrics, repository
from export_center.transport.base import OutgoingMessage, Transport

__all__ = ["Publisher", "message_for_row"]

log = logging.getLogger(__name__)


def message_for_row(row: repository.OutboxRow) -> OutgoingMessage:
    """The transport message of an outbox row: body = the stored command, properties =
    its identifiers (:func:`export_center.commands.properties`)."""
    return OutgoingMessage(
        topic=row.topic,
        tag=row.tag,
        key=row.message_key,
        body=row.payload_json.encode(),
        properties=commands.properties(
            event_id=row.event_id,
            task_no=row.message_key,
            dispatch_version=row.dispatch_version,
            payload_json=row.payload_json,
        ),
    )


class Publisher:
    """Sends due outbox rows through a transport.

    Args:
        engine: the export center's database.
        transport: where commands go.
        owner: this instance's lease owner id.
        batch_size: rows claimed per pass (50).
        lease_seconds: outbox claim lease; far longer than one send.
        backoff_seconds: the waits after the 1st, 2nd ... failed send of a row.
        probe_seconds: while sends fail, how often an idle pass asks whether the broker
            answers again.
    """

    def __init__(
        self,
        engine: Engine,
        transport: Transport,
        *,
        owner: str,
        batch_size: int = 50,
        lease_seconds: float = 60.0,
        backoff_seconds: Sequence[float] = repository.OUTBOX_BACKOFF_SECONDS,
        probe_seconds: float = 5.0,
    ) -> None:
        self.engine = engine
        self.transport = transport
        self.owner = owner
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.backoff_seconds = tuple(backoff_seconds)
        self.probe_seconds = probe_seconds
        self._failing = True  # until a send succeeds: rows may be backed off already
        self._last_probe = -math.inf

    def run_once(self) -> int:
        """Claim, send and mark due rows; return how many were sent."""
        failing = self._failing
        with self.engine.begin() as conn:
            ids = repository.due_outbox_ids(conn, self.batch_size)
        sent = 0
        for row_id in ids:
            with self.engine.begin() as conn:
                row = repository.claim_outbox_row(conn, row_id, self.owner, self.lease_seconds)
            if row is None:
                continue
            if self._send(row):
                sent += 1
        if failing and sent:
            self._release_backoff()
        elif failing and not ids and time.monotonic() - self._last_probe >= self.probe_seconds:
            self._last_probe = time.monotonic()
            if self.transport.ready():
                self._failing = False
                self._release_backoff()
        return sent

    def _release_backoff(self) -> None:
        with self.engine.begin() as conn:
            released = repository.release_outbox_backoff(conn)
        if released:
            log.info("the broker takes commands again: %d backed-off command(s) due now", released)

    def _send(self, row: repository.OutboxRow) -> bool:
        try:
            self.transport.send(message_for_row(row))
        except Exception as exc:  # any send failure backs off; the row is never dropped
            with self.engine.begin() as conn:
                repository.outbox_send_failed(
                    conn,
                    row.id,
                    self.owner,
                    row.attempt_count,
                    f"{type(exc).__name__}: {exc}",
                    self.backoff_seconds,
                )
            self._failing = True
            metrics.OUTBOX_SEND_FAILURES.inc()
            log.warning(
                "outbox send failed",
                extra={
                    "eventId": row.event_id,
                    "taskId": row.message_key,
                    "dispatchVersion": row.dispatch_version,
                    "attempt": row.attempt_count,
                },
            )
            return False
        self._failing = False
        self._mark_sent(row)
        return True

    def _mark_sent(self, row: repository.OutboxRow) -> None:
        """CLAIMED -> SENT once the transport took the message (a lost lease leaves it:
        the reconciler sends it again, and the consumer's claim makes that harmless)."""
        with self.engine.begin() as conn:
            repository.mark_outbox_sent(conn, row.id, self.owner)
