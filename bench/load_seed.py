"""Seed the export center's own tables with finished tasks, for the load bench.

:func:`seed_tasks` writes ``count`` ended tasks (about 88 % SUCCEEDED with a file,
8 % FAILED, 4 % CANCELLED) into a database already at the Alembic head, with what
the service itself would have written for each:

* ``export_task``: one row per task, ids 1..count in the order of ``requested_at``
  (so the list's ``ORDER BY id DESC`` is newest first, as in production); the times
  are spread evenly over the last :data:`SPREAD_DAYS` days (inside the 7-day file
  retention, so every SUCCEEDED task still has its file and the reconciler has
  nothing to expire), a run takes seconds, the file is kept 7 days after it;
* ``export_outbox``: the SENT command of each task (dispatch version 1; younger than
  the 7-day outbox retention, so none is purged yet);
* ``export_request_key``: the idempotency key of the 80 % created with a
  ``requestId``;
* ``export_audit``: the ``manual_cancel`` row of each CANCELLED task (its owner
  asked a running export to stop).

Owners: :data:`TENANTS` tenants of :data:`USERS_PER_TENANT` users each (2,000
users), app PLATFORM. How many tasks a user has follows ``rank ** -0.5`` (a few
heavy users with about 1 % of all tasks each, a long tail of light ones). Export
types: 70 % ORDERS (a date range), 30 % CUSTOMERS (a segment); 60 % CSV.

Rows go in by ``executemany`` of SQLAlchemy Core inserts on the project's tables, in
chunks of :data:`CHUNK` rows, one transaction per chunk.
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, insert, text
from ulid import ULID

from export_center import commands
from export_center.filenames import download_file_name
from export_center.ids import new_trace_id
from export_center.repository import canonical_parameters
from export_center.repository.tables import AUDIT, OUTBOX, REQUEST_KEYS, TASKS
from export_center.storage.keys import new_object_key
from export_center.writers.formats import FORMATS

__all__ = ["CHUNK", "SPREAD_DAYS", "TENANTS", "USERS_PER_TENANT", "Seeded", "seed_tasks"]

TENANTS = 40
USERS_PER_TENANT = 50
SPREAD_DAYS = 6.0
"""Tasks were requested over this many days before now (below the 7-day retentions)."""
CHUNK = 5_000
"""Rows per ``executemany`` and per transaction."""
APP_CODE = "PLATFORM"
TOPIC = "export-center-command-v1"
"""The command topic of the embedded default (no environment prefix)."""
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
RETENTION = timedelta(days=7)


@dataclass
class Seeded:
    """What :func:`seed_tasks` wrote.

    Attributes:
        tasks: rows in ``export_task``.
        outbox: rows in ``export_outbox``.
        request_keys: rows in ``export_request_key``.
        audit: rows in ``export_audit``.
        seconds: wall time of the inserts (generation included).
        statuses: tasks per status.
        users: owners of at least one task, as ``(tenant, user)``.
        picked: the users chosen for the load clients, heaviest first, each with the
            public ids (``exp_...``) of its tasks.
    """

    tasks: int
    outbox: int
    request_keys: int
    audit: int
    seconds: float
    statuses: dict[str, int]
    users: int
    picked: list[tuple[str, str, list[str]]] = field(default_factory=list)


def _owners(rng: random.Random, count: int) -> tuple[list[tuple[str, str]], list[int]]:
    """All users and, for each of ``count`` tasks, the index of its owner (weights
    ``rank ** -0.5`` over a shuffled ranking, so heavy users sit in every tenant)."""
    users = [
        (f"tenant-{t:03d}", f"user-{t:03d}-{u:03d}")
        for t in range(TENANTS)
        for u in range(USERS_PER_TENANT)
    ]
    rng.shuffle(users)
    weights = [1.0 / math.sqrt(rank + 1) for rank in range(len(users))]
    return users, rng.choices(range(len(users)), weights=weights, k=count)


def _pick(owner_of: list[int], users: int, clients: int) -> list[int]:
    """``clients`` owners spread from the heaviest to the lightest (all with tasks)."""
    counts = [0] * users
    for owner in owner_of:
        counts[owner] += 1
    ranked = sorted((i for i in range(users) if counts[i]), key=lambda i: -counts[i])
    step = len(ranked) / clients
    return [ranked[min(len(ranked) - 1, int(k * step))] for k in range(clients)]


def _parameters(rng: random.Random, export_type: str) -> dict[str, Any]:
    if export_type == "CUSTOMERS":
        return {"segment": rng.choice(SEGMENTS)}
    start = date(1992, 1, 1) + timedelta(days=rng.randrange(0, 2400))
    return {
        "from": start.isoformat(),
        "to": (start + timedelta(days=rng.choice((0, 6, 30, 90)))).isoformat(),
    }


def _task_row(
    rng: random.Random,
    task_id: int,
    requested: datetime,
    owner: tuple[str, str],
) -> dict[str, Any]:
    """One ended task as the service leaves it (every column of ``export_task``)."""
    tenant, user = owner
    export_type = "ORDERS" if rng.random() < 0.7 else "CUSTOMERS"
    fmt = "CSV" if rng.random() < 0.6 else "XLSX"
    params = _parameters(rng, export_type)
    params_json, params_hash = canonical_parameters(params)
    task_no = f"exp_{ULID.from_datetime(requested.replace(tzinfo=UTC))}"
    name = f"{export_type.title()} {params.get('from') or params.get('segment')}"
    started = requested + timedelta(seconds=rng.uniform(0.02, 1.5))
    finished = started + timedelta(seconds=rng.lognormvariate(1.0, 1.0))
    roll = rng.random()
    status = "SUCCEEDED" if roll < 0.88 else "FAILED" if roll < 0.96 else "CANCELLED"
    rows = int(math.exp(rng.uniform(math.log(50), math.log(400_000))))
    shards = None
    if export_type == "ORDERS":
        days = (date.fromisoformat(params["to"]) - date.fromisoformat(params["from"])).days + 1
        shards = min(16, days)
    row: dict[str, Any] = {
        "id": task_id,
        "task_no": task_no,
        "export_type": export_type,
        "format": fmt,
        "task_name": name,
        "parameters_json": params_json,
        "parameters_hash": params_hash,
        "request_id": f"ui-{uuid.UUID(int=rng.getrandbits(128))}" if rng.random() < 0.8 else None,
        "tenant_id": tenant,
        "app_code": APP_CODE,
        "requested_by": user,
        "status": status,
        "phase": "store",
        "processed_rows": rows,
        "total_rows": rows,
        "shards_done": shards,
        "shards_total": shards,
        "dispatch_version": 1,
        "attempt_count": 1,
        "max_attempts": 3,
        "next_retry_at": requested,
        "lease_owner": None,
        "lease_until": None,
        "last_heartbeat_at": finished,
        "execution_deadline_at": started + timedelta(minutes=30),
        "cancel_requested": status == "CANCELLED",
        "failure_code": None,
        "failure_message": None,
        "warning_message": None,
        "object_key": None,
        "file_name": None,
        "content_type": None,
        "size_bytes": None,
        "row_count": None,
        "trace_id": new_trace_id(),
        "time_zone": "UTC",
        "requested_at": requested,
        "started_at": started,
        "completed_at": finished,
        "expires_at": None,
        "updated_at": finished,
    }
    ext = fmt.lower()
    if status == "SUCCEEDED":
        row.update(
            object_key=new_object_key(task_no, ext, tenant=tenant, now=finished),
            file_name=download_file_name(name, ext),
            content_type=FORMATS[ext].content_type,
            size_bytes=rows * (140 if fmt == "CSV" else 70),
            row_count=rows,
            expires_at=finished + RETENTION,
        )
    elif status == "FAILED":
        batch = rng.randrange(1, 40)
        row.update(
            processed_rows=min(rows, batch * 5000),
            phase="fetch",
            failure_code="PROVIDER_REJECTED",
            failure_message=f"fetch: batch {batch} (cursor {batch * 5000}): provider 400",
        )
    else:
        row.update(
            processed_rows=rows // 3,
            phase="render",
            failure_code="CANCELLED",
            failure_message="cancelled by its owner",
        )
    return row


def _outbox_row(rng: random.Random, task: dict[str, Any]) -> dict[str, Any]:
    """The SENT command of the task's dispatch version 1."""
    event_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    sent = task["requested_at"] + timedelta(milliseconds=rng.uniform(5, 600))
    return {
        "id": task["id"],
        "event_id": event_id,
        "task_id": task["id"],
        "dispatch_version": 1,
        "topic": TOPIC,
        "tag": commands.COMMAND_TAG,
        "message_key": task["task_no"],
        "payload_json": commands.encode(
            event_id=event_id,
            task_no=task["task_no"],
            export_type=task["export_type"],
            dispatch_version=1,
            trace_id=task["trace_id"],
        ),
        "status": "SENT",
        "attempt_count": 1,
        "next_retry_at": task["requested_at"],
        "lease_owner": None,
        "lease_until": None,
        "sent_at": sent,
        "last_error": None,
        "created_at": task["requested_at"],
        "updated_at": sent,
    }


