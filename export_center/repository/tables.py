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

__all__ = ["AUDIT", "CREATE_GUARD", "OUTBOX", "REQUEST_KEYS", "SHARDS", "TASKS"]

#: ``export_task``: one row per export a user asked for.
TASKS = cast(Table, ExportTask.__table__)
#: ``export_outbox``: one command per dispatch version, written with the task change.
OUTBOX = cast(Table, ExportOutbox.__table__)
#: ``export_task_guard``: the single row that serializes creates.
CREATE_GUARD = cast(Table, ExportTaskGuard.__table__)
#: ``export_request_key``: idempotency keys and the task each answered.
REQUEST_KEYS = cast(Table, ExportRequestKey.__table__)
#: ``export_audit``: every disposal, append-only.
AUDIT = cast(Table, ExportAudit.__table__)
#: ``export_shard``: the shards of sharded exports and their checkpoints.
SHARDS = cast(Table, ExportShard.__table__)
