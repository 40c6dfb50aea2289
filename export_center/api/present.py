"""How a task looks in the API: :func:`task_public` and the progress figures.

Times from the database are naive UTC; the API writes them with ``Z``. A succeeded
task gets a download link signed for the viewer, in the narrowest scope in which the
viewer sees it. What people did to the task (the last retry by hand, who asked for a
cancel) comes from the audit trail: :func:`tasks_public` reads it for a whole page in
one query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from export_center import repository
from export_center.access import link_scope
from export_center.api.schemas import ActorPublic, ExportPublic, RetryPublic, TaskError
from export_center.auth import Identity
from export_center.db import reading
from export_center.errors import RETRY_CANNOT_HELP
from export_center.filespec import FileSpec
from export_center.link_limits import link_ttl
from export_center.links import link_expiry, sign_download
from export_center.repository import Disposition, Task
from export_center.runtime import Runtime
from export_center.settings import Settings
from export_center.states import TaskStatus, api_state
from export_center.writers.formats import task_format

__all__ = [
    "RETRY_UNLIKELY_TO_HELP",
    "first_end_seconds",
    "one_public",
    "progress_rate",
    "task_public",
    "tasks_public",
    "utc",
]

#: Failure codes that a retry of the same export usually meets again: the provider
#: refused the request (a 4xx other than 408/429, 501, 505), redirected it, broke the
#: contract or sent a value the file cannot hold, until someone fixes the provider or
#: its registration; and the codes a retry cannot help at all (:data:`RETRY_CANNOT_HELP`).
#: A retry of such a task is still allowed (the provider may have been fixed); the page
#: says that it will probably fail again.
RETRY_UNLIKELY_TO_HELP = RETRY_CANNOT_HELP | frozenset(
    {
        "PROVIDER_REJECTED",
        "PROVIDER_REDIRECTED",
        "PROVIDER_CONTRACT",
        "INVALID_VALUE",
        "VALUE_NOT_REPRESENTABLE",
        "UNKNOWN_COLUMN",
    }
)


def utc(value: Any) -> Any:
    """A database time (naive UTC, or its ISO text on SQLite) as an aware UTC datetime;
    anything else unchanged."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return (
        value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value
    )


def progress_rate(task: Task) -> tuple[float | None, int | None]:
    """Rows per second since the attempt started, and the seconds left at that rate.

    Returns:
        ``(rows_per_second, eta_seconds)``; None for each that cannot be known yet (no
        row written, no start time, or no total from the provider).
    """
    started = utc(task.started_at)
    processed = int(task.processed_rows or 0)
    if started is None or processed <= 0:
        return None, None
    elapsed = (datetime.now(UTC) - started).total_seconds()
    if elapsed <= 0:
        return None, None
    rate = processed / elapsed
    total = task.total_rows
    eta = None
    if total is not None and total >= processed:
        eta = int(round((int(total) - processed) / rate))
    return round(rate, 1), eta


def first_end_seconds(active: Sequence[Task]) -> int:
    """Seconds until the first of ``active`` is expected to end (1..300; 10 when no
    running task has a rate and a total yet): a 429's ``Retry-After``."""
    etas = [eta for eta in (progress_rate(task)[1] for task in active) if eta is not None]
    return max(1, min(300, min(etas) + 1)) if etas else 10


def tasks_public(runtime: Runtime, tasks: Sequence[Task], viewer: Identity) -> list[ExportPublic]:
    """Render ``tasks`` for ``viewer`` (:func:`task_public`), with what people did to each
    (one read of the audit trail for all of them)."""
    with reading(runtime.engine) as conn:
        done = repository.dispositions(conn, [task.id for task in tasks])
    ttl = runtime.settings.api.download_link_ttl_seconds
    return [
        task_public(
            runtime.settings,
            task,
            viewer,
            done.get(task.id),
            link_seconds=link_ttl(ttl, runtime.registry.get(task.export_type)),
        )
        for task in tasks
    ]