def _audit_row(task: dict[str, Any]) -> dict[str, Any]:
    """The audit row of the owner's cancel of a running task."""
    return {
        "occurred_at": task["completed_at"] - timedelta(seconds=2),
        "actor": f"user:{task['tenant_id']}/{task['requested_by']}",
        "action": "manual_cancel",
        "outcome": "stop_requested",
        "tenant_id": task["tenant_id"],
        "task_id": task["id"],
        "task_no": task["task_no"],
        "event_id": None,
        "dispatch_version": 1,
        "reason": None,
        "details_json": None,
    }


def _chunks(
    rng: random.Random,
    times: list[datetime],
    users: list[tuple[str, str]],
    owner_of: list[int],
) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(times), CHUNK):
        yield [
            _task_row(rng, i + 1, times[i], users[owner_of[i]])
            for i in range(start, min(start + CHUNK, len(times)))
        ]


def seed_tasks(
    engine: Engine,
    count: int,
    *,
    clients: int,
    seed: int = 20261201,
    say: Callable[[str], None] = print,
) -> Seeded:
    """Insert ``count`` ended tasks with their outbox rows and idempotency keys.

    Args:
        engine: the export center's database, migrated to head, with no task yet.
        count: tasks to write.
        clients: how many users to pick for the load clients (:attr:`Seeded.picked`).
        seed: the random seed (the same seed writes the same owners, types and sizes;
            task ids, trace ids and times differ with the clock).
        say: progress lines.

    Returns:
        What was written, and the picked users with their task ids.
    """
    rng = random.Random(seed)
    started = time.perf_counter()
    users, owner_of = _owners(rng, count)
    picked = _pick(owner_of, len(users), clients)
    wanted = {owner: i for i, owner in enumerate(picked)}
    picked_tasks: list[list[str]] = [[] for _ in picked]
    now = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=1)
    span = SPREAD_DAYS * 86400.0
    times = sorted(now - timedelta(seconds=rng.uniform(0.0, span)) for _ in range(count))
    statuses: dict[str, int] = {}
    outbox = keys = audit = 0
    for n, tasks in enumerate(_chunks(rng, times, users, owner_of)):
        boxes = [_outbox_row(rng, task) for task in tasks]
        request_keys = [
            {
                "id": task["id"],
                "tenant_id": task["tenant_id"],
                "requested_by": task["requested_by"],
                "request_key": task["request_id"],
                "task_id": task["id"],
                "created_at": task["requested_at"],
            }
            for task in tasks
            if task["request_id"] is not None
        ]
        cancels = [_audit_row(task) for task in tasks if task["status"] == "CANCELLED"]
        with engine.begin() as conn:
            conn.execute(insert(TASKS), tasks)
            conn.execute(insert(OUTBOX), boxes)
            if request_keys:
                conn.execute(insert(REQUEST_KEYS), request_keys)
            if cancels:
                conn.execute(insert(AUDIT), cancels)
        outbox += len(boxes)
        keys += len(request_keys)
        audit += len(cancels)
        for task in tasks:
            statuses[task["status"]] = statuses.get(task["status"], 0) + 1
            slot = wanted.get(owner_of[task["id"] - 1])
            if slot is not None:
                picked_tasks[slot].append(task["task_no"])
        if n % 5 == 4:
            say(f"    seeded {tasks[-1]['id']:,} of {count:,} tasks")
    if engine.dialect.name in ("mysql", "mariadb"):
        # InnoDB recomputes its statistics in the background after large changes; do it
        # now so that the plans below are those of a table that has lived a while.
        with engine.begin() as conn:
            conn.execute(
                text("ANALYZE TABLE export_task, export_outbox, export_request_key, export_audit")
            )
    return Seeded(
        tasks=count,
        outbox=outbox,
        request_keys=keys,
        audit=audit,
        seconds=round(time.perf_counter() - started, 2),
        statuses=dict(sorted(statuses.items())),
        users=len(set(owner_of)),
        picked=[
            (users[owner][0], users[owner][1], picked_tasks[i]) for i, owner in enumerate(picked)
        ],
    )
