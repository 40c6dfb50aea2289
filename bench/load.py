"""The API under load: 100,000 finished tasks, 32 clients for 30 s, latency per route.

For each database (the embedded SQLite file, and MariaDB in its own database
``export_center_bench_load``, dropped and created again by every run):

1. a fresh database is migrated to the Alembic head (what ``export-center db
   upgrade`` and the embedded start-up run) and seeded with ``--tasks`` ended tasks
   (default 100,000; ``bench.load_seed``: 2,000 users in 40 tenants, their outbox
   rows, idempotency keys and audit rows), plus the TPC-H sample at scale 0.01 that
   the create route's exports read;
2. ``export-center serve`` starts as a subprocess on a free loopback port on that
   database, with every loop on (publisher, consumer, reconciler) and one setting
   changed: the per-type active limit is lifted (``LIMITS__MAX_ACTIVE_PER_TYPE``;
   at its default of 5, almost every create would be a 429 after 1 ms and the create
   route would not be measured). Its JSON log goes to a file;
3. ``--clients`` clients (default 32; one ``httpx.AsyncClient`` each, one event
   loop, no pause between requests unless ``--pause``) run for ``--seconds`` (default 30) after one
   warm-up request of each route. Each client is a different seeded user, from the
   heaviest (about 1,100 tasks) to light ones (about 20); it picks each request at
   random: 20 % create (a CUSTOMERS export of one market segment, about 300 rows,
   as a new user of the client's tenant each time, with a unique ``requestId``),
   40 % detail (one of its own tasks), 40 % list (its first page, default filters).
   Latency is from sending the request to the whole answer read, in the client;
4. the server stops; every answer of 400 or more and the server log are searched
   for ``database is locked``; then the statements of the routes and the loops are
   explained (``bench.load_explain``).

Result per database (``load.<database>``): for each route ``create``, ``detail``,
``list``: ``{requests, requestsPerSecond, p50Ms, p99Ms, maxMs, meanMs, errors5xx,
errors4xx, locked, transportErrors, statuses}``; and ``requestsPerSecond``,
``seconds``, ``clients``, ``seeded`` (rows and seconds), ``lockedInLog``,
``cpuSeconds`` (server process, MariaDB server, this client process, the whole
machine), ``rowLocks`` (MariaDB: InnoDB row lock ``waits`` and their ``ms`` during the
window, server-wide: other databases' transactions count too; None on SQLite),
``guardQueue`` (MariaDB: creates waiting for a create-guard row of the requester,
tenant or export type, ``{mean, max, samples}`` of a count every 0.1 s; None on
SQLite), ``apiProcesses``, ``created``
(the load's own tasks by status when the server stopped), ``explain``.

Usage::

    python -m bench.load [--quick] [--databases sqlite,mariadb] [--explain]
                         [--tasks N] [--seconds S] [--clients C] [--pause S]
                         [--api-workers 1,2] [--json FILE]

``--api-workers 1,2``: each database once with one API process (``load.<database>``)
and once with ``serve --workers 2`` (``load.<database>-api2``), same seed, side by side.
``--quick``: 10,000 tasks and 5 s. ``--pause S``: each client waits S seconds after
each answer (a person polling the download center) instead of sending the next
request at once. ``--explain``: seed and print the plans only
(no server, no load). MariaDB comes from ``EXPORT_CENTER_BENCH_MARIADB_URL``, else
``EXPORT_CENTER_TEST_MARIADB_URL``, else the ``scripts/mariadb.sh`` server; only the
server and credentials of that URL are used (the user must be allowed to create a
database).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from bench.e2e import ROOT
from bench.load_drive import CLIENTS, LOCKED, MIX, ROUTES, drive
from bench.load_explain import explain_all, explain_report
from bench.load_seed import seed_tasks
from bench.load_serve import children_of, serve, start_worker, stop
from bench.procs import CpuMeter, pids_matching
from bench.tables import markdown_table

__all__ = [
    "FULL",
    "QUICK",
    "ROUTES",
    "load_mariadb_url",
    "load_report",
    "main",
    "run_load",
]


FULL: dict[str, Any] = {"tasks": 100_000, "seconds": 30.0}
QUICK: dict[str, Any] = {"tasks": 10_000, "seconds": 5.0}
LOAD_DATABASE = "export_center_bench_load"
SAMPLE_SCALE = 0.01


def load_mariadb_url() -> tuple[str | None, str]:
    """The URL of the load database on the MariaDB server, and where the server came
    from (or None and why not). The database is dropped and created again here.

    The server and credentials come from ``EXPORT_CENTER_BENCH_MARIADB_URL``, else
    ``EXPORT_CENTER_TEST_MARIADB_URL``, else ``scripts/mariadb.sh url``; the database
    is always :data:`LOAD_DATABASE`.
    """
    base, source = None, ""
    for name in ("EXPORT_CENTER_BENCH_MARIADB_URL", "EXPORT_CENTER_TEST_MARIADB_URL"):
        if os.environ.get(name):
            base, source = os.environ[name], name
            break
    if base is None:
        script = ROOT / "scripts" / "mariadb.sh"
        done = subprocess.run(
            ["bash", str(script), "url"], capture_output=True, text=True, timeout=30
        )
        if done.returncode != 0:
            return None, "no MariaDB URL in the environment and no scripts/mariadb.sh url"
        base, source = done.stdout.strip(), "scripts/mariadb.sh"
    try:
        admin = create_engine(make_url(base))
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{LOAD_DATABASE}`"))
            conn.execute(text(f"CREATE DATABASE `{LOAD_DATABASE}` CHARACTER SET utf8mb4"))
        admin.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means: skip MariaDB with a note
        return None, f"MariaDB unusable ({source}): {type(exc).__name__}: {exc}"
    url = make_url(base).set(database=LOAD_DATABASE).render_as_string(hide_password=False)
    return url, f"{source} (database {LOAD_DATABASE})"


# --------------------------------------------------------------------------- the server


def _prepare(
    database: str, database_url: str, data_dir: Path, tasks: int, clients: int, say: Any
) -> tuple[Any, dict[str, Any]]:
    """Migrate and seed a fresh database; load the TPC-H sample the creates read.

    Returns:
        ``(seeded, seed_info)``: :class:`bench.load_seed.Seeded` and its JSON form.
    """
    from export_center.db import make_engine
    from export_center.runtime import upgrade_database
    from providers import tpch

    engine = make_engine(database_url)
    started = time.perf_counter()
    upgrade_database(engine)
    migrated = time.perf_counter() - started
    seeded = seed_tasks(engine, tasks, clients=clients, say=say)
    engine.dispose()
    sample = make_engine(database_url, immediate=False)
    tpch.ensure_loaded(sample, SAMPLE_SCALE, data_dir, progress=lambda m: None)
    sample.dispose()
    say(
        f"  {database}: migrated in {migrated:.1f} s; seeded {seeded.tasks:,} tasks, "
        f"{seeded.outbox:,} outbox rows, {seeded.request_keys:,} keys, {seeded.audit:,} "
        f"audit rows in {seeded.seconds:.1f} s ({seeded.tasks / seeded.seconds:,.0f} tasks/s)"
    )
    info = {
        "tasks": seeded.tasks,
        "outbox": seeded.outbox,
        "requestKeys": seeded.request_keys,
        "audit": seeded.audit,
        "statuses": seeded.statuses,
        "users": seeded.users,
        "seconds": seeded.seconds,
        "migrateSeconds": round(migrated, 2),
        "clientUserTasks": [len(p[2]) for p in seeded.picked],
    }
    return seeded, info


def _fresh_sqlite(data_dir: Path) -> str:
    """Delete the SQLite file (and its WAL) under ``data_dir``; returns its URL."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "export-center.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(data_dir / "files", ignore_errors=True)
    return f"sqlite:///{path}"


