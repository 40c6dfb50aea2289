"""``/api/v1/exports``: create, list, detail, download, cancel, retry (DESIGN.md "API")."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import FileResponse, RedirectResponse

from export_center import metrics, repository
from export_center.access import Scope, in_scope, scope_of
from export_center.api.deps import CurrentUser, OptionalUser, RuntimeDep, strict_query
from export_center.api.openapi import AUTH, BODY, GUARD, QUERY, errors
from export_center.api.params import validate_parameters, validate_time_zone
from export_center.api.schemas import (
    ExportAccepted,
    ExportCreate,
    ExportPublic,
    ExportsPublic,
    TaskError,
)
from export_center.api.service import link_scope, task_in_scope, visible_task
from export_center.auth import Identity
from export_center.commands import COMMAND_TAG
from export_center.errors import (
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    TooManyActiveTasks,
    Unauthorized,
    ValidationFailed,
)
from export_center.filenames import content_disposition
from export_center.ids import TASK_NO_PATTERN
from export_center.links import link_expiry, sign_download, verify_download
from export_center.runtime import Runtime
from export_center.states import TaskStatus, api_state

__all__ = [
    "CREATE_ERRORS",
    "CREATE_REPLAYED",
    "TASK_ERRORS",
    "create_export",
    "router",
    "task_public",
]

#: Query fields of a signed download link (all of them are signed).
LINK_FIELDS = ("expires", "user", "tenant", "app", "scope", "signature")

router = APIRouter(prefix="/api/v1/exports", tags=["exports"], dependencies=[Depends(strict_query)])

#: Error answers of create (v1 and the seed-000 alias).
CREATE_ERRORS = errors(
    BODY,
    AUTH,
    {403: ["PERMISSION_DENIED"], 409: ["EXPORT_TYPE_DISABLED", "IDEMPOTENCY_KEY_REUSED"]},
    {
        422: [
            "MISSING_FIELD",
            "UNKNOWN_FIELD",
            "TOO_LONG",
            "TOO_SHORT",
            "INVALID_TYPE",
            "INVALID_VALUE",
            "UNKNOWN_EXPORT_TYPE",
            "INVALID_FORMAT",
            "INVALID_TIME_ZONE",
            "IDEMPOTENCY_KEY_MISMATCH",
            "INVALID_IDEMPOTENCY_KEY",
            "TOO_MANY_PARAMETERS",
            "PARAMETERS_TOO_LARGE",
            "PARAMETERS_TOO_DEEP",
            "PARAMETER_TOO_LONG",
            "UNKNOWN_PARAMETER",
            "INVALID_DATE",
            "INVALID_DATE_RANGE",
        ],
        429: ["TOO_MANY_ACTIVE_TASKS", "TOO_MANY_ACTIVE_TASKS_FOR_TYPE"],
    },
)
#: The 200 of a create that returns an existing task (replayed key or duplicate request).
CREATE_REPLAYED: dict[int | str, dict[str, Any]] = {
    200: {
        "model": ExportAccepted,
        "description": "The task already exists: the same requestId / Idempotency-Key was "
        "used for the same export (header `Idempotent-Replayed: true`), or the same export "
        "is still active and was asked for within 60 s (header "
        "`Duplicate-Of-Active-Task: true`).",
        "headers": {
            "Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}},
            "Duplicate-Of-Active-Task": {"schema": {"type": "string", "enum": ["true"]}},
        },
    },
    202: {"description": "Created; the export runs in the background."},
}
#: The error of a single-task lookup, and the answers of a route that only looks one up.
TASK_CODES: dict[int, list[str]] = {404: ["TASK_NOT_FOUND"]}
TASK_ERRORS = errors(AUTH, TASK_CODES)
_CONTENT_FILE = {"schema": {"type": "string", "format": "binary"}}
DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The file, with `Content-Disposition: attachment; filename=...; "
        "filename*=UTF-8''...` (answered to a signed link).",
        "content": {
            "text/csv": _CONTENT_FILE,
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": _CONTENT_FILE,
        },
    },
    307: {
        "description": "With a bearer token: redirect to a signed link valid 24 h.",
        "headers": {"Location": {"schema": {"type": "string"}}},
    },
    **errors(
        QUERY,
        AUTH,
        {
            403: ["LINK_INVALID", "LINK_EXPIRED", "LINK_NOT_YOURS"],
            404: ["TASK_NOT_FOUND", "FILE_GONE"],
            409: ["NO_FILE", "NOT_READY"],
            410: ["FILE_EXPIRED"],
        },
    ),
}
_STATE_FILTER = {
    "queued": TaskStatus.PENDING,
    "running": TaskStatus.RUNNING,
    "succeeded": TaskStatus.SUCCEEDED,
    "failed": TaskStatus.FAILED,
    "cancelled": TaskStatus.CANCELLED,
    "expired": TaskStatus.EXPIRED,
}


def _utc(value: Any) -> Any:
    """Database times are UTC; say so in the API (``...Z``)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return (
        value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value
    )


