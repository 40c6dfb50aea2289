"""Prometheus metrics (names of seed 002 §13 and seed 000).

Counters and histograms are updated where the event happens; the gauges that
describe the database (queue age, outbox backlog) are computed from SQL when
``/metrics`` is scraped (:func:`refresh_gauges`), so every instance reports the same
truth.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram
from sqlalchemy import ColumnElement, Engine, func, literal_column, select

from export_center.db import db_now
from export_center.models import ExportOutbox, ExportTask
from export_center.states import OutboxStatus, TaskStatus

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


def _age_seconds(engine: Engine, column: ColumnElement[object]) -> ColumnElement[float]:
    if engine.dialect.name == "sqlite":
        expr = (func.julianday(db_now()) - func.julianday(func.min(column))) * 86400.0
    else:
        expr = func.timestampdiff(literal_column("MICROSECOND"), func.min(column), db_now()) / 1e6
    return expr


def refresh_gauges(engine: Engine) -> None:
    """Recompute the database gauges with the database clock."""
    t, o = ExportTask.__table__, ExportOutbox.__table__
    unsent = [OutboxStatus.PENDING.value, OutboxStatus.CLAIMED.value]
    with engine.connect() as conn:
        age = conn.execute(
            select(_age_seconds(engine, t.c.next_retry_at)).where(
                t.c.status == TaskStatus.PENDING.value, t.c.next_retry_at <= db_now()
            )
        ).scalar()
        QUEUE_AGE.set(float(age or 0.0))
        pending, max_attempt = conn.execute(
            select(func.count(), func.max(o.c.attempt_count)).where(o.c.status.in_(unsent))
        ).one()
        OUTBOX_PENDING.set(pending)
        OUTBOX_MAX_ATTEMPT.set(max_attempt or 0)
        oldest = conn.execute(
            select(_age_seconds(engine, o.c.created_at)).where(o.c.status.in_(unsent))
        ).scalar()
        OUTBOX_OLDEST_AGE.set(float(oldest or 0.0))
