"""Providers for the cases of ../shared/cases/CASES.md, served over real HTTP.

* ``CASES``: answers raw JSON pages written by the test (so a test can send what a
  broken provider sends: unquoted 18-digit numbers, ``NaN``, control characters).
* ``EVENTS``: an SDK provider over a small SQLite table of events with a
  ``(created_at, id)`` keyset cursor, a snapshot upper bound and day filters in a time
  zone (CASES E17, E19, E21).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse

from export_center.embedded import ServerThread, free_port
from providers.sdk import (
    BatchRequest,
    Column,
    ExportProvider,
    Page,
    ProviderFault,
    day_range_utc,
)

CASES_TOKEN = "internal-token-for-the-cases-0123456789"
"""The internal service token the CASES provider expects (fixture ``cases``)."""


class CasesServer:
    """Both case providers on one loopback port."""

    def __init__(self, token: str, db_path: Path) -> None:
        self.pages: list[str] = []
        self.cursor_pages: dict[str, int] = {}  # cursor -> page index (else int(cursor))
        self.requests: list[dict[str, Any]] = []
        self.after_page: Callable[[int], None] | None = None
        self.lock = threading.Lock()
        self.db_path = db_path
        self.db = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
        self.db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL)")
        app = FastAPI()
        server = self

        @app.get("/healthz")
        def healthz() -> dict[str, str]:
            return {"status": "ok"}

        @app.post("/internal/exports/v1/CASES/batches")
        async def cases(request: Request) -> Response:
            body = await request.json()
            cursor = body["cursor"]
            index = server.cursor_pages.get(cursor) if cursor in server.cursor_pages else None
            index = int(cursor or 0) if index is None else index
            server.requests.append(body)
            text = server.pages[index]
            if text.startswith("STREAM:"):  # chunked, no Content-Length: counted while read
                data = text[len("STREAM:") :].encode()

                async def chunks():  # type: ignore[no-untyped-def]
                    for i in range(0, len(data), 65536):
                        yield data[i : i + 65536]

                return StreamingResponse(chunks(), media_type="application/json")
            return Response(text, media_type="application/json")

        events = ExportProvider(
            "EVENTS",
            [Column("id", "id", "INTEGER"), Column("created_at", "created_at", "STRING")],
            token=token,
            secret="cases-secret",
        )

        @events.fetcher
        def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
            with server.lock:
                server.requests.append(req.model_dump())
                where, binds = "", []
                if snapshot is None:
                    upper = req.parameters.get("snapshotUpper") or "9999"
                    snapshot = {"upper": upper}
                where += " AND created_at <= ?"
                binds.append(snapshot["upper"])
                if req.parameters.get("from"):
                    start, end = day_range_utc(
                        req.parameters["from"],
                        req.parameters["to"],
                        req.parameters.get("tz", "UTC"),
                    )
                    where += " AND created_at >= ? AND created_at < ?"
                    binds += [
                        start.strftime("%Y-%m-%dT%H:%M:%S.%f"),
                        end.strftime("%Y-%m-%dT%H:%M:%S.%f"),
                    ]
                if cursor is not None:
                    where += " AND (created_at, id) > (?, ?)"
                    binds += [cursor[0], cursor[1]]
                limit = min(req.limit, int(req.parameters.get("pageSize") or req.limit))
                rows = server.db.execute(
                    f"SELECT id, created_at FROM events WHERE 1=1{where}"
                    " ORDER BY created_at, id LIMIT ?",
                    [*binds, limit + 1],
                ).fetchall()
                page_no = len([r for r in server.requests if r.get("taskId") == req.taskId])
            has_more = len(rows) > limit
            rows = rows[:limit]
            result = Page(
                rows=[{"id": r[0], "created_at": r[1]} for r in rows],
                next_cursor=[rows[-1][1], rows[-1][0]] if rows else None,
                has_more=has_more,
                snapshot=snapshot,
            )
            if server.after_page is not None:
                server.after_page(page_no)
            return result

        app.include_router(events.router())

        by_day = ExportProvider(
            "DAY_EVENTS",
            [Column("id", "id", "INTEGER"), Column("created_at", "created_at", "STRING")],
            token=token,
            secret="cases-secret",
        )

        @by_day.fetcher
        def fetch_by_day(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
            """Events of the request's shard window (half-open, instants in UTC); with
            ``emptyPages``, that many pages without rows that say hasMore first; the
            events named in ``badIds`` (comma-separated ids) carry ``id`` as a text that
            is no integer (``"bad-<id>"``)."""
            assert req.shard is not None, "DAY_EVENTS is sharded"
            largest = req.parameters.get("maxPage")
            if largest is not None and req.limit > int(largest):
                with server.lock:
                    server.requests.append(req.model_dump(by_alias=True, mode="json"))
                raise ProviderFault.page_too_large(req.limit)
            empty = int(req.parameters.get("emptyPages") or 0)
            sent = cursor["empty"] if isinstance(cursor, dict) else 0
            if cursor is None or isinstance(cursor, dict):
                if sent < empty:  # a new cursor each time, no rows, hasMore
                    with server.lock:
                        server.requests.append(req.model_dump(by_alias=True, mode="json"))
                    snapshot = {"window": req.shard.id}
                    return Page(
                        rows=[], next_cursor={"empty": sent + 1}, has_more=True, snapshot=snapshot
                    )
                cursor = None  # the empty pages are over: the first page of rows
            start = req.shard.start.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
            end = req.shard.end.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
            where, binds = " AND created_at >= ? AND created_at < ?", [start, end]
            if cursor is not None:
                where += " AND (created_at, id) > (?, ?)"
                binds += [cursor[0], cursor[1]]
            with server.lock:
                server.requests.append(req.model_dump(by_alias=True, mode="json"))
                rows = server.db.execute(
                    f"SELECT id, created_at FROM events WHERE 1=1{where}"
                    " ORDER BY created_at, id LIMIT ?",
                    [*binds, req.limit + 1],
                ).fetchall()
            has_more = len(rows) > req.limit
            rows = rows[: req.limit]
            bad = {int(i) for i in str(req.parameters.get("badIds") or "").split(",") if i}
            return Page(
                rows=[
                    {"id": f"bad-{r[0]}" if r[0] in bad else r[0], "created_at": r[1]} for r in rows
                ],
                next_cursor=[rows[-1][1], rows[-1][0]] if rows else None,
                has_more=has_more,
                snapshot={"window": req.shard.id},
            )

        app.include_router(by_day.router())
        self.port = free_port()
        self.thread = ServerThread(app, "127.0.0.1", self.port)
        self.url = self.thread.url

    def start(self) -> None:
        self.thread.start(timeout=30)

    def stop(self) -> None:
        self.thread.stop()
        self.db.close()


def cases_registry(directory: Path, provider_url: str) -> Path:
    """Registry: the samples plus CASES, EVENTS and DAY_EVENTS (sharded by day) at
    ``provider_url`` (batch size 50)."""
    from export_center.registry_source import default_registry_path

    extra = ""
    for code, params in (
        ("CASES", ""),
        (
            "EVENTS",
            """
  parameters:
    - {name: from, type: date}
    - {name: to, type: date}
    - {name: tz, type: string}
    - {name: snapshotUpper, type: string}
    - {name: pageSize, type: integer}
  date_range: [from, to]""",
        ),
    ):
        extra += f"""
{code}:
  provider_url: {provider_url}
  provider_path: /internal/exports/v1/{code}/batches
  required_permission: export:cases:create
  app_scope: PLATFORM
  batch_size: 50
  max_attempts: 1{params}
"""
    extra += f"""
DAY_EVENTS:
  provider_url: {provider_url}
  provider_path: /internal/exports/v1/DAY_EVENTS/batches
  required_permission: export:cases:create
  app_scope: PLATFORM
  batch_size: 1000
  max_attempts: 1
  parameters:
    - {{name: from, type: date}}
    - {{name: to, type: date}}
    - {{name: maxPage, type: integer}}
    - {{name: emptyPages, type: integer}}
    - {{name: badIds, type: string}}
  date_range: [from, to]
  shards: {{by: day, max_shards: 64, parallel: 4}}
"""
    path = directory / "cases_types.yaml"
    path.write_text(default_registry_path().read_text() + extra)
    return path
