"""Prometheus metrics .

Counters and histograms are updated where the event happens; the gauges that
describe the database (queue age, outbox backlog) are computed from SQL when
``/metrics`` is scraped (:func:`refresh_gauges`), so every instance reports the same
truth.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram
from sqlalchemy import Engine

__all__ = [
    "DLQ_MESSAGES",
    "OUTBOX_SEND_FAILURES",
    "PROVIDER_FAILURES",
    "PROVIDER_SECONDS",
    "RECONCILER_ACTIONS",
    "ROWS_PROCESSED",
    "STORAGE_BYTES",
    "TASKS_COMPLETED",
    "TASKS_CREATED",
    "TASK_DURATION",
    "refresh_gauges",
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
ROWS_PROCESSED = Counter("export_rows_processed_total", "Rows written to files", ["type"])
PROVIDER_SECONDS = Histogram(
    "export_provider_request_seconds", "Provider batch request seconds", ["type"]
)
PROVIDER_FAILURES = Counter(
    "export_provider_failure_total", "Provider requests that failed", ["type", "reason"]
)
OUTBOX_SEND_FAILURES = Counter("export_outbox_send_failures_total", "Failed outbox sends")
RECONCILER_ACTIONS = Counter("export_reconciler_action_total", "Reconciler actions", ["action"])
DLQ_MESSAGES = Counter("export_dlq_messages_total", "Messages read from the dead-letter queue")
STORAGE_BYTES = Counter("export_storage_bytes", "Bytes of files stored")

QUEUE_AGE = Gauge("export_task_queue_age_seconds", "Age of the oldest due PENDING task")
OUTBOX_PENDING = Gauge("export_outbox_pending", "Outbox rows not yet sent")
OUTBOX_OLDEST_AGE = Gauge("export_outbox_oldest_age_seconds", "Age of the oldest unsent row")
OUTBOX_MAX_ATTEMPT = Gauge("export_outbox_max_attempt", "Highest attempt_count of unsent rows")


def refresh_gauges(engine: Engine) -> None:
    """Recompute the database gauges with the database clock (three bounded queries)."""
    from export_center import repository

    with engine.connect() as conn:
        figures = repository.queue_figures(conn)
    QUEUE_AGE.set(figures.queue_age_seconds)
    OUTBOX_PENDING.set(figures.outbox_pending)
    OUTBOX_MAX_ATTEMPT.set(figures.outbox_max_attempt)
    OUTBOX_OLDEST_AGE.set(figures.outbox_oldest_age_seconds)