def _created(database_url: str) -> dict[str, int]:
    """The load's own tasks (owners ``load-*``) by status."""
    from export_center.db import make_engine
    from export_center.repository.tables import TASKS as T

    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(T.c.status, func.count())
                .where(T.c.requested_by.like("load-%"))
                .group_by(T.c.status)
            ).all()
    finally:
        engine.dispose()
    return {str(status): int(count) for status, count in sorted(rows)}


def _row_locks(database_url: str) -> dict[str, int] | None:
    """InnoDB's row lock waits so far (``waits``) and the milliseconds spent in them
    (``ms``), server-wide; None on SQLite."""
    if database_url.startswith("sqlite"):
        return None
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = {
                str(name): str(value)
                for name, value in conn.execute(
                    text(
                        "SHOW GLOBAL STATUS WHERE Variable_name IN "
                        "('Innodb_row_lock_waits', 'Innodb_row_lock_time')"
                    )
                )
            }
    finally:
        engine.dispose()
    return {"waits": int(rows["Innodb_row_lock_waits"]), "ms": int(rows["Innodb_row_lock_time"])}


class _GuardSampler(threading.Thread):
    """Counts, every 0.1 s, the load database's connections that are running the
    create guard's ``SELECT ... FOR UPDATE`` (MariaDB; ``PROCESSLIST`` shows the
    connections of the same user without the PROCESS privilege). Taking an uncontended
    row lock is immediate, so a connection seen there is a create queued on the
    guard row: the samples' mean is the average length of that queue."""

    def __init__(self, database_url: str) -> None:
        super().__init__(name="guard-sampler", daemon=True)
        self.url = database_url
        self.samples: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        engine = create_engine(self.url)
        query = text(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() "
            "AND ID <> CONNECTION_ID() AND COMMAND = 'Query' "
            "AND INFO LIKE '%export_task_guard%FOR UPDATE%'"
        )
        try:
            with engine.connect() as conn:
                while not self.done.wait(0.1):
                    self.samples.append(int(conn.execute(query).scalar_one()))
        finally:
            engine.dispose()

    def summary(self) -> dict[str, Any]:
        """``{mean, max, samples}`` of the queue length."""
        n = len(self.samples)
        return {
            "mean": round(sum(self.samples) / n, 2) if n else None,
            "max": max(self.samples) if n else None,
            "samples": n,
        }


