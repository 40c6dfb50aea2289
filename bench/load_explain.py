"""The query plans behind the load bench: list, detail, create, publisher, reconciler.

:func:`explain_all` calls the repository functions the API routes and the loops
call, on a seeded database, inside a transaction that is rolled back, and records
every statement they send (SQLAlchemy's ``before_cursor_execute``), so the plans are
those of the SQL the service runs, not of a copy. Each SELECT, UPDATE and DELETE is
then explained with its own parameters:

* SQLite: ``EXPLAIN QUERY PLAN``; ``SCAN <table>`` (with or without ``USING
  INDEX``) reads the whole table or index, ``SEARCH`` uses the index for its
  constraint, ``USE TEMP B-TREE`` sorts. The work of one run is counted in
  virtual-machine instructions (``vmSteps``, a progress handler).
* MariaDB: ``ANALYZE`` (the statement runs, still inside the rolled-back
  transaction): EXPLAIN's columns plus ``r_rows``; type ``ALL`` is a full table scan,
  ``index`` a full index scan. The work of that run is the growth of the session's
  ``Handler_read_*`` counters (``rowsExamined``: index entries and rows the storage
  engine handed over; ``r_rows`` misses those an index condition filtered).

Each SELECT is also timed (median of three runs, in the same transaction).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, event, func, select

from export_center import repository
from export_center.access import Scope
from export_center.commands import COMMAND_TAG
from export_center.repository.tables import OUTBOX, TASKS
from export_center.settings import LimitSettings, ReconcilerSettings

__all__ = ["LIST_LIMIT", "explain_all", "explain_report"]

LIST_LIMIT = 20
"""The list route's default page size (it asks the database for one row more)."""
_TABLES = ("export_task", "export_outbox", "export_request_key", "export_audit", "export_shard")
_SQLITE_SCAN = re.compile(r"^SCAN (\w+)")
_KINDS = ("SELECT", "UPDATE", "DELETE")
_STEP = 100
"""SQLite progress handler period (VM instructions)."""
_READS = {
    "Handler_read_first",
    "Handler_read_key",
    "Handler_read_last",
    "Handler_read_next",
    "Handler_read_prev",
    "Handler_read_rnd",
    "Handler_read_rnd_next",
}


@dataclass(frozen=True)
class _Who:
    """The task and owner the statements are asked about."""

    tenant: str
    user: str
    task_no: str
    task_id: int
    task_nos: list[str]


def _steps(who: _Who) -> list[tuple[str, Callable[[Connection], object]]]:
    """``(name, call)`` for each question the routes and loops ask the database."""
    r = ReconcilerSettings()
    limits = LimitSettings()
    own = Scope(tenant_id=who.tenant, app_code="PLATFORM", owner=who.user)
    tenant_wide = Scope(tenant_id=who.tenant, app_code="PLATFORM", owner=None)
    new = repository.NewTask(
        export_type="CUSTOMERS",
        format="CSV",
        task_name="explain",
        parameters={"segment": "BUILDING"},
        tenant_id=who.tenant,
        app_code="PLATFORM",
        requested_by=who.user,
        max_attempts=3,
        request_id="bench-load-explain",
    )
    return [
        (
            "list: one user's first page, default filters (GET /api/v1/exports)",
            lambda c: repository.list_tasks(
                c, scope=own, statuses=None, limit=LIST_LIMIT + 1, before_id=None
            ),
        ),
        (
            "list: the tenant's first page (platform:download:all)",
            lambda c: repository.list_tasks(
                c, scope=tenant_wide, statuses=None, limit=LIST_LIMIT + 1, before_id=None
            ),
        ),
        ("detail (GET /api/v1/exports/{id})", lambda c: repository.read_task_by_no(c, who.task_no)),
        (
            "create (POST /api/v1/exports)",
            lambda c: repository.create_task(
                c,
                new,
                topic="export-center-command-v1",
                tag=COMMAND_TAG,
                limits=repository.CreateLimits(
                    duplicate_window_seconds=limits.duplicate_window_seconds,
                    max_active_per_user=limits.max_active_per_user,
                    # lifted as in the load run, whose creates may still be queued
                    max_active_per_type=1_000_000,
                ),
            ),
        ),
        ("publisher: due outbox rows", lambda c: repository.due_outbox_ids(c, 50)),
        (
            "reconciler redispatch: PENDING tasks without an outbox row",
            lambda c: repository.tasks_missing_outbox(c, r.redispatch_grace_seconds, r.batch_size),
        ),
        (
            "reconciler redispatch: stale SENT commands of waiting tasks",
            lambda c: repository.stale_sent_outbox_ids(
                c, r.sent_stale_seconds, r.redispatch_grace_seconds, r.batch_size
            ),
        ),
        (
            "reconciler lease_recover: expired leases",
            lambda c: repository.expired_running_tasks(c, r.batch_size),
        ),
        (
            "reconciler outbox_release: stuck outbox claims",
            repository.release_expired_outbox_claims,
        ),
        (
            "reconciler expire: files past retention",
            lambda c: repository.tasks_past_retention(c, r.batch_size),
        ),
        (
            "reconciler expire: mark one task expired",
            lambda c: repository.mark_expired(c, who.task_id, "exports/none"),
        ),
        (
            "reconciler orphan_clean / part_clean: states of the tasks named by files",
            lambda c: repository.task_file_states(c, who.task_nos),
        ),
        (
            "reconciler part_clean: ids of the tasks named by parts",
            lambda c: repository.task_ids_by_no(c, who.task_nos),
        ),
        (
            "reconciler part_clean: forget a task's checkpoints",
            lambda c: repository.delete_shards(c, who.task_id, forget_counts=True),
        ),
        (
            "reconciler outbox_purge: SENT rows past the retention",
            lambda c: repository.purge_sent_outbox(c, r.outbox_retention_days, 5000),
        ),
        (
            "reconciler audit_purge: audit rows past the retention",
            lambda c: repository.purge_audit(c, r.audit_retention_days, 5000),
        ),
        ("metrics: queue and outbox gauges", repository.queue_figures),
    ]


