"""The OpenAPI description: error codes per route, examples, and Swagger UI served offline.

Every route declares exactly the error answers it can give (:func:`errors`): each status
lists its machine-readable ``code`` values, with one example body per code, so a client
generated from ``/openapi.json`` knows what to handle. :func:`install_docs` serves
Swagger UI at ``/docs`` from files shipped in the package (``static/swagger-ui``,
swagger-ui-dist 5, Apache-2.0), so the page works without internet access;
:func:`tidy_schema` removes FastAPI's generic 422 answers, which the API never sends
(its 422 bodies are :class:`~export_center.api.schemas.ErrorBody` too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from export_center.api.governance_codes import GOVERNANCE_CODES
from export_center.api.schemas import ErrorBody
from export_center.writers.formats import format_choices

__all__ = [
    "AUTH",
    "BODY",
    "GUARD",
    "QUERY",
    "errors",
    "install_docs",
    "tidy_schema",
]

SWAGGER_DIR = Path(__file__).parent / "static" / "swagger-ui"
ASSETS_PATH = "/docs-assets"

#: ``code -> (example message, field)`` of every error the API answers.
CATALOGUE: dict[str, tuple[str, str | None]] = {
    "UNAUTHORIZED": ("a bearer token is required", None),
    "TOKEN_INVALID": ("the bearer token is not valid: Not enough segments", None),
    "TOKEN_EXPIRED": ("the bearer token has expired", None),
    "TOKEN_WRONG_KEY": (
        "the bearer token was signed with another key than this server's: make tokens with "
        "`export-center token` using the same data directory (EXPORT_CENTER_DATA_DIR) ...",
        None,
    ),
    "TOKEN_NOT_YET_VALID": (
        "the bearer token is not valid yet (nbf or iat is in the future)",
        None,
    ),
    "TOKEN_CLAIM_TOO_LONG": (
        "the bearer token's sub claim has 200 characters; this server keeps at most 128",
        "sub",
    ),
    "TOKEN_WRONG_AUDIENCE": (
        "the bearer token is meant for the audience 'account', not for this server "
        "('export-center')",
        "aud",
    ),
    "UNTRUSTED_HOST": (
        "this server does not answer to the name 'rebound.example'; if it is one of its "
        "names, add it to EXPORT_CENTER_API__ALLOWED_HOSTS",
        None,
    ),
    "HOST_REQUIRED": (
        "send exactly one Host header naming this server (host or host:port)",
        None,
    ),
    "CROSS_SITE_REQUEST": (
        "this request comes from another site's page (Sec-Fetch-Site: cross-site); open the "
        "download center on this server instead",
        None,
    ),
    "SAME_ORIGIN_REQUIRED": (
        "the development sign-in answers only the download center page of this server "
        "(a same-origin request); a script makes its token with `export-center token`",
        None,
    ),
    "DATABASE_UNAVAILABLE": (
        "the database does not answer; try again in a few seconds",
        None,
    ),
    "SERVER_BUSY": (
        "the server has as many connections as it takes; try again in a second",
        None,
    ),
    "INTERNAL_ERROR": (
        "the server failed to answer this request; it has been logged",
        None,
    ),
    "UNKNOWN_PARAMETER": ("unknown query parameter 'colour'", "colour"),
    "REPEATED_PARAMETER": ("query parameter 'limit' is given more than once", "limit"),
    "MALFORMED_JSON": ("the request body is not valid JSON", None),
    "BODY_REQUIRED": ("send a JSON object body with content-type application/json", None),
    "INVALID_BODY": ("the request body cannot be read as JSON: it must be UTF-8, ...", None),
    "DUPLICATE_KEY": ("the JSON body names 'exportType' twice", None),
    "REPEATED_HEADER": ("the Idempotency-Key header is sent more than once; send it once", None),
    "BODY_TOO_LARGE": ("the request body may have at most 64 KB", None),
    "UNSUPPORTED_MEDIA_TYPE": (
        "send the body as JSON with the header content-type: application/json",
        None,
    ),
    "MISSING_FIELD": ("exportType is required", "exportType"),
    "UNKNOWN_FIELD": ("callbackUrl is not a known field", "callbackUrl"),
    "TOO_LONG": ("taskName: String should have at most 100 characters", "taskName"),
    "TOO_SHORT": ("exportType: String should have at least 1 character", "exportType"),
    "INVALID_TYPE": ("parameters: Input should be a valid dictionary", "parameters"),
    "INVALID_VALUE": ("status must be one of O, F, P", "parameters.status"),
    "UNKNOWN_EXPORT_TYPE": ("unknown export type 'ORDRES'", "exportType"),
    "UNKNOWN_COLUMN": (
        "unknown column 'o_price'; the columns are c_mktsegment, c_name, ...",
        "columns[1]",
    ),
    "DUPLICATE_COLUMN": ("column 'o_orderkey' is chosen twice", "columns[2]"),
    "INVALID_OPTION": (
        "options.encoding must be one of 'utf-8-bom', 'utf-8', 'gb18030', got 'latin-1'",
        "options.encoding",
    ),
    "OPTION_NOT_SUPPORTED": (
        "options.delimiter applies to CSV files only, not xlsx; leave it out",
        "options.delimiter",
    ),
    "INVALID_SPLIT": (
        "options.split.maxRowsPerFile must be 1..5000000 (this type's row cap), got 0",
        "options.split.maxRowsPerFile",
    ),
    "FORMAT_NOT_INSTALLED": (
        "format parquet needs the optional extra 'parquet': pip install -e '.[parquet]'",
        "format",
    ),
    "PROVIDER_UNAVAILABLE": (
        "the ORDERS provider does not answer now (provider timed out on 3 tries); try "
        "again in a minute",
        None,
    ),
    "PROVIDER_CONTRACT": (
        "the ORDERS provider's answer is invalid: provider broke the contract: rows must be a list",
        None,
    ),
    "PROVIDER_REJECTED": (
        "the ORDERS provider refused the request (PROVIDER_REJECTED): provider answered 422",
        None,
    ),
    "INVALID_FORMAT": (f"format must be {format_choices()}, got 'pdf'", "format"),
    "INVALID_TIME_ZONE": (
        "timeZone must be an IANA time zone name such as Asia/Shanghai or UTC, got '+08:00'",
        "timeZone",
    ),
    "IDEMPOTENCY_KEY_MISMATCH": ("Idempotency-Key and requestId differ", "requestId"),
    "INVALID_IDEMPOTENCY_KEY": ("Idempotency-Key must have 1..128 characters", "requestId"),
    "TOO_MANY_PARAMETERS": ("parameters may have at most 20 keys", "parameters"),
    "PARAMETERS_TOO_LARGE": ("parameters may take at most 4 KB of JSON", "parameters"),
    "PARAMETERS_TOO_DEEP": ("parameters may nest at most 2 levels", "parameters.a.b"),
    "PARAMETER_TOO_LONG": (
        "strings in parameters may have at most 256 characters",
        "parameters.status",
    ),
    "INVALID_DATE": ("from must be a date YYYY-MM-DD, got '2024-02-30'", "parameters.from"),
    "INVALID_DATE_RANGE": ("from (2024-02-01) is after to (2024-01-01)", "parameters.from"),
    "PERMISSION_DENIED": ("you may not create ORDERS exports", None),
    "EXPORT_TYPE_DISABLED": ("ORDERS exports are disabled", None),
    "IDEMPOTENCY_KEY_REUSED": (
        "requestId '7d1c0e2a' was already used for another export (ORDERS, csv); this request "
        "differs in parameters; use a new key",
        "requestId",
    ),
    "TOO_MANY_ACTIVE_TASKS": (
        "you already have 3 exports queued or running; wait for one to finish",
        None,
    ),
    "TOO_MANY_ACTIVE_TASKS_FOR_TYPE": (
        "too many ORDERS exports are running right now; try again in a few minutes",
        None,
    ),
    "QUOTA_EXCEEDED": (
        "you have created 100 exports today, your daily quota of 100; the quota starts "
        "again at 2026-12-03 00:00 (Asia/Shanghai), in 3600 s",
        None,
    ),
    "INVALID_STATE": ("state must be among queued, running, ...", "state"),
    "INVALID_CURSOR": ("cursor must be the nextCursor of a previous page", "cursor"),
    "TASK_NOT_FOUND": ("no such export task", None),
    "NOTIFICATION_NOT_FOUND": ("no such notification of yours", None),
    "WEBHOOK_NOT_FOUND": ("no webhook endpoint 'we_0' in your tenant", None),
    "WEBHOOK_ALREADY_REGISTERED": ("we_1 already sends to https://hooks.example.com/x; ...", "url"),
    "WEBHOOK_DISABLED": ("we_1 is disabled, so nothing is sent to it; enable it first", None),
    "DELIVERY_NOT_FOUND": ("no delivery '7' of this endpoint", None),
    "INVALID_WEBHOOK_URL": ("url must be an absolute https:// URL", "url"),
    "WEBHOOK_HTTPS_REQUIRED": (
        "webhook URLs must use https:// (plain http is accepted only for listed loopback hosts)",
        "url",
    ),
    "WEBHOOK_URL_NOT_ALLOWED": (
        "webhooks may not go to 10.0.0.5: the host is not in "
        "EXPORT_CENTER_NOTIFY__WEBHOOK_ALLOWED_HOSTS",
        "url",
    ),
    "INVALID_EVENTS": (
        "unknown event 'export.done'; the events are export.succeeded, ...",
        "events",
    ),
    "INVALID_NOTIFY": (
        "unknown channel 'sms'; the channels are page, email, ...",
        "notify[0].channel",
    ),
    "RECIPIENT_NOT_ALLOWED": (
        "e-mail may not go to gmail.com: the allowed domains are example.com",
        "notify[0].to",
    ),
    "EMAIL_NOT_CONFIGURED": (
        "e-mail notifications are not configured on this export center",
        "notify[0].to",
    ),
    "UNKNOWN_ROBOT": (
        "no dingtalk robot named 'ops'; the dingtalk robots are (none)",
        "notify[0].robot",
    ),
    "RECIPIENT_UNKNOWN": (
        "an e-mail target without 'to' goes to your own address, which this export "
        "center does not know ...",
        "notify[0].to",
    ),
    "MANIFEST_NOT_FOUND": (
        "this export has no manifest: it has not succeeded (or succeeded before manifests "
        "were recorded)",
        None,
    ),
    "EVENT_NOT_FOUND": ("no command with event id 1b9d...", None),
    "NOT_FOUND": ("there is no development sign-in here", None),
    "NOT_LOOPBACK": ("the development sign-in answers only on this machine (loopback)", None),
    "FILE_GONE": ("the file is no longer stored", None),
    "RANGE_NOT_SATISFIABLE": (
        "the range starts past the end of the file (48517737 bytes)",
        "Range",
    ),
    "STORAGE_UNAVAILABLE": (
        "the file storage does not answer; try again in a few seconds",
        None,
    ),
    "LINK_INVALID": ("the download link is not valid", None),
    "LINK_REVOKED": (
        "this download link was revoked; ask the owner of the export for a new one",
        None,
    ),
    "LINK_USED_UP": ("this download link was used 3 times, as many as this type allows", None),
    "LINK_EXPIRED": ("the download link has expired; ask for a new one", None),
    "LINK_NOT_FOUND": (
        "0123456789abcdef is not a download link of task exp_01KB7Z3Y4V8N2Q6R0S1T2U3V4W",
        None,
    ),
    "LINK_NOT_YOURS": ("this download link was issued to another user", None),
    "NO_FILE": ("the export has already failed; it has no file", None),
    "NOT_READY": ("the export is running; its file is not ready yet", None),
    "FILE_EXPIRED": ("the file has expired and was deleted; export again", None),
    "NOT_CANCELLABLE": ("the export has already succeeded and cannot be cancelled", None),
    "NOT_RETRYABLE": ("only failed exports can be retried; this one is running", None),
    "REGISTRY_INVALID": ("kept the previous registry: ORDERS.batch_size: must be ...", None),
    **GOVERNANCE_CODES,
}

#: 401 codes of every signed-in route.
AUTH: dict[int, list[str]] = {
    401: [
        "UNAUTHORIZED",
        "TOKEN_INVALID",
        "TOKEN_EXPIRED",
        "TOKEN_WRONG_KEY",
        "TOKEN_NOT_YET_VALID",
        "TOKEN_CLAIM_TOO_LONG",
        "TOKEN_WRONG_AUDIENCE",
    ]
}
#: Codes of routes that check their query string.
QUERY: dict[int, list[str]] = {400: ["UNKNOWN_PARAMETER", "REPEATED_PARAMETER"]}
#: Codes of every POST: the body guard refuses bodies over 64 KB, and bodies that are not
#: JSON, before any route runs; the cross-site guard refuses another site's page.
GUARD: dict[int, list[str]] = {
    403: ["CROSS_SITE_REQUEST"],
    413: ["BODY_TOO_LARGE"],
    415: ["UNSUPPORTED_MEDIA_TYPE"],
}
#: Codes of a POST that reads a JSON body (the guard's, and the JSON reader's).
BODY: dict[int, list[str]] = {
    400: ["MALFORMED_JSON", "BODY_REQUIRED", "INVALID_BODY", "DUPLICATE_KEY"],
    **GUARD,
}


def errors(*groups: dict[int, list[str]]) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses`` for the error codes a route can answer.

    Args:
        groups: ``{status: [code, ...]}`` mappings (e.g. :data:`AUTH`, :data:`QUERY`,
            ``{404: ["TASK_NOT_FOUND"]}``); the codes of one status are merged in order.

    Returns:
        ``{status: {"model": ErrorBody, "description": ..., "content": examples}}``.

    Raises:
        KeyError: a code that is not in :data:`CATALOGUE` (caught at import time).
    """
    merged: dict[int, list[str]] = {}
    for group in groups:
        for status, codes in group.items():
            merged.setdefault(status, [])
            merged[status] += [code for code in codes if code not in merged[status]]
    out: dict[int | str, dict[str, Any]] = {}
    for status in sorted(merged):
        codes = merged[status]
        examples = {
            code: {
                "summary": code,
                "value": {"code": code, "message": CATALOGUE[code][0], "field": CATALOGUE[code][1]},
            }
            for code in codes
        }
        out[status] = {
            "model": ErrorBody,
            "description": "`code` is one of: " + ", ".join(f"`{c}`" for c in codes),
            "content": {"application/json": {"examples": examples}},
        }
    return out


