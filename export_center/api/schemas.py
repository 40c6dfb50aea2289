"""Request and response bodies of the public API (JSON, camelCase)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictInt

from export_center.api.notify_schemas import NotifyTargets
from export_center.filespec import COMPRESSIONS, DELIMITERS, ENCODINGS, LANGUAGES, LINE_ENDINGS
from export_center.writers.formats import DEFAULT_FORMAT, format_choices, format_names

#: Formats, as the API writes them (a create accepts any letter case): the names of
#: ``writers.formats.FORMATS``, a ``Literal`` of them so the schema lists the enum (mypy,
#: which cannot read a ``Literal`` built at run time, sees ``str``).
if TYPE_CHECKING:
    Format = str
else:
    Format = Literal[tuple(format_names())]
_FORMAT_ENUM: list[JsonValue] = [*format_names()]
#: Task states in the API (DESIGN.md "API").
State = Literal[
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "expired",
    "awaiting_approval",
    "rejected",
]
#: Where a task is: at approval (awaiting it, or rejected there), waiting for a worker,
#: fetching from the provider, writing the file, storing it.
PhaseName = Literal["approval", "queued", "fetch", "render", "store"]

__all__ = [
    "ActorPublic",
    "ExportOptions",
    "SplitOptions",
    "ErrorBody",
    "ExportAccepted",
    "ExportCreate",
    "ExportPublic",
    "ExportTypePublic",
    "ExportsPublic",
    "MePublic",
    "ParameterPublic",
    "LegacyOrderExport",
    "RetryPublic",
    "TaskError",
]


def _in_branch(key: str, value: JsonValue, branch_type: str) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` that sets ``key`` in the ``anyOf`` branch of ``branch_type``
    of an optional field (``str | None``: the enum belongs to the string, not beside the
    null), or on the schema itself when it has no such branch."""

    def place(schema: dict[str, Any]) -> None:
        for branch in schema.get("anyOf", ()):
            if branch.get("type") == branch_type:
                branch[key] = value
                return
        schema[key] = value

    return place


def _enum(values: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    return _in_branch("enum", list(values), "string")


_COLUMN_ITEM: dict[str, JsonValue] = {
    "anyOf": [
        {"type": "string", "description": "A column key of the type", "maxLength": 64},
        {
            "type": "object",
            "description": "A column key and the header title to write",
            "properties": {
                "key": {"type": "string", "maxLength": 64},
                "title": {"type": "string", "minLength": 1, "maxLength": 100},
            },
            "required": ["key"],
            "additionalProperties": False,
        },
    ]
}


class SplitOptions(BaseModel):
    """Where a file is cut into parts (each complete on its own, delivered in one ZIP)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"maxRowsPerFile": 100000}]}
    )

    maxRowsPerFile: StrictInt | None = Field(
        default=None, description="Data rows per part: 1..the type's row cap"
    )
    maxBytesPerFile: StrictInt | None = Field(
        default=None,
        description="Bytes per part: 1024..the file size cap; a part ends before the row "
        "that would take it past this size",
    )


class ExportOptions(BaseModel):
    """How the file is written; each option left out takes its default.

    ``encoding``, ``delimiter``, ``header`` and ``lineEnding`` apply to CSV only (another
    format that names one is refused with ``OPTION_NOT_SUPPORTED``); ``gzip`` applies to
    CSV and JSON Lines."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"language": "zh-CN", "encoding": "gb18030", "delimiter": ",", "header": True},
                {"compression": "zip", "split": {"maxRowsPerFile": 100000}},
            ]
        },
    )

    language: str | None = Field(
        default=None,
        description="Header language (default: from the request's Accept-Language)",
        json_schema_extra=_enum(LANGUAGES),
    )
    encoding: str | None = Field(
        default=None,
        description="CSV text encoding (default utf-8-bom; gb18030 for Excel on Chinese Windows)",
        json_schema_extra=_enum(ENCODINGS),
    )
    delimiter: str | None = Field(
        default=None,
        description="CSV field delimiter (default ,)",
        json_schema_extra=_enum(DELIMITERS),
    )
    header: StrictBool | None = Field(default=None, description="CSV header row (default true)")
    lineEnding: str | None = Field(
        default=None,
        description="CSV record terminator (default crlf)",
        json_schema_extra=_enum(LINE_ENDINGS),
    )
    compression: str | None = Field(
        default=None,
        description="none (default), gzip (CSV, JSON Lines) or zip",
        json_schema_extra=_enum(COMPRESSIONS),
    )
    split: SplitOptions | None = Field(
        default=None, description="Cut the file into parts, delivered as one ZIP"
    )