def one_public(runtime: Runtime, task: Task, viewer: Identity) -> ExportPublic:
    """:func:`tasks_public` of one task (detail, cancel, retry)."""
    return tasks_public(runtime, [task], viewer)[0]


def _actor(actor: str | None, task: Task) -> ActorPublic | None:
    if actor is None:
        return None
    role, user = repository.actor_role(actor, tenant_id=task.tenant_id, owner=task.requested_by)
    return ActorPublic(role=role, user=user)


def task_public(
    settings: Settings,
    task: Task,
    viewer: Identity,
    disposition: Disposition | None = None,
    *,
    link_seconds: int | None = None,
) -> ExportPublic:
    """Render a task row for ``viewer``: state, progress, times, error or warning, a
    download link signed for the viewer once it succeeded, and (from ``disposition``,
    the task's audit trail) the last retry by hand and who asked for a cancel."""
    done = disposition or Disposition()
    status = TaskStatus(task.status)
    error = None
    if task.failure_message and status != TaskStatus.SUCCEEDED:
        error = TaskError(code=task.failure_code, message=task.failure_message)
    url = None
    url_expires = None
    if status == TaskStatus.SUCCEEDED:
        ttl = link_seconds or settings.api.download_link_ttl_seconds
        now = time.time()
        url = sign_download(
            settings.download_secret,
            task.task_no,
            viewer.user,
            link_scope(task, viewer),
            ttl,
            now=now,
        )
        url_expires = datetime.fromtimestamp(link_expiry(ttl, now=now), UTC)
    finished = task.completed_at if status.is_terminal else None
    rate, eta = progress_rate(task) if status == TaskStatus.RUNNING else (None, None)
    has_file_times = status in (TaskStatus.SUCCEEDED, TaskStatus.EXPIRED)
    # Queued with the failure of an earlier attempt kept: waiting for the automatic retry.
    retry_at = (
        utc(task.next_retry_at) if status == TaskStatus.PENDING and task.failure_code else None
    )
    failed = status == TaskStatus.FAILED
    retryable = failed and task.failure_code not in RETRY_CANNOT_HELP
    retried_by = _actor(done.retried_by, task)
    file_spec = FileSpec.from_text(task.file_spec_json)
    return ExportPublic(
        taskId=task.task_no,
        exportType=task.export_type,
        format=str(task.format).lower(),
        taskName=task.task_name,
        owner=task.requested_by,
        scheduleId=task.schedule_id,
        notify=orjson.loads(task.notify_json) if task.notify_json else None,
        parameters=orjson.loads(task.parameters_json),
        timeZone=task.time_zone,
        state=api_state(status),
        phase=task.phase,
        processed=task.processed_rows,
        shardsDone=task.shards_done,
        shardsTotal=task.shards_total,
        total=task.total_rows,
        attempts=task.attempt_count,
        maxAttempts=task.max_attempts,
        nextRetryAt=retry_at,
        retryable=retryable,
        retryUnlikelyToHelp=failed and task.failure_code in RETRY_UNLIKELY_TO_HELP,
        lastRetry=(
            RetryPublic(at=utc(done.retried_at), by=retried_by)
            if retried_by is not None and done.retried_at is not None
            else None
        ),
        requestedAt=utc(task.requested_at),
        startedAt=utc(task.started_at),
        finishedAt=utc(finished),
        expiresAt=utc(task.expires_at) if has_file_times else None,
        error=error,
        warning=task.warning_message if status == TaskStatus.SUCCEEDED else None,
        cancelRequested=bool(task.cancel_requested),
        cancelledBy=_actor(done.cancelled_by, task) if task.cancel_requested else None,
        rowsPerSecond=rate,
        etaSeconds=eta,
        downloadUrl=url,
        downloadExpiresAt=url_expires,
        fileName=task.file_name,
        sizeBytes=task.size_bytes,
        columns=file_spec.to_json()["columns"],
        options=file_spec.options_for(task_format(task.format)),
        manifestUrl=(
            f"/api/v1/exports/{task.task_no}/manifest"
            if status == TaskStatus.SUCCEEDED and task.manifest_json is not None
            else None
        ),
    )
