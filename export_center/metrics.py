"""Prometheus metrics of the export center.

Rule: every process serves its own metrics and is its own scrape target. ``serve``
answers ``GET /metrics`` on its API port; each ``export-center worker --metrics-port
PORT`` answers on its own port (:func:`start_metrics_server`). Prometheus scrapes all
of them under one job and sums the counters across targets.

Why one port per process and not prometheus-client's multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR``): workers are separate commands that usually run on
separate hosts or containers, and multiprocess mode only adds up processes that share
one directory on one host, which must also be wiped before every start. A scrape
target per process also gives each process its own ``up`` series, so a dead worker is
seen (alert ``ExportMetricsDown``) instead of silently leaving the sum. The cost is one
scrape target per worker (service discovery lists them).

Counters and histograms live in the process's default registry and are updated where
the event happens; they are per process and restart at 0 with it (``rate()`` and
``increase()`` handle that). The gauges that describe the database (queue age, outbox
backlog: only commands that are due; automatic retries scheduled for later are counted
apart) are not stored in any process: :class:`DatabaseGauges` computes them with
:func:`export_center.repository.queue_figures` when a scrape collects, on the
database clock, so every target reports the same database truth of that moment. Read
them with ``max()`` across targets, never ``sum()``.

The storage gauges (:class:`StorageGauges`) are read the same way, at each scrape, from
the volume the process writes export files to: free bytes, size and the low-space
threshold (``storage.low_space_mb``), so the alert ``ExportStorageLowSpace`` compares
two series of the same target. Object storage has no fixed size and reports none. A
volume is shared by the processes on one host: read these with ``min()`` by
``instance``, never ``sum()``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, Counter, Histogram, generate_latest, start_http_server
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from export_center.storage.base import reported_space

if TYPE_CHECKING:
    from export_center.storage.base import Storage

__all__ = [
    "APPROVAL_DECISIONS",
    "DLQ_MESSAGES",
    "NOTIFICATION_DEAD",
    "OUTBOX_SEND_FAILURES",
    "PROVIDER_FAILURES",
    "PROVIDER_SECONDS",
    "QUOTA_REFUSALS",
    "RECONCILER_ACTIONS",
    "ROWS_PROCESSED",
    "SAMPLE_PROVIDER_EXITS",
    "SHARDS_RUN",
    "DOWNLOADS",
    "STORAGE_BYTES",
    "TASKS_COMPLETED",
    "TASKS_CREATED",
    "TASK_DURATION",
    "DatabaseGauges",
    "StorageGauges",
    "MetricsServer",
    "ProcessMetrics",
    "exposition",
    "series_names",
    "start_metrics_server",
    "start_series",
]

TASKS_CREATED = Counter("export_task_created_total", "Tasks created", ["type"])
TASKS_COMPLETED = Counter(
    "export_task_completed_total", "Execution attempts ended, by outcome", ["type", "status"]
)
TASK_DURATION = Histogram(
    "export_task_duration_seconds",
    "Seconds from claim to success",
    ["type", "format"],
    buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600),
)
QUOTA_REFUSALS = Counter(
    "export_quota_refusals_total",
    "Creates refused by a daily quota, by reason: user_tasks, user_rows, tenant_tasks, tenant_rows",
    ["reason"],
)
ROWS_PROCESSED = Counter("export_rows_processed_total", "Rows written to files", ["type"])
PROVIDER_SECONDS = Histogram(
    "export_provider_request_seconds", "Provider batch request seconds", ["type"]
)
PROVIDER_FAILURES = Counter(
    "export_provider_failure_total", "Provider requests that failed", ["type", "reason"]
)
OUTBOX_SEND_FAILURES = Counter("export_outbox_send_failures_total", "Failed outbox sends")
SHARDS_RUN = Counter(
    "export_shards_run_total",
    "Distributed shards claimed and run in this process, by who ran them (coordinator: "
    "a thread of the attempt that holds the task; helper: a runner woken by a shard "
    "wake-up, in any worker) and how the run ended (done, failed, stopped, handed_back)",
    ["type", "runner", "outcome"],
)
RECONCILER_ACTIONS = Counter("export_reconciler_action_total", "Reconciler actions", ["action"])
DLQ_MESSAGES = Counter("export_dlq_messages_total", "Messages read from the dead-letter queue")
STORAGE_BYTES = Counter("export_storage_bytes", "Bytes of files stored")
NOTIFICATION_DEAD = Counter(
    "export_notification_dead",
    "Notifications marked dead (not delivered within notify.max_age_hours, or never "
    "deliverable), by channel",
    ["channel"],
)
DOWNLOADS = Counter(
    "export_downloads_total",
    "Download answers recorded in the download audit, by type (bearer, link, presigned) "
    "and answer code",
    ["type", "status"],
)
APPROVAL_DECISIONS = Counter(
    "export_approval_decisions_total",
    "Approval requests decided, by type and outcome (approved, rejected, expired)",
    ["type", "outcome"],
)
SAMPLE_PROVIDER_EXITS = Counter(
    "export_sample_provider_exits",
    "Times the sample-provider child process of the embedded default died (it is "
    "restarted each time)",
)

# increase() needs a sample before the first event: a series born at 1 shows no
# increase, so the first lease recovery of a process would never reach the alert
# ExportLeaseRecoveries. The series is exported at 0 from the start.
RECONCILER_ACTIONS.labels("lease_recover")
# The same for the first dead notification of each channel (ExportNotificationDead).
for _channel in ("webhook", "email", "feishu", "dingtalk", "wecom"):
    NOTIFICATION_DEAD.labels(_channel)

#: The outcomes an attempt can end with (``export_task_completed_total{status}``).
ATTEMPT_OUTCOMES = ("succeeded", "retry", "failed", "cancelled", "released", "lease_lost")


def start_series(export_types: Iterable[str]) -> None:
    """Export the per-type series at 0 for every registered type, so that the first
    event of a type is seen as an increase (a series born at 1 is not one, and the
    first failures of a type would never count towards ExportFailureRate)."""
    for code in export_types:
        TASKS_CREATED.labels(code)
        ROWS_PROCESSED.labels(code)
        for outcome in ATTEMPT_OUTCOMES:
            TASKS_COMPLETED.labels(code, outcome)


_PROCESS_METRICS: tuple[Counter | Histogram, ...] = (
    TASKS_CREATED,
    TASKS_COMPLETED,
    TASK_DURATION,
    ROWS_PROCESSED,
    PROVIDER_SECONDS,
    PROVIDER_FAILURES,
    OUTBOX_SEND_FAILURES,
    RECONCILER_ACTIONS,
    DLQ_MESSAGES,
    STORAGE_BYTES,
    SAMPLE_PROVIDER_EXITS,
    NOTIFICATION_DEAD,
)

# Sample names Prometheus stores for each metric type (the family name plus these).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
}


class DatabaseGauges(Collector):
    """Queue and outbox gauges read from the database when a scrape collects.

    Nothing is stored between scrapes, so no process can report a stale or summed
    value: each collect runs :func:`export_center.repository.queue_figures` (bounded
    aggregate queries on one connection, database clock). A database that does not
    answer makes the scrape fail, which ``ExportMetricsDown`` reports, rather than
    dropping the gauges (that would quietly resolve ``ExportOutboxBacklog``).

    Args:
        engine: the process's database engine.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "export_task_queue_age_seconds",
                "Seconds the oldest due PENDING task has waited (database clock)",
            ),
            GaugeMetricFamily(
                "export_outbox_pending", "Outbox commands due and not yet sent (the backlog)"
            ),
            GaugeMetricFamily(
                "export_outbox_oldest_age_seconds",
                "Seconds since the oldest due, unsent outbox command became due (database "
                "clock); automatic retries scheduled for later do not count",
            ),
            GaugeMetricFamily(
                "export_outbox_max_attempt", "Highest attempt_count of unsent outbox rows"
            ),
            GaugeMetricFamily(
                "export_outbox_scheduled",
                "Outbox commands of automatic retries whose time has not come (no backlog)",
            ),
            GaugeMetricFamily(
                "export_notification_pending",
                "Notifications written and not yet delivered nor dead (retries included)",
            ),
            GaugeMetricFamily(
                "export_notification_oldest_age_seconds",
                "Seconds since the oldest undelivered notification was written (database clock)",
            ),
            GaugeMetricFamily(
                "export_approval_awaiting",
                "Exports waiting for an approver's decision now, by type",
                labels=["type"],
            ),
        )

    def describe(self) -> Iterable[Metric]:
        """The eight gauge families without values (no query)."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        """The eight gauges: one :func:`queue_figures` call, the notification backlog and
        the exports awaiting approval by type (every tenant).

        Raises:
            sqlalchemy.exc.SQLAlchemyError: the database did not answer.
        """
        from export_center import repository
        from export_center.db import reading
        from export_center.repository.approvals import awaiting_by_type
        from export_center.repository.notification_reads import notification_backlog

        with reading(self.engine) as conn:
            figures = repository.queue_figures(conn)
            notes_pending, notes_age = notification_backlog(conn)
            awaiting_counts = awaiting_by_type(conn)
        families = self._families()
        age, pending, oldest, max_attempt, scheduled, n_pending, n_age, awaiting = families
        age.add_metric([], figures.queue_age_seconds)
        pending.add_metric([], figures.outbox_pending)
        oldest.add_metric([], figures.outbox_oldest_age_seconds)
        max_attempt.add_metric([], figures.outbox_max_attempt)
        scheduled.add_metric([], figures.outbox_scheduled)
        n_pending.add_metric([], notes_pending)
        n_age.add_metric([], notes_age)
        for export_type, count in sorted(awaiting_counts.items()):
            awaiting.add_metric([export_type], count)
        return families


class StorageGauges(Collector):
    """Free space of the volume export files are written to, read when a scrape collects.

    Three gauges, none for object storage (its :meth:`Storage.space` is None):
    ``export_storage_free_bytes`` (what an export may still write),
    ``export_storage_size_bytes`` (the volume) and ``export_storage_low_space_bytes``
    (``storage.low_space_mb`` in bytes; 0: low space is never reported). A volume that
    cannot be read (unmounted, permission lost) reports free bytes 0, so the alert fires
    instead of the series vanishing.

    Args:
        storage: the process's export storage.
        low_space_bytes: the low-space threshold in bytes (>= 0).
    """

    def __init__(self, storage: Storage, low_space_bytes: int) -> None:
        self.storage = storage
        self.low_space_bytes = low_space_bytes

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "export_storage_free_bytes",
                "Bytes an export may still write on the volume of the export files",
            ),
            GaugeMetricFamily(
                "export_storage_size_bytes", "Size in bytes of the volume of the export files"
            ),
            GaugeMetricFamily(
                "export_storage_low_space_bytes",
                "Free bytes below which the storage is low on space (storage.low_space_mb); "
                "0: never",
            ),
        )

    def describe(self) -> Iterable[Metric]:
        """The three gauge families without values (no file-system call)."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        """The three gauges of one ``statvfs`` of the volume; nothing for object storage."""
        space = reported_space(self.storage)
        if space is None:
            return ()
        families = self._families()
        values = (space.free_bytes, space.total_bytes, self.low_space_bytes)
        for family, value in zip(families, values, strict=True):
            family.add_metric([], value)
        return families


class ProcessMetrics(Collector):
    """What one process exposes: its counters and histograms (and prometheus-client's
    process and Python collectors) from the default registry, then the database gauges
    and, given a storage, the storage gauges.

    Args:
        engine: the process's database engine, read at every collect.
        storage: the export storage and its low-space threshold in bytes, or None.
    """

    def __init__(self, engine: Engine, storage: tuple[Storage, int] | None = None) -> None:
        self.database = DatabaseGauges(engine)
        self.storage = StorageGauges(*storage) if storage else None

    def collect(self) -> Iterator[Metric]:
        """Every metric family of this process, database and storage gauges computed now."""
        yield from REGISTRY.collect()
        yield from self.database.collect()
        if self.storage is not None:
            yield from self.storage.collect()


def exposition(engine: Engine, storage: tuple[Storage, int] | None = None) -> bytes:
    """This process's metrics in the Prometheus text format (``GET /metrics``).

    Args:
        engine: the database the gauges are read from.
        storage: the export storage and its low-space threshold in bytes, or None.

    Returns:
        UTF-8 text, content type ``prometheus_client.CONTENT_TYPE_LATEST``.
    """
    return generate_latest(ProcessMetrics(engine, storage))


@dataclass
class MetricsServer:
    """A running metrics endpoint of one process (see :func:`start_metrics_server`)."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self.server.server_address[1])

    def close(self) -> None:
        """Stop answering scrapes and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def start_metrics_server(
    engine: Engine, host: str, port: int, storage: tuple[Storage, int] | None = None
) -> MetricsServer:
    """Serve this process's metrics (any path, ``/metrics`` included) on ``host:port``
    from a daemon thread; what ``export-center worker --metrics-port`` runs.

    Args:
        engine: the database the gauges are read from at each scrape.
        host: bind address (``0.0.0.0`` for a Prometheus on another host).
        port: TCP port.
        storage: the export storage and its low-space threshold in bytes, or None.

    Returns:
        The running server; :meth:`MetricsServer.close` stops it.

    Raises:
        OSError: the port cannot be bound.
    """
    server, thread = start_http_server(port, addr=host, registry=ProcessMetrics(engine, storage))
    return MetricsServer(server, thread)


def series_names() -> frozenset[str]:
    """Every sample name the export center's own metrics produce, as Prometheus stores
    them: counters with ``_total`` and ``_created``, histograms with ``_bucket``,
    ``_count``, ``_sum`` and ``_created``, gauges as named. Process and Python
    collectors of prometheus-client are not included.
    """
    families: list[Metric] = [f for m in _PROCESS_METRICS for f in m.describe()]
    families.extend(DatabaseGauges._families())
    families.extend(StorageGauges._families())
    return frozenset(f.name + suffix for f in families for suffix in _SUFFIXES[f.type])