class ExportCreate(BaseModel):
    """Body of ``POST /api/v1/exports``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "exportType": "ORDERS",
                    "format": "xlsx",
                    "taskName": "September orders",
                    "parameters": {"from": "1995-09-01", "to": "1995-09-30"},
                    "requestId": "7d1c0e2a",
                    "timeZone": "Asia/Shanghai",
                },
                {
                    "exportType": "ORDERS",
                    "format": "csv",
                    "parameters": {"from": "1995-09-01", "to": "1995-09-30"},
                    "columns": ["o_orderkey", {"key": "o_totalprice", "title": "Amount"}],
                    "options": {"language": "zh-CN", "encoding": "gb18030"},
                },
            ]
        },
    )

    exportType: str = Field(min_length=1, max_length=64, description="Registered export type")
    format: str = Field(
        description=f"{format_choices()} (any letter case)",
        json_schema_extra={"enum": _FORMAT_ENUM},
    )
    taskName: str | None = Field(
        default=None, max_length=100, description="Shown in the download center"
    )
    parameters: dict[str, Any] = Field(
        default_factory=dict, description="Filters of the export type"
    )
    requestId: str | None = Field(
        default=None, min_length=1, max_length=128, description="Idempotency key"
    )
    timeZone: str | None = Field(
        default=None,
        max_length=64,
        description="IANA time zone the file's date-times are written in "
        "(default: the deployment's)",
    )
    columns: list[Any] | None = Field(
        default=None,
        max_length=100,
        description="The columns to export in output order: keys of the type "
        "(GET /api/v1/export-types/{type}), each optionally renamed; default: all",
        examples=[["o_orderkey", {"key": "o_totalprice", "title": "Amount"}]],
        json_schema_extra=_in_branch("items", _COLUMN_ITEM, "array"),
    )
    options: ExportOptions | None = Field(default=None, description="How the file is written")
    notify: NotifyTargets = Field(
        default=None,
        description="Who is told when the export ends: targets such as {channel: page}, "
        "{channel: email, to?, events?}, {channel: dingtalk, robot} (default: the user's "
        "notification defaults, else the page)",
        examples=[[{"channel": "page"}, {"channel": "email", "events": ["export.failed"]}]],
    )


class LegacyOrderExport(BaseModel):
    """Body of ``POST /api/orders/export`` (the older order-export shape, an alias of ORDERS)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    requestId: str | None = Field(default=None, min_length=1, max_length=128)
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
    format: str = DEFAULT_FORMAT.name


class ExportAccepted(BaseModel):
    """Answer to a create: where to watch progress."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "taskId": "exp_01KB7Z3Y4V8N2Q6R0S1T2U3V4W",
                    "state": "queued",
                    "progressUrl": "/api/v1/exports/exp_01KB7Z3Y4V8N2Q6R0S1T2U3V4W",
                }
            ]
        }
    )

    taskId: str
    state: State
    progressUrl: str


class TaskError(BaseModel):
    """Why an attempt failed."""

    code: str | None
    message: str


class ActorPublic(BaseModel):
    """Who did something to a task, as its viewer may know it."""

    role: Literal["owner", "administrator", "operator", "system"] = Field(
        description="owner: the user who asked for the export; administrator: another user "
        "of the tenant (with platform:download:all); operator: someone at the operator "
        "command line; system: the service itself"
    )
    user: str | None = Field(
        default=None, description="The user id of an owner or administrator (None otherwise)"
    )


class RetryPublic(BaseModel):
    """The last retry of a failed export by hand (web page, API or operator CLI)."""

    at: datetime = Field(description="When it was asked for")
    by: ActorPublic


class ExportPublic(BaseModel):
    """One task as the download center shows it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "taskId": "exp_01KB7Z3Y4V8N2Q6R0S1T2U3V4W",
                    "exportType": "ORDERS",
                    "format": "xlsx",
                    "taskName": "September orders",
                    "owner": "alice",
                    "parameters": {"from": "1995-09-01", "to": "1995-09-30"},
                    "timeZone": "Asia/Shanghai",
                    "state": "succeeded",
                    "phase": "store",
                    "processed": 15408,
                    "total": 15408,
                    "attempts": 1,
                    "maxAttempts": 3,
                    "nextRetryAt": None,
                    "retryable": False,
                    "retryUnlikelyToHelp": False,
                    "lastRetry": None,
                    "requestedAt": "2026-12-01T03:20:11.204000Z",
                    "startedAt": "2026-12-01T03:20:11.260000Z",
                    "finishedAt": "2026-12-01T03:20:11.980000Z",
                    "expiresAt": "2026-12-08T03:20:11.980000Z",
                    "error": None,
                    "warning": None,
                    "cancelRequested": False,
                    "cancelledBy": None,
                    "downloadUrl": "/api/v1/exports/exp_01KB7Z3Y4V8N2Q6R0S1T2U3V4W/download"
                    "?expires=1796095211&user=alice&tenant=acme&app=PLATFORM&scope=own"
                    "&signature=5f0c...",
                    "fileName": "September orders.xlsx",
                    "sizeBytes": 1843712,
                }
            ]
        }
    )

    taskId: str
    exportType: str
    format: Format
    taskName: str
    owner: str = Field(description="User who asked for the export")
    scheduleId: int | None = Field(
        default=None, description="The schedule whose run made this task (None: a person)"
    )
    notify: list[dict[str, Any]] | None = Field(
        default=None, description="The notify targets the create named (None: the defaults)"
    )
    parameters: dict[str, Any] = Field(description="The export's parameters, as created")
    timeZone: str
    state: State
    phase: PhaseName
    processed: int
    total: int | None
    shardsDone: int | None = Field(
        default=None, description="Sharded export: shards whose part is complete"
    )
    shardsTotal: int | None = Field(
        default=None, description="Sharded export: shards in all (None when not sharded)"
    )
    attempts: int = Field(description="Attempts of this run (a manual retry starts at 0)")
    maxAttempts: int = Field(
        default=1, description="Automatic attempts a run may use before it fails"
    )
    nextRetryAt: datetime | None = Field(
        default=None,
        description="Queued after a failed attempt: when the automatic retry is due",
    )
    retryable: bool = Field(
        default=False,
        description="Failed, and a retry of the same export can succeed (false when it would "
        "meet the same row or size limit again)",
    )
    retryUnlikelyToHelp: bool = Field(
        default=False,
        description="Failed with a code that a retry of the same export usually meets again "
        "(the data source refused the request, redirected it or broke the provider contract, "
        "or a row or size limit): a retry only helps once that was fixed",
    )
    lastRetry: RetryPublic | None = Field(
        default=None,
        description="The last retry by hand, if any; on a failed export it means that the "
        "retried run failed again",
    )
    requestedAt: datetime | None
    startedAt: datetime | None
    finishedAt: datetime | None
    expiresAt: datetime | None = Field(
        description="When the file is deleted (its retention); until then every read of the "
        "task signs a new downloadUrl"
    )
    error: TaskError | None
    warning: str | None = None
    cancelRequested: bool = Field(
        default=False,
        description="A cancel was asked for: a running export stops within 10 s (a "
        "succeeded export with cancelRequested finished before the cancel arrived)",
    )
    cancelledBy: ActorPublic | None = Field(
        default=None, description="Who asked for the cancel, when cancelRequested"
    )
    rowsPerSecond: float | None = Field(
        default=None, description="While running: rows written per second since the start"
    )
    etaSeconds: int | None = Field(
        default=None, description="While running with a known total: seconds left at that rate"
    )
    downloadUrl: str | None
    downloadExpiresAt: datetime | None = Field(
        default=None,
        description="When this downloadUrl stops working (a copied link too); each read signs "
        "a new one, until the file's expiresAt",
    )
    fileName: str | None
    sizeBytes: int | None
    columns: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The chosen columns as created ([{key} or {key, title}]); empty: all",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The file options as created, defaults filled in (language, encoding, "
        "delimiter, header, lineEnding, compression, split)",
    )
    manifestUrl: str | None = Field(
        default=None,
        description="Succeeded: where the signed manifest of the file is "
        "(GET, the same visibility as the task)",
    )


