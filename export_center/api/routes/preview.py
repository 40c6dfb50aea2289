"""``POST /api/v1/exports/preview``: what an export would give, before it exists."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header

from export_center.api.deps import CurrentUser, RuntimeDep, TraceId, strict_query
from export_center.api.file_schemas import PreviewPublic
from export_center.api.openapi import AUTH, BODY, errors
from export_center.api.preview import preview_export
from export_center.api.preview_render import render_preview
from export_center.api.schemas import ExportCreate

__all__ = ["PREVIEW_ERRORS", "router"]

router = APIRouter(prefix="/api/v1/exports", tags=["exports"], dependencies=[Depends(strict_query)])

#: Error answers of a preview: the create's checks and the provider's failures.
PREVIEW_ERRORS = errors(
    BODY,
    AUTH,
    {
        403: ["PERMISSION_DENIED"],
        409: ["EXPORT_TYPE_DISABLED"],
        422: [
            "MISSING_FIELD",
            "UNKNOWN_FIELD",
            "TOO_LONG",
            "TOO_SHORT",
            "INVALID_TYPE",
            "INVALID_VALUE",
            "UNKNOWN_EXPORT_TYPE",
            "INVALID_FORMAT",
            "FORMAT_NOT_INSTALLED",
            "INVALID_TIME_ZONE",
            "UNKNOWN_PARAMETER",
            "INVALID_DATE",
            "INVALID_DATE_RANGE",
            "UNKNOWN_COLUMN",
            "DUPLICATE_COLUMN",
            "INVALID_OPTION",
            "OPTION_NOT_SUPPORTED",
            "INVALID_SPLIT",
        ],
        502: ["PROVIDER_CONTRACT", "PROVIDER_REJECTED"],
        503: ["PROVIDER_UNAVAILABLE"],
    },
)


@router.post("/preview", response_model=PreviewPublic, responses=PREVIEW_ERRORS)
def preview(
    body: ExportCreate,
    user: CurrentUser,
    runtime: RuntimeDep,
    trace_id: TraceId,
    accept_language: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> PreviewPublic:
    """Rows, columns, first rows, bytes, files and warnings of an export; creates nothing."""
    found = preview_export(runtime, user, body, accept_language=accept_language, trace_id=trace_id)
    return render_preview(found, byte_cap=runtime.settings.file_size_cap_bytes)