def tidy_schema(app: FastAPI) -> dict[str, Any]:
    """Build the OpenAPI schema once: drop FastAPI's generic 422 answers (the API's own
    422s are declared per route with :class:`ErrorBody`) and their unused schemas."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
    )
    query = errors(QUERY)[400]
    query_examples = query["content"]["application/json"]["examples"]
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            _add_query_errors(operation, query_examples)
            if "security" in operation:  # openapi_extra appends: keep each entry once
                unique: list[dict[str, Any]] = []
                for entry in operation["security"]:
                    if entry not in unique:
                        unique.append(entry)
                operation["security"] = sorted(unique, key=len)
            answer = operation.get("responses", {}).get("422")
            if answer and "HTTPValidationError" in str(answer):
                del operation["responses"]["422"]
    components = schema.get("components", {}).get("schemas", {})
    text = str(schema.get("paths"))
    for name in ("HTTPValidationError", "ValidationError"):
        if name in components and f"/{name}'" not in text:
            del components[name]
    app.openapi_schema = schema
    return schema


def _add_query_errors(operation: dict[str, Any], examples: dict[str, Any]) -> None:
    """Every route refuses query parameters it does not take (``strict_query``): add
    those 400 codes to the operation, next to the 400 codes it declares itself."""
    answers = operation.setdefault("responses", {})
    answer = answers.setdefault(
        "400",
        {
            "description": "",
            "content": {
                "application/json": {
                    "schema": {"$ref": "#/components/schemas/ErrorBody"},
                    "examples": {},
                }
            },
        },
    )
    content = answer.setdefault("content", {}).setdefault("application/json", {})
    content.setdefault("schema", {"$ref": "#/components/schemas/ErrorBody"})
    merged = {**content.get("examples", {}), **examples}
    content["examples"] = merged
    answer["description"] = "`code` is one of: " + ", ".join(f"`{c}`" for c in merged)


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI at ``/docs`` with its assets from the package (works offline).

    The app must be created with ``docs_url=None`` and ``redoc_url=None``.
    """
    app.mount(ASSETS_PATH, StaticFiles(directory=SWAGGER_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
            # validatorUrl None: the page never asks validator.swagger.io (offline).
            swagger_ui_parameters={
                "persistAuthorization": False,
                "tryItOutEnabled": True,
                "validatorUrl": None,
            },
        )

    app.openapi = lambda: tidy_schema(app)  # type: ignore[method-assign]
