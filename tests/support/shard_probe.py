"""A test double wrapped around the embedded app: counts what providers serve.

:class:`ServedRows` is ASGI middleware for ``/internal/exports/v1/{TYPE}/batches``: it
reads each request's ``taskId``, ``shard`` and ``limit`` and counts the rows of each 2xx
answer (its ``rows`` array, read once the answer is complete), so a test can tell how many rows a
task fetched in all its attempts: the refetch after a crash is ``served - rows``. It is
injected by the tests (``make_stack(wrap=ServedRows)``); production code knows nothing
of it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class Request:
    """One provider request as the probe saw it."""

    task_id: str
    shard: str | None
    limit: int
    cursor: str | None
    status: int = 0
    rows: int = 0


@dataclass
class ServedRows:
    """Counts provider rows per task (thread-safe; the server runs in another thread)."""

    app: App
    requests: list[Request] = field(default_factory=list)
    #: Seconds every batch answer waits first (a slow provider).
    delay_seconds: float = 0.0
    #: Per shard id, statuses to answer its next requests with instead of the rows
    #: (one taken per request, then the provider answers again).
    fail: dict[str, list[int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def served(self, task_id: str) -> int:
        """Rows served to ``task_id`` in 2xx answers, every attempt."""
        with self._lock:
            return sum(r.rows for r in self.requests if r.task_id == task_id)

    def by_shard(self, task_id: str) -> Counter[str | None]:
        """Requests per shard id of ``task_id``."""
        with self._lock:
            return Counter(r.shard for r in self.requests if r.task_id == task_id)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.endswith("/batches"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        try:
            body = orjson.loads(raw)
            shard = body.get("shard") or {}
            seen = Request(
                str(body.get("taskId")),
                shard.get("id"),
                int(body.get("limit", 0)),
                body.get("cursor"),
            )
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            seen = Request("?", None, 0, None)
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        with self._lock:
            statuses = self.fail.get(seen.shard or "")
            status = statuses.pop(0) if statuses else None
        if status is not None:
            seen.status = status
            with self._lock:
                self.requests.append(seen)
            error = orjson.dumps({"code": "INJECTED", "message": f"injected {status}"})
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": error})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return {"type": "http.disconnect"}
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        answer: list[bytes] = []

        async def counting(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen.status = int(message["status"])
            elif message["type"] == "http.response.body" and 200 <= seen.status < 300:
                answer.append(message.get("body", b""))
                if not message.get("more_body", False):
                    seen.rows = len(orjson.loads(b"".join(answer)).get("rows") or [])
            await send(message)

        await self.app(scope, replay, counting)
        with self._lock:
            self.requests.append(seen)
