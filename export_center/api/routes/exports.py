"""``/api/v1/exports``: create, list, detail, manifest, download, cancel, retry.

Thin routes: each parses its request, calls one function of
:mod:`export_center.api.service` and presents the result with
:func:`export_center.api.present.tasks_public`.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response

from export_center.api import service
from export_center.api.deps import (
    CurrentUser,
    IdempotencyKey,
    OptionalUser,
    RuntimeDep,
    TraceId,
    strict_query,
)
from export_center.api.downloads import serve_download
from export_center.api.error_pages import DownloadErrorsRoute
from export_center.api.file_schemas import ManifestPublic
from export_center.api.openapi import AUTH, BODY, GUARD, QUERY, errors
from export_center.api.present import one_public, tasks_public
from export_center.api.schemas import ExportAccepted, ExportCreate, ExportPublic, ExportsPublic
from export_center.errors import NotFound
from export_center.filespec import GZIP_MEDIA_TYPE, ZIP_MEDIA_TYPE
from export_center.manifests import signed_manifest
from export_center.repository import CreateReason
from export_center.states import api_state
from export_center.writers.formats import FORMATS

__all__ = [
    "CREATE_ERRORS",
    "CREATE_REPLAYED",
    "TASK_CODES",
    "TASK_ERRORS",
    "accepted",
    "router",
]

router = APIRouter(prefix="/api/v1/exports", tags=["exports"], dependencies=[Depends(strict_query)])

#: Error answers of create (v1 and the older order-export alias).
CREATE_ERRORS = errors(
    BODY,
    AUTH,
    {
        403: ["PERMISSION_DENIED", "ROW_CEILING"],
        409: ["EXPORT_TYPE_DISABLED", "IDEMPOTENCY_KEY_REUSED"],
    },
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
            "UNKNOWN_COLUMN",
            "DUPLICATE_COLUMN",
            "INVALID_OPTION",
            "OPTION_NOT_SUPPORTED",
            "INVALID_SPLIT",
            "FORMAT_NOT_INSTALLED",
            "INVALID_NOTIFY",
            "RECIPIENT_NOT_ALLOWED",
            "EMAIL_NOT_CONFIGURED",
            "UNKNOWN_ROBOT",
            "RECIPIENT_UNKNOWN",
        ],
        429: ["TOO_MANY_ACTIVE_TASKS", "TOO_MANY_ACTIVE_TASKS_FOR_TYPE", "QUOTA_EXCEEDED"],
    },
    {502: ["PROVIDER_CONTRACT", "PROVIDER_REJECTED"], 503: ["PROVIDER_UNAVAILABLE"]},
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
#: The download's media types: one per format of the table, without parameters.
_FILE_CONTENT = {
    **{entry.media_type: _CONTENT_FILE for entry in FORMATS.values()},
    GZIP_MEDIA_TYPE: _CONTENT_FILE,
    ZIP_MEDIA_TYPE: _CONTENT_FILE,
}
DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The file, with `Content-Disposition: attachment; filename=...; "
        "filename*=UTF-8''...` (answered to a signed link).",
        "content": _FILE_CONTENT,
    },
    206: {
        "description": "One byte range of the file (S3 storage with `download = proxy`: "
        "`Range: bytes=first-last`, `Content-Range` in the answer).",
        "content": _FILE_CONTENT,
    },
    307: {
        "description": "With a bearer token: redirect to a signed link (valid 24 h by "
        "default). With a signed link on S3 storage (`download = redirect`): redirect to a "
        "presigned GET of the bucket, signed for this click (5 min by default, never past "
        "the file's retention).",
        "headers": {"Location": {"schema": {"type": "string"}}},
    },
    **errors(
        QUERY,
        AUTH,
        {
            403: ["LINK_INVALID", "LINK_EXPIRED", "LINK_NOT_YOURS"],
            410: ["FILE_EXPIRED", "LINK_REVOKED", "LINK_USED_UP"],
            404: ["TASK_NOT_FOUND", "FILE_GONE"],
            409: ["NO_FILE", "NOT_READY"],
            416: ["RANGE_NOT_SATISFIABLE"],
            503: ["STORAGE_UNAVAILABLE"],
        },
    ),
}
_NAVIGATION_PAGE = (
    ". A browser navigation (`Sec-Fetch-Mode: navigate` or `Sec-Fetch-Dest: document`; "
    "without those, `Accept` starting with `text/html`) gets a short HTML page instead, in "
    "the language of `Accept-Language` (Chinese or English), with a link to the download "
    "center."
)
for _status, _answer in DOWNLOAD_RESPONSES.items():
    if int(_status) >= 400:
        _answer["description"] += _NAVIGATION_PAGE
        _answer["content"]["text/html"] = {"schema": {"type": "string"}}


def accepted(created: service.Created, response: Response, progress_prefix: str) -> ExportAccepted:
    """The answer to a create: 202 when made now; 200 with ``Idempotent-Replayed`` or
    ``Duplicate-Of-Active-Task`` when an existing task answered."""
    if created.reason is CreateReason.CREATED:
        response.status_code = 202
    elif created.reason is CreateReason.IDEMPOTENT:
        response.status_code = 200
        response.headers["Idempotent-Replayed"] = "true"
    else:  # the same export asked again within the duplicate window
        response.status_code = 200
        response.headers["Duplicate-Of-Active-Task"] = "true"
    task = created.task
    return ExportAccepted(
        taskId=task.task_no,
        state=api_state(task.status),
        progressUrl=f"{progress_prefix}{task.task_no}",
    )


#: The route arguments of create (v1 and the older order-export alias).
CREATE_ROUTE: dict[str, Any] = {
    "status_code": 202,
    "response_model": ExportAccepted,
    "responses": {**CREATE_REPLAYED, **CREATE_ERRORS},
}


@router.post("", **CREATE_ROUTE)
def create(
    body: ExportCreate,
    request: Request,
    user: CurrentUser,
    runtime: RuntimeDep,
    response: Response,
    idempotency_key: IdempotencyKey,
    trace_id: TraceId,
) -> ExportAccepted:
    """Create an export task; answers at once with its id (202, or 200 for a replay)."""
    created = service.create_export(
        runtime, user, body, idempotency_key, trace_id, request.headers.get("accept-language")
    )
    return accepted(created, response, "/api/v1/exports/")


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
    rows, next_cursor = service.list_visible(
        runtime, user, state=state, export_types=types, owner=owner, limit=limit, cursor=cursor
    )
    return ExportsPublic(items=tasks_public(runtime, rows, user), nextCursor=next_cursor)


@router.get("/{task_id}", response_model=ExportPublic, responses=errors(QUERY, AUTH, TASK_CODES))
def detail(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> ExportPublic:
    """State, phase and progress of one task; a signed link once it succeeded."""
    return one_public(runtime, service.visible_task(runtime, task_id, user), user)


@router.get(
    "/{task_id}/manifest",
    response_model=None,
    responses={
        200: {"model": ManifestPublic, "description": "The signed manifest"},
        **errors(QUERY, AUTH, {404: ["TASK_NOT_FOUND", "MANIFEST_NOT_FOUND"]}),
    },
)
def manifest(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> Response:
    """The signed manifest of a succeeded export: its files with rows, bytes and SHA-256,
    the control totals and the snapshot token (``export-center verify`` checks a file
    against it)."""
    task = service.visible_task(runtime, task_id, user)
    body = signed_manifest(task, runtime.settings.manifest_secret)
    if body is None:
        raise NotFound(
            "this export has no manifest: it has not succeeded (or succeeded before "
            "manifests were recorded)",
            code="MANIFEST_NOT_FOUND",
        )
    return Response(
        orjson.dumps(body), media_type="application/json", headers={"Cache-Control": "no-store"}
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
    link: Annotated[str | None, Query(description="signed link: its id")] = None,
    issued: Annotated[str | None, Query(description="signed link: issued (Unix ms)")] = None,
) -> Response:
    """Download the file: with a bearer token, redirect to a signed link; with a link, the
    file (or, on S3, a redirect to a presigned GET, or the file streamed with Range).
    Every answer is recorded in the download audit (export_center.api.downloads)."""
    if signature is None:
        return serve_download(runtime, request, task_id, user, None)
    fields = {"expires": expires, "user": link_user, "tenant": tenant, "app": app}
    signed = {"scope": scope, "link": link, "issued": issued}
    query = {name: value or "" for name, value in {**fields, **signed}.items()}
    return serve_download(runtime, request, task_id, user, {**query, "signature": signature})


# A browser that opens a failing link (from a chat, a bookmark) gets a short page in its
# language instead of the JSON body (export_center.api.error_pages).
router.add_api_route(
    "/{task_id}/download",
    download,
    methods=["GET"],
    responses=DOWNLOAD_RESPONSES,
    # A bearer token, or none with a signed link.
    openapi_extra={"security": [{}, {"HTTPBearer": []}]},
    route_class_override=DownloadErrorsRoute,
)
# HEAD on a download (download managers and link checkers ask it first): the same
# checks and headers as GET, no body. Kept out of the OpenAPI schema.
router.add_api_route(
    "/{task_id}/download",
    download,
    methods=["HEAD"],
    include_in_schema=False,
    route_class_override=DownloadErrorsRoute,
)


@router.post(
    "/{task_id}/cancel",
    status_code=202,
    response_model=ExportPublic,
    responses=errors(GUARD, AUTH, TASK_CODES, {409: ["NOT_CANCELLABLE"]}),
)
def cancel(task_id: str, user: CurrentUser, runtime: RuntimeDep) -> ExportPublic:
    """Cancel a queued task at once, or ask a running one to stop (within 10 s)."""
    return one_public(runtime, service.cancel_task(runtime, user, task_id), user)


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
def retry(
    task_id: str,
    user: CurrentUser,
    runtime: RuntimeDep,
    fresh: Annotated[
        bool,
        Query(
            description="Start every shard from zero instead of resuming from the "
            "checkpoints of the failed run"
        ),
    ] = False,
) -> ExportPublic:
    """Run a failed export again (new dispatch version, counters reset); a sharded export
    resumes from its checkpoints unless ``fresh=true``."""
    return one_public(runtime, service.retry_task(runtime, user, task_id, fresh=fresh), user)
