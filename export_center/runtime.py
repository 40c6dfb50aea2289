"""Assembles one export-center process: database, registry, storage, transport, loops.

``serve``, ``demo`` and the tests build a :class:`Runtime`; the FastAPI lifespan owns
it, so nothing connects at import time (CONVENTIONS: ``create_app`` + lifespan).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

from export_center import metrics, repository
from export_center.attempt.context import RunContext
from export_center.consumer import Consumer
from export_center.db import make_engine
from export_center.dlq import DlqHandler, DlqReceiver
from export_center.link_limits import link_ttl
from export_center.loops import LoopRunner
from export_center.notify.channels.base import Channel
from export_center.notify.channels.factory import channels_from_settings
from export_center.notify.notifier import Notifier
from export_center.notify.webhooks import WebhookChannel
from export_center.provider_client import ProviderClient
from export_center.publisher import Publisher
from export_center.reconciler import Reconciler
from export_center.registry import Registry, RegistryError
from export_center.registry_source import open_registry
from export_center.schedules.scheduler import Scheduler
from export_center.settings import Settings, private_dir
from export_center.storage.base import Storage
from export_center.storage.local import LocalStorage
from export_center.transport import MemoryTransport, Transport

if TYPE_CHECKING:
    from export_center.sample_process import SampleProviderProcess

__all__ = [
    "Runtime",
    "alembic_config",
    "open_storage",
    "tune_gc",
    "upgrade_database",
]

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    """Alembic configuration for the package's migrations on ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade_database(engine: Engine) -> None:
    """Run all migrations up to head on ``engine`` (idempotent)."""
    with engine.connect() as conn:
        cfg = alembic_config(str(engine.url))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        conn.commit()


def tune_gc(gen0_threshold: int) -> None:
    """Run Python's cyclic garbage collector less often in a process that exports.

    The rule: a young-generation collection every ``gen0_threshold`` new container
    objects instead of CPython's 700, older generations unchanged. An export decodes
    each batch into one list per row (``rowFormat: "array"``): 5,000 rows of a batch
    start about 7 collections at 700, each walking the rows still alive, and lists,
    unlike dicts of plain values, are never untracked. At 10,000 the decoding and the
    conversion of the ORDERS sample take 40 % less CPU (``bench/README.md``). The export
    path makes no reference cycles of its own, so memory is not held longer in practice.

    Args:
        gen0_threshold: new containers between two young collections; 0 or a value
            below Python's current one leaves the setting alone.
    """
    first, *older = gc.get_threshold()
    if gen0_threshold > first:
        gc.set_threshold(gen0_threshold, *older)


def open_storage(settings: Settings) -> Storage:
    """The storage the settings choose: ``storage.backend`` ``local`` (a directory under
    the data dir) or ``s3`` (:class:`export_center.storage.s3.S3Storage`; needs boto3,
    the ``s3`` extra, imported only then).

    Raises:
        ValueError: ``s3`` without a bucket, or with incomplete credentials.
    """
    if settings.storage.backend == "s3":
        from export_center.storage.s3 import S3Storage

        return S3Storage(settings.storage.s3)
    return LocalStorage(settings.files_dir)