def _capture(engine: Engine, call: Callable[[Connection], object]) -> list[tuple[str, Any]]:
    """The statements ``call`` sends, with their parameters (transaction rolled back)."""
    seen: list[tuple[str, Any]] = []

    def hook(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _ctx: Any, many: bool
    ) -> None:
        if not many and statement.lstrip().upper().startswith(_KINDS):
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", hook)
    try:
        with engine.connect() as conn:
            trans = conn.begin()
            try:
                call(conn)
            finally:
                trans.rollback()
    finally:
        event.remove(engine, "before_cursor_execute", hook)
    return seen


def _timed(conn: Connection, statement: str, parameters: Any) -> float:
    """Median milliseconds of three runs of the statement."""
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        conn.exec_driver_sql(statement, parameters).fetchall()
        runs.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(runs), 3)


def _vm_steps(conn: Connection, statement: str, parameters: Any) -> int:
    """SQLite virtual-machine instructions of one run of the statement (counted by a
    progress handler every :data:`_STEP` instructions, so to within that many)."""
    raw = conn.connection.dbapi_connection
    assert raw is not None
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    raw.set_progress_handler(tick, _STEP)
    try:
        result = conn.exec_driver_sql(statement, parameters)
        if result.returns_rows:
            result.fetchall()
    finally:
        raw.set_progress_handler(None, 0)
    return count[0] * _STEP


def _plan_sqlite(conn: Connection, statement: str, parameters: Any) -> dict[str, Any]:
    rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
    depth: dict[int, int] = {0: -1}
    lines, scans = [], []
    for node, parent, _unused, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + str(detail))
        match = _SQLITE_SCAN.match(str(detail))
        if match and match.group(1) in _TABLES:
            scans.append(match.group(1))
    return {
        "plan": lines,
        "fullScan": scans,
        "sort": any("TEMP B-TREE" in line for line in lines),
        "rowsExamined": None,
        "vmSteps": _vm_steps(conn, statement, parameters),
    }


def _handler_reads(conn: Connection) -> int:
    """The session's ``Handler_read_*`` counters added up: every index entry and row
    the storage engine handed the server so far."""
    rows = conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Handler_read%%'").all()
    return sum(int(value) for name, value in rows if name in _READS)


def _plan_mariadb(conn: Connection, statement: str, parameters: Any) -> dict[str, Any]:
    """``ANALYZE`` (the statement runs once) and the rows it examined: the growth of
    the handler read counters around it, less what reading them costs."""
    idle = -_handler_reads(conn) + _handler_reads(conn)
    before = _handler_reads(conn)
    rows = conn.exec_driver_sql("ANALYZE " + statement, parameters).mappings().all()
    examined = _handler_reads(conn) - before - idle
    lines, scans = [], []
    for row in rows:
        kind = row.get("type")
        lines.append(
            f"{row.get('select_type')} {row.get('table')} type={kind} key={row.get('key')} "
            f"ref={row.get('ref')} rows={row.get('rows')} r_rows={row.get('r_rows')} "
            f"{row.get('Extra') or ''}".rstrip()
        )
        if kind in ("ALL", "index") and row.get("table") in _TABLES:
            scans.append(str(row.get("table")))
    return {
        "plan": lines,
        "fullScan": scans,
        "sort": any("filesort" in line for line in lines),
        "rowsExamined": max(0, examined),
        "vmSteps": None,
    }


