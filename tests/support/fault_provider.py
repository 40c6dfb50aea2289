"""A provider with injectable faults, served for real over HTTP on loopback.

Type ``FLAKY`` serves ``rows`` integer ids through the provider SDK in batches; a
:class:`Behaviour` decides per request whether to answer 503, 400, change the schema,
stall the cursor, sleep, send a NaN, answer a scripted status with headers (429 with
``Retry-After``, 308 with ``Location``), refuse pages above a size (413), answer
``DB_TIMEOUT`` (503), drip its answer one byte at a time, or send any answer with a
``Content-Encoding`` of the test's choosing (a gzip bomb). Every request is recorded
(time, version, batch, limit, the status the fetch function gave) so tests can assert
what was and was not fetched.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from export_center.embedded import ServerThread, free_port
from providers.sdk import DB_TIMEOUT, BatchRequest, Column, ExportProvider, Page, ProviderFault

TOKEN_ENV = "the-internal-token-of-the-tests"
FAULT_TOKEN = "internal-token-for-fault-tests-0123456789"
FLAKY = ["export:flaky:create", "export:orders:create"]


@dataclass
class Behaviour:
    """What the FLAKY provider does; tests change it between runs."""

    rows: int = 2500
    fail_versions: set[int] = field(default_factory=set)  # 503 for these dispatch versions
    fail_status: int = 503
    fail_at_batch: int = 1  # the batch (1-based) that fails
    always_fail: bool = False
    change_schema_at_batch: int | None = None
    stall_cursor_at_batch: int | None = None
    sleep_seconds: float = 0.0
    nan_at_row: int | None = None
    big_text: int = 0  # characters of filler per row (file size tests)
    # 413 (ProviderFault.page_too_large) for a limit above ``refuse_above``; only the
    # first ``refuse_times`` such requests when set.
    refuse_above: int | None = None
    refuse_times: int | None = None
    # DB_TIMEOUT answers (ProviderFault.db_timeout, or 504 with the same code) left for
    # batch ``db_timeout_at_batch``; negative: every time.
    db_timeouts: int = 0
    db_timeout_at_batch: int = 1
    db_timeout_status: int = 503
    # (status, headers) answered instead of the real answer, one per request of batch
    # ``scripted_at_batch``, in order; then the real answer.
    scripted: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    scripted_at_batch: int = 1
    # The answer of batch ``drip_at_batch``: one space every ``drip_every`` seconds for
    # ``drip_for`` seconds (valid JSON whitespace), then the real body.
    drip_at_batch: int | None = None
    drip_every: float = 5.0
    drip_for: float = 60.0
    drip_bytes_sent: int = 0
    # Every answer (not a dripping one) as ``encode(body, task_id) -> (body sent,
    # Content-Encoding)``: the body the SDK made, and the request's task id.
    encode: Callable[[bytes, str], tuple[bytes, str]] | None = None
    accept_encodings: list[str | None] = field(default_factory=list)  # one per HTTP call
    requests: list[dict[str, Any]] = field(default_factory=list)
    traceparents: list[str | None] = field(default_factory=list)  # one per HTTP call
    lock: threading.Lock = field(default_factory=threading.Lock)
    estimate: int | None = None  # totalRows of a schema request (None: unknown); may lie


def flaky_provider(behaviour: Behaviour, token: str) -> ExportProvider:
    columns = [
        Column("id", "Id", "INTEGER"),
        Column("amount", "Amount", "DECIMAL"),
        Column("note", "Note", "STRING"),
    ]
    provider = ExportProvider("FLAKY", columns, token=token, secret="fault-provider-secret")

    @provider.estimator
    def estimate(req: BatchRequest) -> int | None:
        return behaviour.estimate

    @provider.fetcher
    def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
        after = int(cursor or 0)
        batch = after // req.limit + 1
        record = {
            "at": time.monotonic(),
            "wall": time.time(),
            "version": req.dispatchVersion,
            "batch": batch,
            "task": req.taskId,
            "limit": req.limit,
            "status": 200,
        }
        with behaviour.lock:
            behaviour.requests.append(record)
        if behaviour.sleep_seconds:
            time.sleep(behaviour.sleep_seconds)
        refused = behaviour.refuse_above is not None and req.limit > behaviour.refuse_above
        if refused and behaviour.refuse_times != 0:
            if behaviour.refuse_times is not None:
                behaviour.refuse_times -= 1
            record["status"] = 413
            raise ProviderFault.page_too_large(req.limit)
        if behaviour.db_timeouts and batch == behaviour.db_timeout_at_batch:
            behaviour.db_timeouts -= 1
            record["status"] = behaviour.db_timeout_status
            if behaviour.db_timeout_status == 503:
                raise ProviderFault.db_timeout()
            raise ProviderFault(behaviour.db_timeout_status, DB_TIMEOUT, "the query timed out")
        failing = behaviour.always_fail or req.dispatchVersion in behaviour.fail_versions
        if failing and batch == behaviour.fail_at_batch:
            record["status"] = behaviour.fail_status
            raise ProviderFault(
                behaviour.fail_status, "INJECTED", f"injected {behaviour.fail_status}"
            )
        ids = range(after + 1, min(after + req.limit, behaviour.rows) + 1)
        rows = []
        for i in ids:
            amount = Decimal(i) / 100
            if behaviour.nan_at_row == i:
                amount = Decimal("NaN")
            rows.append(
                {
                    "id": i,
                    "amount": format(amount, "f") if amount.is_finite() else "NaN",
                    "note": ("x" * behaviour.big_text) or f"row {i}",
                }
            )
        has_more = after + req.limit < behaviour.rows
        next_cursor = after + len(rows)
        if behaviour.stall_cursor_at_batch == batch:
            next_cursor = after if after else None
        page = Page(
            rows=rows,
            next_cursor=next_cursor,
            has_more=has_more,
            snapshot={"rows": behaviour.rows},
            total_rows=behaviour.rows,
        )
        return page

    return provider


class FaultProviderServer:
    """The FLAKY provider on its own loopback port."""

    def __init__(self, token: str) -> None:
        self.behaviour = Behaviour()
        self.token = token
        app = FastAPI()
        provider = flaky_provider(self.behaviour, token)
        behaviour = self.behaviour

        @app.get("/healthz")
        def healthz() -> dict[str, str]:
            return {"status": "ok"}

        def encoded(response: Response, task_id: str) -> Response:
            assert behaviour.encode is not None
            response = scripted(response)
            body, coding = behaviour.encode(bytes(response.body), task_id)
            headers = {k: v for k, v in response.headers.items() if k != "content-length"}
            headers["content-encoding"] = coding
            return Response(body, response.status_code, headers=headers)

        def scripted(response: Response) -> Response:
            """The scripted answer of this request, if one is due (else ``response``)."""
            batch = behaviour.requests[-1]["batch"] if behaviour.requests else None
            if behaviour.scripted and batch == behaviour.scripted_at_batch:
                status, headers = behaviour.scripted.pop(0)
                body = orjson.dumps({"code": "SCRIPTED", "message": f"scripted {status}"})
                return Response(body, status, headers=headers, media_type="application/json")
            return response

        async def drip(body: bytes) -> AsyncIterator[bytes]:
            end = time.monotonic() + behaviour.drip_for
            while time.monotonic() < end:
                yield b" "
                behaviour.drip_bytes_sent += 1
                await asyncio.sleep(behaviour.drip_every)
            yield body

        @app.post(provider.path)
        async def batches(request: Request) -> Response:
            raw = await request.body()
            behaviour.traceparents.append(request.headers.get("traceparent"))
            behaviour.accept_encodings.append(request.headers.get("accept-encoding"))
            response = await run_in_threadpool(
                provider.handle, raw, request.headers.get("x-internal-service-token")
            )
            if behaviour.encode is not None and behaviour.drip_at_batch is None:
                return encoded(response, orjson.loads(raw)["taskId"])
            batch = behaviour.requests[-1]["batch"] if behaviour.requests else None
            if behaviour.scripted and batch == behaviour.scripted_at_batch:
                return scripted(response)
            dripping = behaviour.drip_at_batch is not None and behaviour.drip_at_batch == batch
            if dripping and response.status_code == 200:
                return StreamingResponse(drip(bytes(response.body)), media_type="application/json")
            if behaviour.change_schema_at_batch is not None and response.status_code == 200:
                body = orjson.loads(response.body)
                if behaviour.requests[-1]["batch"] >= behaviour.change_schema_at_batch:
                    body["schemaHash"] = "sha256:changed"
                    return Response(orjson.dumps(body), media_type="application/json")
            return response

        self.port = free_port()
        self.server = ServerThread(app, "127.0.0.1", self.port)
        self.url = self.server.url

    def start(self) -> None:
        self.server.start(timeout=30)

    def stop(self) -> None:
        self.server.stop()

    def reset(self, **values: Any) -> Behaviour:
        self.behaviour.__init__(**values)  # type: ignore[misc]
        return self.behaviour


def registry_file(
    directory: Path,
    provider_url: str,
    *,
    max_rows: int = 5_000_000,
    batch_size: int = 1000,
    max_attempts: int = 3,
    batch_timeout_seconds: int | None = None,
) -> Path:
    """A registry with the sample ORDERS type and the FLAKY type at ``provider_url``."""
    from export_center.registry_source import default_registry_path

    text = (
        default_registry_path().read_text()
        + f"""
FLAKY:
  title: Flaky
  provider_url: {provider_url}
  provider_path: /internal/exports/v1/FLAKY/batches
  required_permission: export:flaky:create
  app_scope: PLATFORM
  enabled: true
  max_rows: {max_rows}
  batch_size: {batch_size}
  max_attempts: {max_attempts}
"""
    )
    if batch_timeout_seconds is not None:
        text += f"  batch_timeout_seconds: {batch_timeout_seconds}\n"
    path = directory / "export_types.yaml"
    path.write_text(text)
    return path


def flaky(client: httpx.Client, **body: Any) -> httpx.Response:
    """Create a FLAKY export (CSV) as ``client``'s user."""
    from tests.support.helpers import create

    return create(client, "csv", exportType="FLAKY", **body)