class ExportsPublic(BaseModel):
    """A page of tasks, newest first."""

    items: list[ExportPublic]
    nextCursor: str | None


class ParameterPublic(BaseModel):
    """A parameter of an export type, as a create form shows it."""

    name: str = Field(description="Key in the create body's parameters")
    type: Literal["date", "string", "integer", "enum", "boolean"]
    required: bool
    values: list[str] | None = Field(default=None, description="The choices of an enum")
    valueTitles: dict[str, str] | None = Field(
        default=None, description="What people read for an enum's values, in English"
    )
    valueTitlesZh: dict[str, str] | None = Field(
        default=None, description="What people read for an enum's values, in Chinese"
    )
    title: str = Field(description="Label in English")
    titleZh: str = Field(description="Label in Chinese")


class ExportTypePublic(BaseModel):
    """An export type the caller may use."""

    exportType: str
    title: str = Field(description="Name in English")
    titleZh: str = Field(description="Name in Chinese")
    formats: list[Format]
    parameters: list[ParameterPublic]
    dateRange: list[str] | None = Field(
        default=None,
        description="[from, to]: two date parameters with from <= to, both days inclusive",
    )
    maxRows: int = Field(description="An export of more rows fails")


class MePublic(BaseModel):
    """The signed-in caller, as the token says."""

    user: str
    tenant: str
    app: str
    permissions: list[str]
    seesAllOwners: bool = Field(
        description="Holds platform:download:all: sees every task of the tenant and app"
    )
    isAdmin: bool = Field(description="Holds platform:export:admin")
    expiresAt: datetime | None = Field(description="When the token expires")


class ErrorBody(BaseModel):
    """Every 4xx answer: a machine-readable code, the field when one is at fault, a sentence."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "code": "INVALID_DATE_RANGE",
                    "message": "from (2024-02-01) is after to (2024-01-01)",
                    "field": "parameters.from",
                }
            ]
        }
    )

    code: str
    message: str
    field: str | None = None
    messageZh: str | None = Field(
        default=None,
        description="The sentence in Chinese, where the refusal carries the caller's own "
        "figures (QUOTA_EXCEEDED, ROW_CEILING); absent elsewhere",
    )
