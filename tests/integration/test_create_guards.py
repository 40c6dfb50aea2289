"""Create guards: only creates that compete for the same limit wait on each other.

A create transaction of alice is held open in the test (its guard rows locked) while
other creates arrive over real HTTP: another user's create of another type completes at
once; another user's create of the same type waits only for the type's row; alice's own
next create waits for hers. The per-type limit stays exact under 50 parallel creates
of 50 users. MariaDB: on SQLite every write transaction serializes anyway.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, func, select

from export_center.api.create_rules import create_in
from export_center.db import reading
from export_center.repository.guards import lock_scope, scope_id
from export_center.repository.rows import NewTask
from export_center.repository.tables import CREATE_GUARD, TASKS
from tests.support.helpers import Stack, create

ORDERS_PERMISSION = "export:orders:create"
CUSTOMERS_PERMISSION = "export:customers:create"
BOTH = [ORDERS_PERMISSION, CUSTOMERS_PERMISSION]


def _stack(make_stack: Any, **limits: int) -> Stack:
    return make_stack(  # type: ignore[no-any-return]
        limits={"duplicate_window_seconds": 0, **limits},
        consumer={"enabled": False},
        scheduler={"enabled": False},
    )


def _new(user: str, export_type: str = "ORDERS") -> NewTask:
    return NewTask(
        export_type=export_type,
        format="CSV",
        task_name=f"held {user}",
        parameters={},
        tenant_id="t1",
        app_code="PLATFORM",
        requested_by=user,
        max_attempts=3,
    )


@contextmanager
def _held_create(stack: Stack, user: str, export_type: str = "ORDERS") -> Iterator[Connection]:
    """A whole create of ``user`` done in a transaction left open (its guard rows
    locked) until the block ends, then committed."""
    with stack.runtime.engine.begin() as conn:
        result = create_in(conn, stack.runtime.settings, _new(user, export_type))
        assert result.created
        yield conn


def _in_thread(client: httpx.Client, **body: Any) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []

    def run() -> None:
        started = time.monotonic()
        answer = create(client, **body)
        answers.append((answer.status_code, time.monotonic() - started))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, answers


@pytest.mark.mariadb
@pytest.mark.parametrize("db_url", ["mariadb"], indirect=True)
def test_another_users_create_of_another_type_completes_while_one_is_held_open(make_stack):
    stack = _stack(make_stack)
    bob = stack.client("bob", perms=BOTH)
    with _held_create(stack, "alice"):
        thread, answers = _in_thread(bob, exportType="CUSTOMERS", taskName="bob's")
        thread.join(timeout=20)
        # Done while alice's create (her row and the ORDERS row locked) is still open.
        assert not thread.is_alive() and answers[0][0] == 202
    with reading(stack.runtime.engine) as conn:
        users = sorted(conn.execute(select(TASKS.c.requested_by)).scalars())
        guards = set(conn.execute(select(CREATE_GUARD.c.id)).scalars())
    assert users == ["alice", "bob"]  # both committed, bob's while alice's was open
    assert {
        scope_id("user", "t1", "alice"),
        scope_id("user", "t1", "bob"),
        scope_id("type", "ORDERS"),
        scope_id("type", "CUSTOMERS"),
    } <= guards


@pytest.mark.mariadb
@pytest.mark.parametrize("db_url", ["mariadb"], indirect=True)
def test_a_create_waits_only_for_the_row_it_shares(make_stack):
    stack = _stack(make_stack)
    bob = stack.client("bob", perms=BOTH)
    alice = stack.client("alice", perms=BOTH)
    # Bob's create of the same type: it shares the ORDERS row, and waits for it only.
    with _held_create(stack, "alice"):
        same_type, bob_answers = _in_thread(bob, taskName="bob's orders")
        same_type.join(timeout=1.5)
        assert same_type.is_alive()
    same_type.join(timeout=20)
    assert bob_answers[0][0] == 202
    # Alice's own next create (another type) waits for her row.
    with _held_create(stack, "alice", "CUSTOMERS"):
        own, alice_answers = _in_thread(alice, taskName="alice again")
        own.join(timeout=1.5)
        assert own.is_alive()
        other, other_answers = _in_thread(bob, exportType="CUSTOMERS", taskName="bob 2")
        other.join(timeout=1.5)
        assert other.is_alive()  # the CUSTOMERS row is held by alice's open create
    own.join(timeout=20)
    other.join(timeout=20)
    assert alice_answers[0][0] == 202 and other_answers[0][0] == 202


@pytest.mark.mariadb
@pytest.mark.parametrize("db_url", ["mariadb"], indirect=True)
def test_a_create_held_before_the_type_count_holds_no_other_user(make_stack):
    stack = _stack(make_stack)
    bob = stack.client("bob", perms=BOTH)
    with stack.runtime.engine.begin() as conn:
        # Alice's create, stopped after its user-scoped checks: only her row is locked.
        lock_scope(conn, "user", "t1", "alice")
        thread, answers = _in_thread(bob, taskName="bob's orders")
        thread.join(timeout=20)
        assert not thread.is_alive() and answers[0][0] == 202


def test_fifty_users_at_once_make_exactly_the_per_type_limit(make_stack):
    stack = _stack(make_stack, max_active_per_type=9)
    clients = [stack.client(f"user{n}") for n in range(50)]
    gate = threading.Barrier(len(clients))
    answers: list[tuple[int, str | None]] = []
    lock = threading.Lock()

    def one(client: httpx.Client) -> None:
        gate.wait()
        answer = create(client, taskName="burst")
        with lock:
            answers.append((answer.status_code, answer.json().get("code")))

    threads = [threading.Thread(target=one, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    got = Counter(code if status != 202 else status for status, code in answers)
    assert got == {202: 9, "TOO_MANY_ACTIVE_TASKS_FOR_TYPE": 41}
    with reading(stack.runtime.engine) as conn:
        assert conn.execute(select(func.count()).select_from(TASKS)).scalar_one() == 9
