"""How a task looks in the API: :func:`task_public` and the progress figures.

Times from the database are naive UTC; the API writes them with ``Z``. A succeeded
task gets a download link signed for the viewer, in the narrowest scope in which the
viewer sees it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from export_center.api.schemas import ExportPublic, TaskError
from export_center.api.service import link_scope
from export_center.auth import Identity
from export_center.errors import RETRY_CANNOT_HELP
from export_center.links import link_expiry, sign_download
from export_center.settings import Settings
from export_center.states import TaskStatus, api_state

__all__ = ["first_end_seconds", "progress_rate", "task_public", "utc"]


def utc(value: Any) -> Any:
    """A database time (naive UTC, or its ISO text on SQLite) as an aware UTC datetime;
    anything else unchanged."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return (
        value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value
    )


def progress_rate(task: Mapping[str, Any]) -> tuple[float | None, int | None]:
    """Rows per second since the attempt started, and the seconds left at that rate.

    Returns:
        ``(rows_per_second, eta_seconds)``; None for each that cannot be known yet (no
        row written, no start time, or no total from the provider).
    """
    started = utc(task["started_at"])
    processed = int(task["processed_rows"] or 0)
    if started is None or processed <= 0:
        return None, None
    elapsed = (datetime.now(UTC) - started).total_seconds()
    if elapsed <= 0:
        return None, None
    rate = processed / elapsed
    total = task["total_rows"]
    eta = None
    if total is not None and total >= processed:
        eta = int(round((int(total) - processed) / rate))
    return round(rate, 1), eta


def first_end_seconds(active: Sequence[Mapping[str, Any]]) -> int:
    """Seconds until the first of ``active`` is expected to end (1..300; 10 when no
    running task has a rate and a total yet): a 429's ``Retry-After``."""
    etas = [eta for eta in (progress_rate(task)[1] for task in active) if eta is not None]
    return max(1, min(300, min(etas) + 1)) if etas else 10


def task_public(settings: Settings, task: Mapping[str, Any], viewer: Identity) -> ExportPublic:
    """Render a task row for ``viewer``: state, progress, times, error or warning, and a
    download link signed for the viewer once it succeeded."""
    status = TaskStatus(task["status"])
    error = None
    if task["failure_message"] and status != TaskStatus.SUCCEEDED:
        error = TaskError(code=task["failure_code"], message=task["failure_message"])
    url = None
    url_expires = None
    if status == TaskStatus.SUCCEEDED:
        ttl = settings.api.download_link_ttl_seconds
        now = time.time()
        url = sign_download(
            settings.download_secret,
            task["task_no"],
            viewer.user,
            link_scope(task, viewer),
            ttl,
            now=now,
        )
        url_expires = datetime.fromtimestamp(link_expiry(ttl, now=now), UTC)
    finished = task["completed_at"] if status.is_terminal else None
    rate, eta = progress_rate(task) if status == TaskStatus.RUNNING else (None, None)
    has_file_times = status in (TaskStatus.SUCCEEDED, TaskStatus.EXPIRED)
    # Queued with the failure of an earlier attempt kept: waiting for the automatic retry.
    retry_at = (
        utc(task["next_retry_at"])
        if status == TaskStatus.PENDING and task["failure_code"]
        else None
    )
    retryable = status == TaskStatus.FAILED and task["failure_code"] not in RETRY_CANNOT_HELP
    return ExportPublic(
        taskId=task["task_no"],
        exportType=task["export_type"],
        format=str(task["format"]).lower(),
        taskName=task["task_name"],
        owner=task["requested_by"],
        parameters=orjson.loads(task["parameters_json"]),
        timeZone=task["time_zone"],
        state=api_state(status),
        phase=task["phase"],
        processed=task["processed_rows"],
        shardsDone=task["shards_done"],
        shardsTotal=task["shards_total"],
        total=task["total_rows"],
        attempts=task["attempt_count"],
        maxAttempts=task["max_attempts"],
        nextRetryAt=retry_at,
        retryable=retryable,
        requestedAt=utc(task["requested_at"]),
        startedAt=utc(task["started_at"]),
        finishedAt=utc(finished),
        expiresAt=utc(task["expires_at"]) if has_file_times else None,
        error=error,
        warning=task["warning_message"] if status == TaskStatus.SUCCEEDED else None,
        cancelRequested=bool(task["cancel_requested"]),
        rowsPerSecond=rate,
        etaSeconds=eta,
        downloadUrl=url,
        downloadExpiresAt=url_expires,
        fileName=task["file_name"],
        sizeBytes=task["size_bytes"],
    )
