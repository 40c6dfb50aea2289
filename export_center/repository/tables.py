"""The export center's tables as SQLAlchemy Core objects, named for what they hold.

Every module of the repository package builds its statements on these; nothing else in
the service writes SQL (the models in :mod:`export_center.models` stay the single
definition of the columns).
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table

from export_center.models import (
    ExportAudit,
    ExportOutbox,
    ExportRequestKey,
    ExportShard,
    ExportTask,
    ExportTaskGuard,
)
from export_center.models_governance import ExportApproval
from export_center.models_notify import (
    ExportDeliveryAttempt,
    ExportNotification,
    ExportPrincipal,
    ExportSchedule,
    ExportScheduleRun,
    ExportWebhookEndpoint,
)
from export_center.models_quota import ExportQuota

__all__ = [
    "APPROVALS",
    "AUDIT",
    "CREATE_GUARD",
    "DELIVERY_ATTEMPTS",
    "NOTIFICATIONS",
    "OUTBOX",
    "PRINCIPALS",
    "QUOTAS",
    "REQUEST_KEYS",
    "SCHEDULES",
    "SCHEDULE_RUNS",
    "SHARDS",
    "TASKS",
    "WEBHOOK_ENDPOINTS",
]

#: ``export_task``: one row per export a user asked for.
TASKS = cast(Table, ExportTask.__table__)
#: ``export_outbox``: one command per dispatch version, written with the task change.
OUTBOX = cast(Table, ExportOutbox.__table__)
#: ``export_task_guard``: the create-guard rows, one per scope (repository/guards.py).
CREATE_GUARD = cast(Table, ExportTaskGuard.__table__)
#: ``export_request_key``: idempotency keys and the task each answered.
REQUEST_KEYS = cast(Table, ExportRequestKey.__table__)
#: ``export_audit``: every disposal, append-only.
AUDIT = cast(Table, ExportAudit.__table__)
#: ``export_shard``: the shards of sharded exports and their checkpoints.
SHARDS = cast(Table, ExportShard.__table__)
#: ``export_schedule``: saved export definitions with a cron schedule.
SCHEDULES = cast(Table, ExportSchedule.__table__)
#: ``export_schedule_run``: one row per fire (coalesced fires: one row).
SCHEDULE_RUNS = cast(Table, ExportScheduleRun.__table__)
#: ``export_principal``: a user's last-seen claims and notification defaults.
PRINCIPALS = cast(Table, ExportPrincipal.__table__)
#: ``export_notification``: the notification outbox (and the in-page list).
NOTIFICATIONS = cast(Table, ExportNotification.__table__)
#: ``export_delivery_attempt``: every delivery attempt, append-only.
DELIVERY_ATTEMPTS = cast(Table, ExportDeliveryAttempt.__table__)
#: ``export_approval``: approval requests and decisions (one per waiting task).
APPROVALS = cast(Table, ExportApproval.__table__)
#: ``export_webhook_endpoint``: tenants' webhook endpoints and secrets.
WEBHOOK_ENDPOINTS = cast(Table, ExportWebhookEndpoint.__table__)
#: ``export_quota``: per-day quota overrides of tenants and users.
QUOTAS = cast(Table, ExportQuota.__table__)
