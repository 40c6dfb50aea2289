"""Raw rows for tests that write the tables directly (migrations, collations): every
column an ``export_task`` row needs since the first migration, with plain defaults."""

from __future__ import annotations

from typing import Any

from export_center.db import db_now


def task_row(**values: Any) -> dict[str, Any]:
    """Values of one ``export_task`` INSERT: a queued CSV ORDERS export of user ``u`` in
    tenant ``t``, overridden by ``values``."""
    row: dict[str, Any] = {
        "task_no": "exp_01J8Z4K2000000000000000000",
        "export_type": "ORDERS",
        "format": "CSV",
        "task_name": "x",
        "parameters_json": "{}",
        "parameters_hash": "0" * 64,
        "tenant_id": "t",
        "app_code": "PLATFORM",
        "requested_by": "u",
        "status": "PENDING",
        "phase": "queued",
        "processed_rows": 0,
        "dispatch_version": 1,
        "attempt_count": 0,
        "max_attempts": 3,
        "next_retry_at": db_now(),
        "cancel_requested": False,
        "trace_id": "t" * 32,
        "requested_at": db_now(),
        "updated_at": db_now(),
    }
    row.update(values)
    return row
