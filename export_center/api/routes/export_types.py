"""``GET /api/v1/export-types``: the types the caller may create, with their form fields;
``GET /api/v1/export-types/{type}``: one of them with its columns."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.file_schemas import ExportTypeDetail, TypeColumnPublic
from export_center.api.openapi import AUTH, QUERY, errors
from export_center.api.schemas import ExportTypePublic, ParameterPublic
from export_center.api.type_columns import declared_columns, visible_type
from export_center.columns import Column
from export_center.registry import ExportType
from export_center.writers.formats import format_names

__all__ = ["column_public", "router", "type_public"]

router = APIRouter(tags=["exports"], dependencies=[Depends(strict_query)])


def type_public(etype: ExportType) -> ExportTypePublic:
    """An export type as a create form needs it: names in English and Chinese, fields."""
    return ExportTypePublic(
        exportType=etype.code,
        title=etype.title,
        titleZh=etype.title_zh or etype.title,
        formats=format_names(),
        parameters=[
            ParameterPublic(
                name=p.name,
                type=p.type,
                required=p.required,
                values=list(p.values) if p.values else None,
                valueTitles=dict(p.value_titles) or None,
                valueTitlesZh=dict(p.value_titles_zh) or None,
                title=p.title or p.name,
                titleZh=p.title_zh or p.title or p.name,
            )
            for p in etype.parameters
        ],
        dateRange=list(etype.date_range) if etype.date_range else None,
        maxRows=etype.max_rows,
    )


@router.get("/api/v1/export-types", response_model=list[ExportTypePublic], responses=errors(AUTH))
def export_types(user: CurrentUser, runtime: RuntimeDep) -> list[ExportTypePublic]:
    """Export types the caller may create (permission, app scope, enabled)."""
    return [
        type_public(t)
        for t in runtime.registry
        if t.enabled and user.can(t.required_permission) and user.app_code == t.app_scope
    ]


def column_public(column: Column) -> TypeColumnPublic:
    """A declared column as a column picker needs it (titles in both languages)."""
    return TypeColumnPublic(
        key=column.key,
        title=column.title,
        titles={"en": column.title, "zh-CN": column.title_zh or column.title},
        type=column.type.value,
        precision=column.precision,
        scale=column.scale,
    )


@router.get(
    "/api/v1/export-types/{export_type}",
    response_model=ExportTypeDetail,
    responses=errors(
        QUERY,
        AUTH,
        {
            404: ["UNKNOWN_EXPORT_TYPE"],
            502: ["PROVIDER_CONTRACT", "PROVIDER_REJECTED"],
            503: ["PROVIDER_UNAVAILABLE"],
        },
    ),
)
def export_type_detail(
    export_type: str, user: CurrentUser, runtime: RuntimeDep
) -> ExportTypeDetail:
    """One export type the caller may create, with its columns (registry or provider)."""
    etype = visible_type(runtime, user, export_type)
    columns = declared_columns(runtime, etype)
    return ExportTypeDetail(
        **type_public(etype).model_dump(),
        columns=[column_public(c) for c in columns],
        columnsSource="registry" if etype.columns else "provider",
    )