def task_public(runtime: Runtime, task: Mapping[str, Any], viewer: Identity) -> ExportPublic:
    """Render a task row for the API; the download link is signed for ``viewer``."""
    status = TaskStatus(task["status"])
    error = None
    if task["failure_message"] and status != TaskStatus.SUCCEEDED:
        error = TaskError(code=task["failure_code"], message=task["failure_message"])
    url = None
    url_expires = None
    if status == TaskStatus.SUCCEEDED:
        ttl = runtime.settings.api.download_link_ttl_seconds
        now = time.time()
        url = sign_download(
            runtime.settings.download_secret,
            task["task_no"],
            viewer.user,
            link_scope(task, viewer),
            ttl,
            now=now,
        )
        url_expires = datetime.fromtimestamp(link_expiry(ttl, now=now), UTC)
    finished = task["completed_at"] if status.is_terminal else None
    rate, eta = _rate(task) if status == TaskStatus.RUNNING else (None, None)
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
        total=task["total_rows"],
        attempts=task["attempt_count"],
        requestedAt=_utc(task["requested_at"]),
        startedAt=_utc(task["started_at"]),
        finishedAt=_utc(finished),
        expiresAt=(
            _utc(task["expires_at"])
            if status in (TaskStatus.SUCCEEDED, TaskStatus.EXPIRED)
            else None
        ),
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


def _first_end(active: Sequence[Mapping[str, Any]]) -> int:
    """Seconds until the first of ``active`` is expected to end (1..300; 10 when no
    running task has a rate and a total yet)."""
    etas = [eta for eta in (_rate(task)[1] for task in active) if eta is not None]
    return max(1, min(300, min(etas) + 1)) if etas else 10


def _rate(task: Mapping[str, Any]) -> tuple[float | None, int | None]:
    """Rows per second since the attempt started, and the seconds left at that rate.

    Returns:
        ``(rows_per_second, eta_seconds)``; None for each that cannot be known yet (no
        row written, no start time, or no total from the provider).
    """
    started = _utc(task["started_at"])
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


