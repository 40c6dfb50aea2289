"""Create-guard rows: the locks that only creates which compete for the same limit share.

A create checks limits that count rows no single row holds (active tasks, today's tasks,
an idempotency key not written yet), so two creates that could both pass a check must
not run it at the same time. Each limit has a *scope*, and each scope one row of
``export_task_guard`` that the create locks (``SELECT ... FOR UPDATE``) before counting:

====================  ==================================================================
scope                  what it guards
====================  ==================================================================
``user``               one requester of one tenant: the idempotency key, the duplicate
                       window, the per-user active limit and the user's daily quotas
                       (and writes of that user's quota override)
``tenant``             the tenant's daily quotas (and writes of its override); locked
                       only when a tenant quota applies
``type``               the per-type active limit: every create of the type counts it,
                       so this lock is taken last, just before the commit
====================  ==================================================================

The locks are always taken in that order (user, tenant, type), so two creates never
wait on each other in a circle; creates of different users of different tenants share
nothing but the type's row, held only for the per-type count and the commit.

A scope's row is made the first time it is needed: its id is the scope's letter and 31
hex digits of the SHA-256 of its parts (32 characters, the column's width). Two creates
making the same new row at once: one inserts it, the other's insert waits for it and,
once it is committed, finds the key taken and locks the row as if it had been there
(rarely, a third makes MariaDB pick a deadlock victim, whose whole create is tried
again, like any database blip).

On SQLite every write transaction starts with ``BEGIN IMMEDIATE``, which already
serializes writers: nothing is locked or written here.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import IntegrityError

from export_center.db import db_now
from export_center.repository.tables import CREATE_GUARD as G

__all__ = ["Scope", "lock_scope", "scope_id"]

Scope = Literal["user", "tenant", "type"]


def scope_id(scope: Scope, *parts: str) -> str:
    """The guard row id of one scope: ``u``/``t``/``x`` and 31 hex digits of the SHA-256
    of ``parts`` joined by U+001F (32 characters; equal parts give equal ids)."""
    letter = {"user": "u", "tenant": "t", "type": "x"}[scope]
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return letter + digest[:31]


def lock_scope(conn: Connection, scope: Scope, *parts: str) -> None:
    """Lock the guard row of ``scope`` (made when missing) until the caller's transaction
    ends; no-op on SQLite (module docstring).

    Args:
        conn: a connection inside the create's (or the override write's) transaction.
        scope: ``user`` (parts: tenant, requester), ``tenant`` (parts: tenant) or
            ``type`` (parts: export type); take them in that order.
        parts: what the scope is of.
    """
    if conn.dialect.name == "sqlite":
        return
    key = scope_id(scope, *parts)
    locked = select(G.c.id).where(G.c.id == key).with_for_update()
    if conn.execute(locked).first() is not None:
        return
    try:
        with conn.begin_nested():
            conn.execute(insert(G).values(id=key, updated_at=db_now()))
    except IntegrityError:  # made by another create meanwhile: wait for it, then lock it
        conn.execute(locked).first()