def _explain(database_url: str, tenant: str, user: str) -> dict[str, Any]:
    from export_center.db import make_engine

    engine = make_engine(database_url)
    try:
        return explain_all(engine, tenant=tenant, user=user)
    finally:
        engine.dispose()


def run_load(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    tasks: int,
    seconds: float,
    clients: int = CLIENTS,
    pause: float = 0.0,
    api_workers: int = 1,
    broker: str | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Seed, serve, load and explain one database (module docstring).

    Args:
        data_dir: the bench data directory; this run uses ``load-<database>`` in it.
        database: ``sqlite`` or ``mariadb`` (a label).
        database_url: the MariaDB load database (:func:`load_mariadb_url`), or None
            for a fresh SQLite file.
        tasks: ended tasks to seed.
        seconds: length of the measured window.
        clients: concurrent clients.
        pause: seconds each client waits after each answer (0: none).
        api_workers: API processes (``serve --workers N`` when above 1: the loops run
            once, in the parent).
        broker: a RocketMQ endpoint with the ``bench-`` topics: the exports then run in
            a separate ``export-center worker`` process (``exportsIn: "worker"``), not
            in the server's parent.

    Returns:
        The ``load.<database>`` result (module docstring).
    """
    run_dir = data_dir / f"load-{database}"
    url = _fresh_sqlite(run_dir) if database_url is None else database_url
    run_dir.mkdir(parents=True, exist_ok=True)
    seeded, seed_info = _prepare(database, url, run_dir, tasks, clients, say)
    secret = secrets.token_urlsafe(32)
    log = run_dir / "serve.log"
    proc, base = serve(
        run_dir,
        url,
        secret,
        log,
        sample_scale=SAMPLE_SCALE,
        api_workers=api_workers,
        broker=broker,
    )
    worker = None
    if broker is not None:
        worker = start_worker(
            run_dir,
            url,
            secret,
            run_dir / "worker.log",
            sample_scale=SAMPLE_SCALE,
            broker=broker,
            api_url=base,
        )
    if api_workers > 1 or worker is not None:
        time.sleep(3.0)  # healthy once one API process serves; let the others start
    server = [proc.pid, *children_of(proc.pid)]
    groups = {"server": server, "mariadb": pids_matching("mariadbd")}
    if worker is not None:
        groups["worker"] = [worker.pid]
    meter = CpuMeter(groups)
    try:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu = usage.ru_utime + usage.ru_stime
        load_start = os.getloadavg()[0]
        locks_before = _row_locks(url)
        sampler = None if url.startswith("sqlite") else _GuardSampler(url)
        if sampler is not None:
            sampler.start()
        meter.start()
        try:
            stats, elapsed = asyncio.run(drive(base, seeded.picked, secret, seconds, pause))
        finally:
            if sampler is not None:
                sampler.done.set()
                sampler.join(10)
        cpu = meter.stop()
        locks_after = _row_locks(url)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu["client"] = round(usage.ru_utime + usage.ru_stime - client_cpu, 2)
    finally:
        stop(proc)
        if worker is not None:
            stop(worker)
    log_text = log.read_text(encoding="utf-8", errors="replace")
    result: dict[str, Any] = {route: stats[route].summary(elapsed) for route in ROUTES}
    total = sum(result[r]["requests"] for r in ROUTES)
    result.update(
        {
            "requestsPerSecond": round(total / elapsed, 1),
            "seconds": round(elapsed, 2),
            "clients": clients,
            "apiProcesses": api_workers,
            "exportsIn": "worker" if worker is not None else "serve",
            "pauseSeconds": pause,
            "mix": dict(zip(ROUTES, MIX, strict=True)),
            "loadAverage": round(load_start, 2),
            "lockedInLog": log_text.count(LOCKED),
            "serverExit": proc.returncode,
            "cpuSeconds": cpu,
            "rowLocks": None
            if locks_before is None or locks_after is None
            else {k: locks_after[k] - locks_before[k] for k in locks_before},
            "guardQueue": None if sampler is None else sampler.summary(),
            "created": _created(url),
            "seeded": seed_info,
            "explain": _explain(url, seeded.picked[0][0], seeded.picked[0][1]),
        }
    )
    for route in ROUTES:
        r = result[route]
        say(
            f"  {database} {route:6s} {r['requests']:>6,} requests {r['requestsPerSecond']:>7.1f}/s"
            f"  p50 {r['p50Ms'] or 0:7.1f} ms  p99 {r['p99Ms'] or 0:7.1f} ms  max "
            f"{r['maxMs'] or 0:7.1f} ms  5xx {r['errors5xx']}  4xx {r['errors4xx']}  "
            f"locked {r['locked']}"
        )
    say(
        f"  {database}: {result['requestsPerSecond']:,.1f} requests/s over "
        f"{elapsed:.1f} s; 'database is locked' in the server log: {result['lockedInLog']}; "
        f"CPU s {cpu}; row locks {result['rowLocks']}; guard queue {result['guardQueue']}"
    )
    return result


def load_report(load: dict[str, Any]) -> str:
    """The Markdown table of ``load.<database>.<route>``."""
    rows = []
    for database, r in load.items():
        if "skipped" in r:
            rows.append([database, "skipped: " + r["skipped"], *[""] * 8])
            continue
        for route in ROUTES:
            s = r[route]
            rows.append(
                [
                    database,
                    route,
                    f"{s['requests']:,}",
                    f"{s['requestsPerSecond']:,.1f}",
                    "-" if s["p50Ms"] is None else f"{s['p50Ms']:.1f}",
                    "-" if s["p99Ms"] is None else f"{s['p99Ms']:.1f}",
                    "-" if s["maxMs"] is None else f"{s['maxMs']:.1f}",
                    str(s["errors5xx"]),
                    str(s["errors4xx"]),
                    str(s["locked"]),
                ]
            )
    first = next((r for r in load.values() if "skipped" not in r), None)
    head = (
        f"\nAPI under load ({first['clients']} clients"
        + (f" pausing {first['pauseSeconds']:g} s" if first.get("pauseSeconds") else "")
        + f", {first['seconds']:.0f} s, "
        f"{first['seeded']['tasks']:,} seeded tasks; "
        + "; ".join(
            f"{db} {r['requestsPerSecond']:,.0f} requests/s, log 'locked' {r['lockedInLog']}"
            for db, r in load.items()
            if "skipped" not in r
        )
        + "):\n"
        if first
        else "\nAPI under load:\n"
    )
    body = markdown_table(
        [
            "database",
            "route",
            "requests",
            "req/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "5xx",
            "4xx",
            "locked",
        ],
        rows,
        left=(0, 1),
    )
    notes = []
    for database, r in load.items():
        if "skipped" in r:
            continue
        cpu = r["cpuSeconds"]
        locks = r.get("rowLocks")
        notes.append(
            f"- {database}: CPU-seconds in {r['seconds']:.0f} s: server {cpu.get('server')}, "
            f"MariaDB {cpu.get('mariadb')}, clients {cpu.get('client')}, whole machine "
            f"{cpu.get('machine')} (load average {r['loadAverage']:.2f} at the start); "
            f"the load's tasks when the server stopped: {r['created']}"
            + (f"; InnoDB row lock waits {locks['waits']:,} ({locks['ms']:,} ms)" if locks else "")
            + (
                f"; creates queued on guard rows: mean {guard['mean']}, max {guard['max']}"
                if (guard := r.get("guardQueue"))
                else ""
            )
        )
    return head + body + ("\n\n" + "\n".join(notes) if notes else "")


# --------------------------------------------------------------------------- command


def _databases(names: list[str], say: Callable[[str], None]) -> list[tuple[str, str | None, str]]:
    """``(label, URL or None for SQLite, skip reason or "")`` of each wanted database."""
    out: list[tuple[str, str | None, str]] = []
    for name in names:
        if name == "sqlite":
            out.append(("sqlite", None, ""))
        elif name == "mariadb":
            url, source = load_mariadb_url()
            say(f"  mariadb: {source}")
            out.append(("mariadb", url, "" if url else source))
        else:
            raise SystemExit(f"unknown database {name!r} (sqlite, mariadb)")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.load`` (module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="10,000 tasks, 5 s")
    parser.add_argument("--databases", default="sqlite,mariadb", help="sqlite,mariadb")
    parser.add_argument("--explain", action="store_true", help="seed and explain only")
    parser.add_argument("--tasks", type=int, default=None, help="tasks to seed")
    parser.add_argument("--seconds", type=float, default=None, help="measured seconds")
    parser.add_argument("--clients", type=int, default=CLIENTS, help="concurrent clients")
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds a client waits after each answer"
    )
    parser.add_argument(
        "--api-workers",
        default="1",
        help="API process counts, e.g. 1,2 (N > 1: serve --workers N; result load.<db>-apiN)",
    )
    parser.add_argument(
        "--separate-worker",
        action="store_true",
        help="with several API processes, run the exports in an export-center worker on "
        "the scripts/rocketmq.sh broker (bench- topics)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("EXPORT_CENTER_BENCH_DIR", ROOT / ".export-center" / "bench")),
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    tasks = args.tasks or sizes["tasks"]
    seconds = args.seconds or sizes["seconds"]
    data_dir = args.data_dir.resolve()
    say = print
    results: dict[str, Any] = {}
    for database, url, skipped in _databases(args.databases.split(","), say):
        if skipped:
            results[database] = {"skipped": skipped}
            continue
        if args.explain:
            run_dir = data_dir / f"load-{database}"
            target = _fresh_sqlite(run_dir) if url is None else url
            seeded, _info = _prepare(database, target, run_dir, tasks, args.clients, say)
            explained = _explain(target, seeded.picked[0][0], seeded.picked[0][1])
            results[database] = {"explain": explained}
            say("\n" + explain_report(database, explained) + "\n")
            continue
        for api_workers in (int(n) for n in args.api_workers.split(",")):
            label = database if api_workers == 1 else f"{database}-api{api_workers}"
            say(
                f"load on {database}: {tasks:,} tasks, {args.clients} clients, {seconds:g} s, "
                f"{api_workers} API process(es)"
            )
            # Every run seeds a fresh database: MariaDB's is dropped and created again.
            fresh = None if url is None else load_mariadb_url()[0]
            broker = None
            if args.separate_worker and api_workers > 1:
                from bench.cluster import broker_endpoint

                broker, source = broker_endpoint()
                if broker is None:
                    say(f"  exports in the server: no broker ({source})")
            results[label] = run_load(
                data_dir=data_dir,
                database=label,
                database_url=fresh,
                tasks=tasks,
                seconds=seconds,
                clients=args.clients,
                pause=args.pause,
                api_workers=api_workers,
                broker=broker,
                say=say,
            )
        say("\n" + explain_report(database, results[label]["explain"]) + "\n")
    if not args.explain:
        say(load_report(results))
    if args.json:
        args.json.write_text(json.dumps({"load": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
