"""The notifier loop: delivers the notification outbox.

One pass (:meth:`Notifier.run_once`):

1. releases rows whose notifier lease ran out (a notifier died between send and mark:
   the row is sent again with the same event id; receivers deduplicate by it);
2. marks tasks whose file expires within ``notify.expiring_notice_hours`` and writes
   their ``export.expiring`` event (once per task: a conditional UPDATE);
3. claims due rows, each with a lease (database clock), at most as many as there are
   free delivery slots (``notify.concurrency``) and at most
   ``notify.concurrency_per_target`` under way for one target (an endpoint, an
   address, a robot), and for each: a ``route`` row is expanded into one row per
   matching operator route (``notify.routes``: event and export type -> robot) and
   marked SENT; any other row is
   handed to the channel of its ``channel`` as a :class:`~.channels.base.Message`, the
   attempt is recorded (``export_delivery_attempt``) and the row is marked SENT, or
   PENDING after the back-off of its attempt (``notify.backoff_seconds``, the last one
   repeating), or DEAD when it is older than ``notify.max_age_hours`` or the channel
   says retrying cannot help, or DROPPED when its target was switched off or deleted
   on purpose (not a failure: no metric, no alert). A dead row counts in
   ``export_notification_dead_total`` {channel} and writes the audit
   (``notification_dead``).

Deliveries run on a pool of ``notify.concurrency`` threads and a pass does not wait for
them: a receiver that answers slowly (up to ``notify.send_timeout_seconds``) holds at
most ``concurrency_per_target`` slots, however many rows wait for it, and the next pass
(``notify.loop_seconds`` later) claims and starts the rows that came in meanwhile on
the others. A row being delivered is claimed, so no pass takes it
twice. :meth:`Notifier.drain` waits for the deliveries under way (shutdown, and
callers that need the outcome of a pass).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sqlalchemy import Engine

from export_center import metrics
from export_center.access import Scope
from export_center.links import sign_download
from export_center.notify.channels.base import Channel, Message, Outcome
from export_center.repository import notifications as notes
from export_center.repository.audit import AuditAction, record_audit
from export_center.repository.reads import read_task
from export_center.repository.tables import PRINCIPALS as P
from export_center.settings import Settings

__all__ = ["Notifier", "backoff_for", "message_for", "task_page_url"]

log = logging.getLogger(__name__)


def backoff_for(attempt: int, waits: list[float]) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based; the last repeats)."""
    return float(waits[max(min(attempt - 1, len(waits) - 1), 0)]) if waits else 60.0


def task_page_url(base_url: str, task_no: str) -> str:
    """The download-center page opened on a task: ``<base>/ui/#task=<taskId>``."""
    return f"{base_url.rstrip('/')}/ui/#task={task_no}"


def message_for(
    row: notes.Notification,
    *,
    language: str,
    base_url: str | None,
    file_link: str | None = None,
    type_titles: Callable[[str], tuple[str, str] | None] | None = None,
) -> Message:
    """The :class:`Message` of a notification row (links absolute when ``base_url``).

    With a ``file_link``, ``data.linkExpiresAt`` (ISO UTC) says until when that signed
    link works (its ``expires``), which can be before the file's own ``expiresAt``: a
    message then says both, so the reader knows to open the task page (whose button
    renews the link) after the link's time.
    """
    data = dict(row.data)
    titles = (
        type_titles(str(data["exportType"])) if type_titles and data.get("exportType") else None
    )
    if titles is not None:  # the type's names in both languages, for the messages
        data["exportTypeTitle"], data["exportTypeTitleZh"] = titles
    links: dict[str, str] = {}
    if file_link:
        expires = parse_qs(urlsplit(file_link).query).get("expires", [""])[0]
        if expires.isdigit():
            data["linkExpiresAt"] = (
                datetime.fromtimestamp(int(expires), UTC).isoformat().replace("+00:00", "Z")
            )
    if base_url and data.get("taskId"):
        links["task"] = task_page_url(base_url, str(data["taskId"]))
    if base_url and file_link:
        links["file"] = base_url.rstrip("/") + file_link
    return Message(
        event_id=row.event_id,
        event_type=row.event_type,
        created_at=row.created_at.replace(tzinfo=UTC),
        tenant_id=row.tenant_id,
        user_id=row.user_id,
        data=data,
        language=language,
        links=links,
    )