class Runtime:
    """Everything one process runs.

    Args:
        settings: process settings.
        transport: command transport (default: a new in-process queue).
        storage: file storage (default: what ``storage.backend`` names).
        self_url: this API's base URL: the base of providers registered as ``self``
            (until :meth:`set_self_url` moves them, as the embedded sample process
            does) and of the links in notifications (``api.public_base_url`` first).
        migrate: run migrations at start (the embedded default does).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        transport: Transport | None = None,
        storage: Storage | None = None,
        self_url: str | None = None,
        migrate: bool | None = None,
    ) -> None:
        self.settings = settings
        settings.check_startup()
        private_dir(settings.data_dir)
        self.engine = make_engine(settings.resolved_database_url)
        if migrate if migrate is not None else settings.environment != "production":
            upgrade_database(self.engine)
        self._check_guard_row()
        self.registry = self.load_registry()
        metrics.start_series(self.registry.types)
        self.storage = storage or open_storage(settings)
        self.transport = transport or self._make_transport()
        self.self_url = self_url
        #: The API's own base URL; unlike ``self_url`` it never follows the providers.
        self.api_url = self_url
        self.provider_client = ProviderClient(
            token=settings.internal_token,
            connect_timeout=settings.provider.connect_timeout_seconds,
            read_timeout=settings.provider.read_timeout_seconds,
            attempts=settings.provider.request_attempts,
            max_retry_after=settings.provider.max_retry_after_seconds,
            db_timeout_pauses=settings.provider.db_timeout_retry_seconds,
        )
        self.context = RunContext(
            settings=settings,
            registry=self.registry,
            storage=self.storage,
            provider=self.provider_client,
            topic=settings.command_topic,
            self_url=self_url,
        )
        self.publisher = Publisher(
            self.engine,
            self.transport,
            owner=settings.instance_id,
            batch_size=settings.publisher.batch_size,
            lease_seconds=settings.publisher.lease_seconds,
            backoff_seconds=settings.publisher.backoff_seconds,
            probe_seconds=settings.publisher.probe_seconds,
        )
        self.consumer = Consumer(
            self.engine,
            self.transport,
            self.context,
            owner=settings.instance_id,
            threads=settings.consumer.concurrency,
        )
        #: Free bytes below which the storage is low on space (``storage.low_space_mb``).
        self.low_space_bytes = int(settings.storage.low_space_mb * 2**20)
        self.reconciler = Reconciler(
            self.engine,
            self.storage,
            settings.reconciler,
            topic=settings.command_topic,
            max_lease_recoveries=settings.task.max_lease_recoveries,
            low_space_bytes=self.low_space_bytes,
        )
        self.scheduler = Scheduler(
            self.engine,
            self.registry,
            settings,
            owner=settings.instance_id,
            on_created=self.publish_soon,
        )
        self.dlq_handler = DlqHandler(self.engine, self._dead_letters())
        #: The notification channels by name: webhooks, and e-mail and the chat robots
        #: as the settings configure them (the robots post with ``notify_http``).
        self.webhooks = WebhookChannel(self.engine, settings.notify)
        self.notify_http = httpx.Client(
            timeout=settings.notify.send_timeout_seconds, follow_redirects=False
        )
        self.notify_channels: dict[str, Channel] = {
            "webhook": self.webhooks,
            **channels_from_settings(settings, self.notify_http),
        }
        self.notifier = Notifier(
            self.engine,
            settings,
            self.notify_channels,
            owner=settings.instance_id,
            base_url=lambda: settings.api.public_base_url or self.api_url,
            type_titles=self.type_titles,
            link_seconds=lambda code: link_ttl(
                settings.api.download_link_ttl_seconds, self.registry.get(code)
            ),
        )
        self._runner: LoopRunner | None = None
        self._on_stop: list[Callable[[], None]] = []
        #: The embedded default's sample-provider child process, when there is one
        #: (its health is part of readiness).
        self.sample_providers: SampleProviderProcess | None = None

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` at the end of :meth:`stop`, after the loops and consumers
        have stopped (e.g. to stop a helper process the exports were calling)."""
        self._on_stop.append(callback)

    def _make_transport(self) -> Transport:
        s = self.settings
        if s.transport == "memory":
            return MemoryTransport()
        from export_center.transport.rocketmq import RocketMQTransport

        return RocketMQTransport(
            s.rocketmq.endpoint,
            s.command_topic,
            s.worker_group,
            invisible_seconds=s.rocketmq.invisible_seconds,
            await_seconds=s.rocketmq.await_seconds,
            request_timeout=s.rocketmq.request_timeout_seconds,
            consume=s.loop_enabled(s.consumer),
        )

    def _dead_letters(self) -> DlqReceiver | None:
        s = self.settings
        if not s.dlq_enabled:
            return None
        if isinstance(self.transport, MemoryTransport):
            return self.transport.dead_letter_receiver()
        if s.transport != "rocketmq":
            return None
        from export_center.transport.rocketmq import RocketMQDeadLetters

        return RocketMQDeadLetters(
            s.rocketmq.endpoint,
            s.dlq_topic,
            s.dlq_group,
            await_seconds=s.rocketmq.await_seconds,
            request_timeout=s.rocketmq.request_timeout_seconds,
        )

    def _check_guard_row(self) -> None:
        with self.engine.connect() as conn:
            present = repository.guard_row_exists(conn)
        if not present:
            raise RuntimeError(
                "export_task_guard row GLOBAL_CREATE is missing: run `export-center db upgrade`"
            )

    def load_registry(self) -> Registry:
        """Read the registry :func:`~export_center.registry_source.registry_source`
        decides for the settings.

        Raises:
            RegistryError: there is none, or the file is invalid (start-up stops).
        """
        return open_registry(self.settings)

    def reload_registry(self, actor: str = "system:sighup") -> Registry:
        """Reload the registry file; keeps the old one and raises when the new one is
        invalid. Either outcome is written to the audit trail, naming ``actor``.

        Raises:
            RegistryError: the new file is invalid (the old registry stays).
        """
        try:
            fresh = self.load_registry()
        except RegistryError as exc:
            self._audit_reload(actor, "refused", str(exc), None)
            raise
        self.registry.replace(fresh)
        metrics.start_series(fresh.types)
        self._audit_reload(actor, "reloaded", None, sorted(fresh.types))
        log.info(
            "export-type registry reloaded from %s: %s",
            fresh.source,
            ", ".join(sorted(fresh.types)),
        )
        return self.registry

    def _audit_reload(
        self, actor: str, outcome: str, reason: str | None, types: list[str] | None
    ) -> None:
        try:
            with self.engine.begin() as conn:
                repository.record_audit(
                    conn,
                    actor=actor,
                    action=repository.AuditAction.REGISTRY_RELOAD,
                    outcome=outcome,
                    reason=reason,
                    details={
                        "source": str(self.settings.export_types_file or "samples"),
                        "exportTypes": types,
                    }
                    if types is not None
                    else None,
                )
        except Exception:  # the reload itself stands; the trail gap is logged
            log.exception("could not write the registry reload to the audit trail")

    def type_titles(self, code: str) -> tuple[str, str] | None:
        """The (English, Chinese) names of export type ``code``; None when unknown
        (the Chinese name falls back to the English one)."""
        etype = self.registry.get(code)
        return None if etype is None else (etype.title, etype.title_zh or etype.title)

    def set_self_url(self, url: str) -> None:
        """Send the providers registered as ``self`` to ``url`` (the embedded sample
        providers' child process, on its port); links in notifications keep pointing
        at the API (:attr:`api_url`)."""
        self.self_url = url
        self.context.self_url = url

    def start(self) -> None:
        """Start the enabled loops and the consumer threads.

        With the in-process transport, commands sent before this process started were
        lost with the previous process: they are sent again at once (instead of after
        the reconciler's stale window), so queued tasks run as soon as the service is
        back.
        """
        s = self.settings
        if s.loop_enabled(s.consumer):
            tune_gc(s.consumer.gc_gen0_threshold)
        if isinstance(self.transport, MemoryTransport) and s.loop_enabled(s.publisher):
            with self.engine.begin() as conn:
                lost = repository.stale_sent_outbox_ids(conn, 0, 0, 100_000)
                for row_id in lost:
                    repository.resend_outbox_row(conn, row_id)
            if lost:
                log.info("sent again %d command(s) lost with the previous process", len(lost))
        self._runner = LoopRunner()
        if s.loop_enabled(s.reconciler):
            self._runner.add("reconciler", self.reconciler, s.reconciler.loop_seconds)
        if s.loop_enabled(s.publisher):
            self._runner.add("publisher", self.publisher, s.publisher.loop_seconds)
        if s.loop_enabled(s.notify):
            self._runner.add("notifier", self.notifier, s.notify.loop_seconds)
        if s.loop_enabled(s.scheduler):
            self._runner.add("scheduler", self.scheduler, s.scheduler.loop_seconds)
        self._runner.start()
        if s.loop_enabled(s.consumer):
            self.consumer.start()
        self.dlq_handler.start()

    def publish_soon(self) -> None:
        """Run the outbox publisher's next pass now instead of at its next tick.

        Called after a create commits, so a new task is dispatched in milliseconds
        instead of up to ``publisher.loop_seconds`` later. The publisher's own claim
        (lease) logic is unchanged; without a publisher loop here this does nothing.
        """
        if self._runner is not None:
            self._runner.run_soon("publisher")

    def begin_shutdown(self) -> None:
        """First step of a graceful stop: running attempts hand their tasks back at the next
        check (no retry used) and the consumer takes no new command."""
        self.context.stopping.set()
        self.consumer.request_stop()
        if self._runner is not None:
            self._runner.pause()  # no more sends into a transport that is going away

    def stop(self) -> None:
        """Stop loops and consumers, then release connections."""
        self.begin_shutdown()
        if self._runner is not None:
            self._runner.stop()
            self._runner = None
        self.consumer.stop()
        self.dlq_handler.stop()
        if self.dlq_handler.receiver is not None:
            self.dlq_handler.receiver.close()
        self.transport.close()
        self.provider_client.close()
        self.notifier.close()
        self.webhooks.close()
        self.notify_http.close()
        self.engine.dispose()
        for callback in reversed(self._on_stop):
            try:
                callback()
            except Exception:  # one failing step must not keep the others from running
                log.exception("a stop step failed")
        self._on_stop.clear()
