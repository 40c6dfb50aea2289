"""Quotas are exact under concurrency: 50 creates sent at once over real HTTP (one
thread and one connection each) at the edge of a quota make exactly the quota, and
every other answer is a 429 ``QUOTA_EXCEEDED`` (SQLite and MariaDB)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import httpx
from sqlalchemy import func, select

from export_center.db import reading
from export_center.repository.tables import TASKS
from tests.support.helpers import Stack, create

PARALLEL = 50


def _stack(make_stack: Any, **quotas: int) -> Stack:
    return make_stack(  # type: ignore[no-any-return]
        quotas=quotas,
        limits={"duplicate_window_seconds": 0, "max_active_per_user": 500},
        consumer={"enabled": False},
        scheduler={"enabled": False},
    )


def _burst(stack: Stack, users: list[str]) -> list[tuple[int, str | None]]:
    """POST one create per entry of ``users`` at the same moment; (status, code) each."""
    clients = [
        httpx.Client(
            base_url=stack.url,
            headers={"authorization": f"Bearer {stack.token(user)}"},
            timeout=120,
        )
        for user in users
    ]
    gate = threading.Barrier(len(clients))
    answers: list[tuple[int, str | None]] = []
    lock = threading.Lock()

    def one(client: httpx.Client, n: int) -> None:
        gate.wait()
        answer = create(client, taskName=f"burst {n}")
        code = answer.json().get("code") if answer.status_code != 202 else None
        with lock:
            answers.append((answer.status_code, code))

    threads = [threading.Thread(target=one, args=(c, n)) for n, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for client in clients:
        client.close()
    assert len(answers) == len(users)
    return answers


def _count(stack: Stack, **where: str) -> int:
    with reading(stack.runtime.engine) as conn:
        clauses = [TASKS.c[name] == value for name, value in where.items()]
        return int(conn.execute(select(func.count()).where(*clauses)).scalar_one())


def test_fifty_parallel_creates_of_one_user_make_exactly_the_quota(make_stack):
    stack = _stack(make_stack, user_tasks_per_day=12)
    alice = stack.client("alice")
    for n in range(5):  # 7 left: the edge is inside the burst
        assert create(alice, taskName=f"before {n}").status_code == 202
    answers = Counter(_burst(stack, ["alice"] * PARALLEL))
    assert answers == {(202, None): 7, (429, "QUOTA_EXCEEDED"): PARALLEL - 7}
    assert _count(stack, tenant_id="t1", requested_by="alice") == 12
    assert alice.get("/api/v1/me/quota").json()["tasks"]["remaining"] == 0


def test_fifty_parallel_creates_of_a_tenant_make_exactly_its_quota(make_stack):
    stack = _stack(make_stack, tenant_tasks_per_day=20, user_tasks_per_day=8)
    assert create(stack.client("zoe"), taskName="before").status_code == 202
    users = [f"user{n % 10}" for n in range(PARALLEL)]  # 5 creates per user: under 8
    answers = Counter(_burst(stack, users))
    assert answers == {(202, None): 19, (429, "QUOTA_EXCEEDED"): PARALLEL - 19}
    assert _count(stack, tenant_id="t1") == 20