def create_export(
    runtime: Runtime,
    user: Identity,
    body: ExportCreate,
    idempotency_key: str | None,
    response: Response,
    progress_prefix: str = "/api/v1/exports/",
) -> ExportAccepted:
    """Validate and create one export (shared by the v1 route and the seed-000 alias)."""
    etype = runtime.registry.get(body.exportType)
    if etype is None:
        raise ValidationFailed(
            f"unknown export type {body.exportType!r}",
            code="UNKNOWN_EXPORT_TYPE",
            field="exportType",
        )
    if not user.can(etype.required_permission) or user.app_code != etype.app_scope:
        # Same answer as an unknown type would leak which types exist; 403 is honest here
        # because the caller can list the types it may use.
        raise Forbidden(f"you may not create {etype.code} exports", code="PERMISSION_DENIED")
    if not etype.enabled:
        raise Conflict(f"{etype.code} exports are disabled", code="EXPORT_TYPE_DISABLED")
    fmt = body.format.strip().upper()
    if fmt not in ("CSV", "XLSX"):
        raise ValidationFailed(
            f"format must be csv or xlsx, got {body.format!r}",
            code="INVALID_FORMAT",
            field="format",
        )
    if (
        idempotency_key is not None
        and body.requestId is not None
        and idempotency_key != body.requestId
    ):
        raise ValidationFailed(
            "Idempotency-Key and requestId differ",
            code="IDEMPOTENCY_KEY_MISMATCH",
            field="requestId",
        )
    request_id = body.requestId or idempotency_key
    if request_id is not None and not 0 < len(request_id) <= 128:
        raise ValidationFailed(
            "Idempotency-Key must have 1..128 characters",
            code="INVALID_IDEMPOTENCY_KEY",
            field="requestId",
        )
    parameters = validate_parameters(etype, body.parameters)
    time_zone = validate_time_zone(body.timeZone, runtime.settings.task.time_zone)
    new = repository.NewTask(
        export_type=etype.code,
        format=fmt,
        task_name=(body.taskName or "").strip() or f"{etype.title} export",
        parameters=parameters,
        tenant_id=user.tenant,
        app_code=user.app_code,
        requested_by=user.user,
        max_attempts=etype.max_attempts,
        request_id=request_id,
        time_zone=time_zone,
    )
    limits = runtime.settings.limits
    try:
        with runtime.engine.begin() as conn:
            result = repository.create_task(
                conn,
                new,
                topic=runtime.settings.command_topic,
                tag=COMMAND_TAG,
                limits=repository.CreateLimits(
                    duplicate_window_seconds=limits.duplicate_window_seconds,
                    max_active_per_user=limits.max_active_per_user,
                    max_active_per_type=limits.max_active_per_type,
                ),
            )
    except repository.LimitReached as exc:
        if exc.scope == "user":
            message = (
                f"you already have {exc.limit} exports queued or running; wait for one to finish"
            )
        else:
            message = (
                f"too many {etype.code} exports are running right now; try again in a few minutes"
            )
        with runtime.engine.connect() as conn:
            active = repository.active_tasks(
                conn,
                tenant_id=user.tenant if exc.scope == "user" else None,
                requested_by=user.user if exc.scope == "user" else None,
                export_type=etype.code if exc.scope == "type" else None,
            )
        raise TooManyActiveTasks(
            message,
            code="TOO_MANY_ACTIVE_TASKS"
            if exc.scope == "user"
            else "TOO_MANY_ACTIVE_TASKS_FOR_TYPE",
            retry_after=_first_end(active),
        ) from None
    task = result.task
    if result.reason == "key_reused":
        differs = [
            name
            for name, same in (
                ("export type", task["export_type"] == new.export_type),
                ("format", task["format"] == new.format),
                ("time zone", task["time_zone"] == new.time_zone),
                (
                    "parameters",
                    task["parameters_hash"] == repository.canonical_parameters(parameters)[1],
                ),
            )
            if not same
        ]
        label = "requestId" if body.requestId is not None else "Idempotency-Key"
        raise Conflict(
            f"{label} {request_id!r} was already used for another export "
            f"({task['export_type']}, {str(task['format']).lower()}); this request differs "
            f"in {' and '.join(differs) or 'its content'}; use a new key",
            code="IDEMPOTENCY_KEY_REUSED",
            field=label,
        )
    if result.created:
        metrics.TASKS_CREATED.labels(etype.code).inc()
        runtime.publish_soon()  # the outbox row is committed: dispatch it now
        response.status_code = 202
    elif result.reason == "idempotent":
        response.status_code = 200
        response.headers["Idempotent-Replayed"] = "true"
    else:  # the same export asked again within the duplicate window (002 §14)
        response.status_code = 200
        response.headers["Duplicate-Of-Active-Task"] = "true"
    return ExportAccepted(
        taskId=task["task_no"],
        state=api_state(task["status"]),
        progressUrl=f"{progress_prefix}{task['task_no']}",
    )