def _short(statement: str) -> str:
    """One line; a long SELECT list becomes ``<N columns>``."""
    flat = " ".join(statement.split())
    match = re.match(r"^SELECT (.*?) FROM ", flat)
    if match and match.group(1).count(",") >= 5:
        columns = match.group(1).count(",") + 1
        flat = f"SELECT <{columns} columns> FROM " + flat[match.end() :]
    return flat


def explain_all(engine: Engine, *, tenant: str, user: str) -> dict[str, Any]:
    """Explain every statement of the routes and loops for ``user`` of ``tenant``.

    Args:
        engine: the seeded export center database (nothing is changed in it).
        tenant, user: the owner whose list, detail and create are explained (the
            bench passes the heaviest user).

    Returns:
        ``{"tables": {table: rows}, "statements": [...]}``, each statement
        ``{step, sql, parameters, ms, plan: [lines], fullScan: [tables], sort,
        rowsExamined, vmSteps}``: ``rowsExamined`` (MariaDB) is the index entries and
        rows the storage engine handed over in one run (``Handler_read_*``);
        ``vmSteps`` (SQLite) the virtual-machine instructions of one run, to within
        100. ``ms`` is the median of three runs of a SELECT (None for writes and
        locks), on whatever else the server is doing.
    """
    with engine.connect() as conn:
        row = conn.execute(
            select(TASKS.c.id, TASKS.c.task_no)
            .where(TASKS.c.tenant_id == tenant, TASKS.c.requested_by == user)
            .order_by(TASKS.c.id.desc())
            .limit(1)
        ).one()
        task_nos = list(
            conn.execute(select(TASKS.c.task_no).order_by(TASKS.c.id.desc()).limit(50)).scalars()
        )
        tables = {
            "export_task": int(conn.execute(select(func.count()).select_from(TASKS)).scalar_one()),
            "export_outbox": int(
                conn.execute(select(func.count()).select_from(OUTBOX)).scalar_one()
            ),
        }
    who = _Who(tenant, user, str(row[1]), int(row[0]), task_nos)
    plan = _plan_sqlite if engine.dialect.name == "sqlite" else _plan_mariadb
    statements = []
    for step, call in _steps(who):
        seen = _capture(engine, call)
        with engine.connect() as conn:
            trans = conn.begin()
            try:
                for statement, parameters in seen:
                    if statement.lstrip().upper().startswith("SELECT") and " FOR UPDATE" not in (
                        statement.upper()
                    ):
                        ms: float | None = _timed(conn, statement, parameters)
                    else:
                        ms = None  # a write or a lock: its plan is enough
                    statements.append(
                        {
                            "step": step,
                            "sql": _short(statement),
                            "parameters": [str(p) for p in parameters][:8],
                            "ms": ms,
                            **plan(conn, statement, parameters),
                        }
                    )
            finally:
                trans.rollback()
    return {"tables": tables, "statements": statements}


def explain_report(database: str, explained: dict[str, Any]) -> str:
    """The plans as text: one block per statement, full scans and sorts called out."""
    tables = ", ".join(f"{t} {n:,} rows" for t, n in explained["tables"].items())
    out = [f"EXPLAIN on {database} ({tables}):"]
    for s in explained["statements"]:
        flags = []
        if s["fullScan"]:
            flags.append("FULL SCAN of " + ", ".join(s["fullScan"]))
        if s["sort"]:
            flags.append("sorts")
        if s["rowsExamined"] is not None:
            flags.append(f"{s['rowsExamined']:,} rows examined")
        if s["vmSteps"] is not None:
            flags.append(f"{s['vmSteps']:,} VM steps")
        if s["ms"] is not None:
            flags.append(f"{s['ms']:.2f} ms")
        out.append(f"\n- {s['step']}: {'; '.join(flags) or 'index only'}")
        out.append(f"  {s['sql']}")
        out.extend(f"    {line}" for line in s["plan"])
    return "\n".join(out)
