"""Test helpers: a running stack, tokens, polling and file readers."""

from __future__ import annotations

import bisect
import csv
import datetime as dt
import http.client
import io
import re
import socket
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openpyxl

from bench.procs import free_block
from export_center.attempt.shards import plan_shards
from export_center.auth import issue_token
from export_center.embedded import ServerThread, build_app, free_port
from export_center.runtime import Runtime
from export_center.settings import Settings

TERMINAL = {"succeeded", "failed", "cancelled", "expired", "rejected"}
ORDERS_PERMISSION = "export:orders:create"


def stack_settings(**values: Any) -> Settings:
    """Settings for tests: fast loops, short heartbeats, nothing from the environment."""
    data: dict[str, Any] = {
        "environment": "test",
        "instance_id": "test-instance",
        "publisher": {"loop_seconds": 0.05},
        "consumer": {"concurrency": 2},
        "task": {
            "heartbeat_seconds": 1.0,
            "lease_seconds": 30,
            "progress_every_seconds": 0.0,
            "retry_backoff_seconds": [0.5, 1.0],
            "retry_jitter": 0.0,
        },
        "provider": {"request_attempts": 3},
        "limits": {"max_active_per_user": 50, "max_active_per_type": 50},
        "load_sample_data": False,
        # The worker calls the providers mounted in the app, so that a test's ASGI
        # wrapper (``make_stack(wrap=...)``) sees their traffic; the child process of
        # the embedded default is tested in test_sample_process.py and by the demo.
        "sample_providers_process": False,
        # The sample providers are mounted by default only in the embedded default.
        "mount_sample_providers": True,
    }
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return Settings.model_validate(data)


@dataclass
class Stack:
    """An embedded export center serving on a free loopback port."""

    settings: Settings
    server: ServerThread
    url: str
    clients: list[httpx.Client] = field(default_factory=list)
    app: Any = None  # the export center's app, inside any test wrapper

    @classmethod
    def start(
        cls,
        *,
        data_dir: Path,
        database_url: str,
        sample_database_url: str,
        overrides: dict[str, Any],
        wrap: Callable[[Any], Any] | None = None,
    ) -> Stack:
        settings = stack_settings(
            data_dir=data_dir,
            database_url=database_url,
            sample_database_url=sample_database_url,
            **overrides,
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        app = build_app(settings, self_url=url)
        server = ServerThread(wrap(app) if wrap else app, "127.0.0.1", port, api=settings.api)
        server.start(timeout=120)
        stack = cls(settings, server, url)
        stack.app = app
        return stack

    @property
    def runtime(self) -> Runtime:
        return self.app.state.runtime  # type: ignore[no-any-return]

    def token(
        self,
        user: str = "alice",
        tenant: str = "t1",
        *,
        perms: list[str] | None = None,
        app_code: str = "PLATFORM",
        ttl: int = 3600,
        email: str | None = None,
        locale: str | None = None,
    ) -> str:
        return issue_token(
            self.settings.jwt_secret,
            user=user,
            tenant=tenant,
            app_code=app_code,
            permissions=[ORDERS_PERMISSION] if perms is None else perms,
            ttl_seconds=ttl,
            email=email,
            locale=locale,
        )

    def client(self, user: str | None = "alice", tenant: str = "t1", **kw: Any) -> httpx.Client:
        headers = {"authorization": f"Bearer {self.token(user, tenant, **kw)}"} if user else {}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=60)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self.server.stop()


def create(client: httpx.Client, fmt: str = "csv", **body: Any) -> httpx.Response:
    payload = {"exportType": "ORDERS", "format": fmt, "taskName": "orders", "parameters": {}}
    payload.update(body)
    return client.post("/api/v1/exports", json=payload)


def wait_state(
    client: httpx.Client, task_id: str, states: set[str] | None = None, timeout: float = 120.0
) -> dict[str, Any]:
    """Poll a task until its state is in ``states`` (default: any terminal state)."""
    states = states or TERMINAL
    deadline = time.monotonic() + timeout
    detail: dict[str, Any] = {}
    while time.monotonic() < deadline:
        detail = client.get(f"/api/v1/exports/{task_id}").json()
        if detail.get("state") in states:
            return detail
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} did not reach {states} in {timeout}s: {detail}")


def download(client: httpx.Client, detail: dict[str, Any]) -> bytes:
    response = client.get(detail["downloadUrl"])
    assert response.status_code == 200, response.text
    return response.content


def read_csv(data: bytes) -> list[list[str]]:
    assert data[:3] == b"\xef\xbb\xbf"
    return list(csv.reader(io.StringIO(data[3:].decode("utf-8"), newline="")))


def read_xlsx(data: bytes) -> list[list[Any]]:
    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
    rows: list[list[Any]] = []
    for ws in wb.worksheets:
        sheet_rows = [list(r) for r in ws.iter_rows(values_only=True)]
        rows.extend(sheet_rows if not rows else sheet_rows[1:])
    wb.close()
    return rows


def in_shard_order(
    stack: Stack, parameters: dict[str, Any], rows: Iterable[tuple[dt.date, int]]
) -> list[int]:
    """Order keys in the order of a sharded ORDERS file: by day shard (the plan of
    ``parameters`` in UTC), then by order key; ``rows`` are ``(order date, order key)``
    within the range."""
    etype = stack.runtime.registry.get("ORDERS")
    assert etype is not None
    starts = [s.first for s in plan_shards(etype, parameters, "UTC")]
    if starts == [None]:  # one shard over everything: by key
        return sorted(key for _day, key in rows)
    keyed = sorted((bisect.bisect_right(starts, day) - 1, key) for day, key in rows)
    return [key for _shard, key in keyed]


MARKED_ENTRIES = frozenset({"docProps/core.xml", "docProps/custom.xml"})
_MARK_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def assert_same_workbook_but_its_mark(a: bytes, b: bytes, task_a: str, task_b: str) -> None:
    """Two XLSX files of two tasks are the same package entry for entry, byte for byte,
    except the document properties that name their own task (``writers.file_mark``):
    those differ only by the task id and its creation time, and each names its task."""
    with zipfile.ZipFile(io.BytesIO(a)) as za, zipfile.ZipFile(io.BytesIO(b)) as zb:
        assert za.namelist() == zb.namelist()
        for name in za.namelist():
            ea, eb = za.read(name), zb.read(name)
            if name not in MARKED_ENTRIES:
                assert ea == eb, name
                continue
            assert task_a.encode() in ea and task_b.encode() in eb, name
            norm_a = _MARK_TIME.sub(b"T", ea.replace(task_a.encode(), b"ID"))
            norm_b = _MARK_TIME.sub(b"T", eb.replace(task_b.encode(), b"ID"))
            assert norm_a == norm_b, name


def idle_connection_reused(port: int, idle_seconds: float) -> socket.socket:
    """Ask ``GET /healthz`` on 127.0.0.1:``port``, stay idle ``idle_seconds``, ask again:
    asserts both answers are 200 on one and the same connection, and returns its socket
    (open; the caller closes it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() and conn.sock is not None
    first = conn.sock
    time.sleep(idle_seconds)
    conn.request("GET", "/healthz")
    answer = conn.getresponse()
    assert answer.status == 200 and answer.read()
    assert conn.sock is first  # the same connection, not a new one
    return first


def free_port_block(count: int) -> int:
    """A first port of ``count`` consecutive loopback ports free right now (the bench's
    search, so the cluster tests and ``python -m bench`` pick ports alike)."""
    return free_block(count)