class Notifier:
    """Delivers due notification rows through their channels.

    Args:
        engine: the export center's database.
        settings: the process settings (``notify``, download-link secret and TTL).
        channels: the channels by name (``webhook``, ``email``, ``feishu`` ...); a row
            whose channel is missing here fails and is retried until it is dead.
        owner: this instance's lease owner id.
        base_url: gives the public base URL of the API (None: no links).
        type_titles: an export type's (English, Chinese) names, None for an unknown
            type (the registry's): messages name the type in the reader's language.
        link_seconds: the lifetime (s) of a link a message carries, by export type
            (the registry's ``links.minutes``); None: the link TTL setting.
    """

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        channels: Mapping[str, Channel],
        *,
        owner: str,
        base_url: Callable[[], str | None] = lambda: None,
        type_titles: Callable[[str], tuple[str, str] | None] | None = None,
        link_seconds: Callable[[str], int] | None = None,
    ) -> None:
        self.engine = engine
        self.link_seconds = link_seconds  # a type's link lifetime (registry links.minutes)
        self.settings = settings
        self.notify = settings.notify
        self.channels = dict(channels)
        self.owner = owner
        self.base_url = base_url
        self.type_titles = type_titles
        self._pool = ThreadPoolExecutor(
            max_workers=self.notify.concurrency, thread_name_prefix="notify"
        )
        self._lock = threading.Lock()
        self._running: set[Future[bool]] = set()
        self._per_target: dict[tuple[str, str], int] = {}
        self._ended = 0

    def run_once(self) -> int:
        """Release lost claims, mark expiring files, expand route rows and start the
        deliveries of due rows in the free slots (module docstring); return how many
        rows ended (sent or dead) or were expanded since the previous pass."""
        with self.engine.begin() as conn:
            notes.release_expired_notification_claims(conn)
            notes.mark_expiring(conn, self.notify.expiring_notice_hours, self.notify.batch_size)
        done = 0
        for row_id in self._pick():
            with self.engine.begin() as conn:
                row = notes.claim_notification(conn, row_id, self.owner, self.notify.lease_seconds)
            if row is None:
                continue
            if row.channel == notes.ROUTE_CHANNEL:
                self._expand_routes(row)
                done += 1
            else:
                self._start(row)
        with self._lock:
            done, self._ended = done + self._ended, 0
        return done

    def _pick(self) -> list[int]:
        """Due rows for the free slots, oldest first, skipping the targets that already
        have ``concurrency_per_target`` deliveries under way (route rows need no slot)."""
        with self._lock:
            free = self.notify.concurrency - len(self._running)
            busy = dict(self._per_target)
        if free <= 0:
            return []
        with self.engine.begin() as conn:
            due = notes.due_notifications(conn, self.notify.batch_size)
        picked: list[int] = []
        for row_id, channel, target in due:
            if channel == notes.ROUTE_CHANNEL:
                picked.append(row_id)
                continue
            key = (channel, target)
            if free <= 0 or busy.get(key, 0) >= self.notify.concurrency_per_target:
                continue
            busy[key] = busy.get(key, 0) + 1
            free -= 1
            picked.append(row_id)
        return picked

    def in_flight(self) -> int:
        """How many deliveries are under way."""
        with self._lock:
            return len(self._running)

    def drain(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: for as long as it takes) for the
        deliveries under way; return how many rows ended since the previous pass."""
        with self._lock:
            running = set(self._running)
        wait(running, timeout=timeout)
        with self._lock:
            done, self._ended = self._ended, 0
        return done

    def close(self) -> None:
        """Let the deliveries under way finish (each is bounded by
        ``notify.send_timeout_seconds``), then stop the pool."""
        self._pool.shutdown(wait=True)

    def _start(self, row: notes.Notification) -> None:
        key = (row.channel, row.target)
        with self._lock:
            self._per_target[key] = self._per_target.get(key, 0) + 1
            future = self._pool.submit(self._deliver_logged, row)
            self._running.add(future)
        future.add_done_callback(lambda f: self._finished(f, key))

    def _finished(self, future: Future[bool], key: tuple[str, str]) -> None:
        with self._lock:
            self._running.discard(future)
            left = self._per_target.get(key, 1) - 1
            if left > 0:
                self._per_target[key] = left
            else:
                self._per_target.pop(key, None)
            if not future.cancelled() and future.exception() is None and future.result():
                self._ended += 1

    def _deliver_logged(self, row: notes.Notification) -> bool:
        try:
            return self._deliver(row)
        except Exception:  # the database went away mid-delivery: the lease brings it back
            log.exception("notification delivery could not be recorded", extra={"id": row.id})
            return False

    def _expand_routes(self, row: notes.Notification) -> None:
        """One robot row per operator route matching the event and export type."""
        export_type = row.data.get("exportType")
        with self.engine.begin() as conn:
            for route in self.notify.routes:
                robot = self.notify.robots.get(route.robot)
                if route.event != row.event_type or robot is None:
                    continue
                if route.export_type is not None and route.export_type != export_type:
                    continue
                notes.insert_notification(
                    conn,
                    event_id=row.event_id,
                    event_type=row.event_type,
                    tenant_id=row.tenant_id,
                    user_id=row.user_id,
                    channel=robot.kind,
                    target=route.robot,
                    data=row.data,
                    task_id=row.task_id,
                    schedule_id=row.schedule_id,
                )
            notes.mark_notification_sent(conn, row.id, self.owner, None)

    def _message(self, row: notes.Notification) -> Message:
        language = "en"
        file_link = None
        with self.engine.connect() as conn:
            if row.user_id is not None:
                found = conn.execute(
                    P.select().where(P.c.tenant_id == row.tenant_id, P.c.user_id == row.user_id)
                ).first()
                if found is not None and found.language in ("en", "zh"):
                    language = found.language
            task = read_task(conn, row.task_id) if row.task_id is not None else None
        if (
            task is not None
            and row.event_type in ("export.succeeded", "export.expiring")
            and task.status == "SUCCEEDED"
            and task.object_key
        ):
            file_link = sign_download(
                self.settings.download_secret,
                task.task_no,
                task.requested_by,
                Scope(task.tenant_id, task.app_code, task.requested_by),
                self.link_seconds(task.export_type)
                if self.link_seconds
                else self.settings.api.download_link_ttl_seconds,
            )
        return message_for(
            row,
            language=language,
            base_url=self.base_url(),
            file_link=file_link,
            type_titles=self.type_titles,
        )

    def _deliver(self, row: notes.Notification) -> bool:
        started = time.monotonic()
        channel = self.channels.get(row.channel)
        if channel is None:
            outcome = Outcome(False, error=f"no {row.channel} channel runs on this instance")
        else:
            try:
                outcome = channel.send(row.target, self._message(row))
            except Exception as exc:  # a channel bug is a failed try, never a lost row
                outcome = Outcome(False, error=f"{type(exc).__name__}: {exc}"[:500])
        elapsed = int((time.monotonic() - started) * 1000)
        with self.engine.begin() as conn:
            notes.record_delivery_attempt(
                conn, row, status_code=outcome.status_code, error=outcome.error, duration_ms=elapsed
            )
            if outcome.delivered:
                notes.mark_notification_sent(conn, row.id, self.owner, outcome.status_code)
                return True
            if outcome.dropped:
                notes.mark_notification_dropped(conn, row.id, self.owner, outcome.error or "")
                return True
            end = notes.notification_failed(
                conn,
                row.id,
                self.owner,
                delay_seconds=backoff_for(row.attempt_count, self.notify.backoff_seconds),
                max_age_hours=self.notify.max_age_hours,
                status_code=outcome.status_code,
                error=outcome.error or "not delivered",
                retry=outcome.retry,
            )
            if end == notes.NotificationStatus.DEAD:
                self._dead(conn, row, outcome)
                return True
        return False

    def _dead(self, conn: Any, row: notes.Notification, outcome: Outcome) -> None:
        metrics.NOTIFICATION_DEAD.labels(row.channel).inc()
        task = read_task(conn, row.task_id) if row.task_id is not None else None
        record_audit(
            conn,
            actor="system:notifier",
            action=AuditAction.NOTIFICATION_DEAD,
            outcome="dead",
            task=task,
            event_id=row.event_id,
            reason=(outcome.error or "not delivered")[:1000],
            details={
                "channel": row.channel,
                "target": row.target,
                "eventType": row.event_type,
                "attempts": row.attempt_count,
                "lastStatusCode": outcome.status_code,
            },
        )
        log.warning(
            "notification dead",
            extra={"eventId": row.event_id, "channel": row.channel, "attempts": row.attempt_count},
        )