@router.post(
    "",
    status_code=202,
    response_model=ExportAccepted,
    responses={**CREATE_REPLAYED, **CREATE_ERRORS},
)
def create(
    body: ExportCreate,
    user: CurrentUser,
    runtime: RuntimeDep,
    response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> ExportAccepted:
    """Create an export task; answers at once with its id (202, or 200 for a replay)."""
    return create_export(runtime, user, body, idempotency_key, response)


@router.get(
    "",
    response_model=ExportsPublic,
    responses=errors(
        QUERY,
        AUTH,
        {403: ["PERMISSION_DENIED"], 422: ["INVALID_STATE", "INVALID_CURSOR", "INVALID_VALUE"]},
    ),
)
def list_exports(
    request: Request,
    user: CurrentUser,
    runtime: RuntimeDep,
    state: Annotated[
        str | None, Query(description="queued, running, ... (comma-separated)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(description="nextCursor of the previous page")] = None,
    export_type: Annotated[
        str | None,
        Query(alias="exportType", description="ORDERS, ... (comma-separated)", max_length=1000),
    ] = None,
    owner: Annotated[
        str | None,
        Query(
            description="Only this user's tasks (with platform:download:all; others see "
            "only their own anyway)",
            max_length=128,
        ),
    ] = None,
) -> ExportsPublic:
    """List the caller's tasks (all of the tenant's with download-all), newest first."""
    types = [t.strip() for t in export_type.split(",") if t.strip()] if export_type else None
    statuses = None
    if state:
        try:
            statuses = [
                _STATE_FILTER[s.strip().lower()].value for s in state.split(",") if s.strip()
            ]
        except KeyError:
            raise ValidationFailed(
                f"state must be among {', '.join(_STATE_FILTER)}",
                code="INVALID_STATE",
                field="state",
            ) from None
    before_id = None
    if cursor:
        if not TASK_NO_PATTERN.match(cursor):
            raise ValidationFailed(
                "cursor must be the nextCursor of a previous page",
                code="INVALID_CURSOR",
                field="cursor",
            )
        try:
            before_id = visible_task(runtime, cursor, user)["id"]
        except NotFound:
            raise ValidationFailed(
                "cursor must be the nextCursor of a previous page of this list",
                code="INVALID_CURSOR",
                field="cursor",
            ) from None
    scope = scope_of(user)
    if owner is not None and owner != user.user and scope.owner is not None:
        raise Forbidden(
            "only platform:download:all may list other users' tasks",
            code="PERMISSION_DENIED",
        )
    if owner is not None:
        scope = Scope(tenant_id=scope.tenant_id, app_code=scope.app_code, owner=owner)
    with runtime.engine.connect() as conn:
        rows = repository.list_tasks(
            conn,
            scope=scope,
            statuses=statuses,
            export_types=types,
            limit=limit + 1,
            before_id=before_id,
        )
    more = len(rows) > limit
    next_cursor = rows[limit - 1]["task_no"] if more else None
    # The same rule in Python on every row: a database whose collation ignored case or
    # trailing spaces still could not widen the list.
    rows = [row for row in rows[:limit] if in_scope(row, scope)]
    return ExportsPublic(
        items=[task_public(runtime, r, user) for r in rows],
        nextCursor=next_cursor,
    )


@router.get("/{task_id}", response_model=ExportPublic, responses=errors(QUERY, AUTH, TASK_CODES))
def detail(task_id: str, request: Request, user: CurrentUser, runtime: RuntimeDep) -> ExportPublic:
    """State, phase and progress of one task; a signed link once it succeeded."""
    return task_public(runtime, visible_task(runtime, task_id, user), user)


@router.get(
    "/{task_id}/download",
    responses=DOWNLOAD_RESPONSES,
    # A bearer token, or none with a signed link.
    openapi_extra={"security": [{}, {"HTTPBearer": []}]},
)
def download(
    task_id: str,
    request: Request,
    runtime: RuntimeDep,
    user: OptionalUser,
    expires: Annotated[str | None, Query(description="signed link: expiry (Unix s)")] = None,
    link_user: Annotated[str | None, Query(alias="user", description="signed link: user")] = None,
    tenant: Annotated[str | None, Query(description="signed link: tenant")] = None,
    app: Annotated[str | None, Query(description="signed link: app code")] = None,
    scope: Annotated[str | None, Query(description="signed link: own or all")] = None,
    signature: Annotated[str | None, Query(description="signed link: HMAC-SHA256")] = None,
) -> Response:
    """Download the file: with a bearer token, redirect to a signed link; with a link, the file."""
    if signature is None:
        if user is None:
            raise Unauthorized("a bearer token or a signed link is required", code="UNAUTHORIZED")
        task = visible_task(runtime, task_id, user)
        _require_file(task)
        url = sign_download(
            runtime.settings.download_secret,
            task["task_no"],
            user.user,
            link_scope(task, user),
            runtime.settings.api.download_link_ttl_seconds,
        )
        return RedirectResponse(url, status_code=307)
    if not TASK_NO_PATTERN.match(task_id):
        raise NotFound("no such export task", code="TASK_NOT_FOUND")
    grant = verify_download(
        runtime.settings.download_secret,
        task_id,
        user=link_user or "",
        tenant=tenant or "",
        app=app or "",
        scope=scope or "",
        expires=expires or "",
        signature=signature,
    )
    if user is not None and (
        user.user != grant.user
        or user.tenant != grant.scope.tenant_id
        or user.app_code != grant.scope.app_code
    ):
        raise Forbidden("this download link was issued to another user", code="LINK_NOT_YOURS")
    # The link's own scope decides, with the rule every route applies.
    task = task_in_scope(runtime, task_id, grant.scope)
    _require_file(task)
    with runtime.engine.connect() as conn:
        if repository.retention_passed(conn, task["id"]):
            raise Gone("the file has expired; export again")
    key = task["object_key"]
    if not runtime.storage.exists(key):
        raise NotFound("the file is no longer stored", code="FILE_GONE")
    return FileResponse(
        runtime.storage.local_path(key),
        media_type=task["content_type"],
        headers={"Content-Disposition": content_disposition(task["file_name"])},
    )


# HEAD on a download (download managers and link checkers ask it first): the same
# checks and headers as GET, no body. Kept out of the OpenAPI schema.
router.add_api_route("/{task_id}/download", download, methods=["HEAD"], include_in_schema=False)


def _require_file(task: Mapping[str, Any]) -> None:
    status = TaskStatus(task["status"])
    if status == TaskStatus.EXPIRED:
        raise Gone("the file has expired and was deleted; export again")
    if status in (TaskStatus.FAILED, TaskStatus.CANCELLED):
        raise Conflict(f"the export is {api_state(status)}; it has no file", code="NO_FILE")
    if status != TaskStatus.SUCCEEDED or not task["object_key"]:
        raise Conflict(f"the export is {api_state(status)}, no file yet", code="NOT_READY")


@router.post(
    "/{task_id}/cancel",
    status_code=202,
    response_model=ExportPublic,
    responses=errors(GUARD, AUTH, TASK_CODES, {409: ["NOT_CANCELLABLE"]}),
)
def cancel(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> ExportPublic:
    """Cancel a queued task at once, or ask a running one to stop (within 10 s)."""
    task = visible_task(runtime, task_id, user)
    with runtime.engine.begin() as conn:
        outcome = repository.request_cancel(conn, task["id"])
        fresh = repository.read_task(conn, task["id"])
    if outcome is None:
        raise Conflict(
            f"the export is {api_state(task['status'])} and cannot be cancelled",
            code="NOT_CANCELLABLE",
        )
    assert fresh is not None
    return task_public(runtime, fresh, user)


@router.post(
    "/{task_id}/retry",
    status_code=202,
    response_model=ExportPublic,
    responses=errors(
        GUARD,
        AUTH,
        TASK_CODES,
        {403: ["PERMISSION_DENIED"], 409: ["EXPORT_TYPE_DISABLED", "NOT_RETRYABLE"]},
    ),
)
def retry(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> ExportPublic:
    """Run a failed export again (new dispatch version, counters reset)."""
    task = visible_task(runtime, task_id, user)
    etype = runtime.registry.get(task["export_type"])
    if etype is None or not etype.enabled:
        raise Conflict(f"{task['export_type']} exports are disabled", code="EXPORT_TYPE_DISABLED")
    if not user.can(etype.required_permission) or user.app_code != etype.app_scope:
        raise Forbidden(f"you may not run {etype.code} exports", code="PERMISSION_DENIED")
    if task["status"] != TaskStatus.FAILED:
        raise Conflict(
            f"only failed exports can be retried; this one is {api_state(task['status'])}",
            code="NOT_RETRYABLE",
        )
    old_key = task["object_key"]
    if old_key:
        runtime.storage.delete(old_key)
    with runtime.engine.begin() as conn:
        fresh = repository.manual_retry(
            conn, task["id"], topic=runtime.settings.command_topic, tag=COMMAND_TAG
        )
    if fresh is None:
        raise Conflict("the export changed state; reload it", code="NOT_RETRYABLE")
    return task_public(runtime, fresh, user)
