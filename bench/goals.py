"""The issue's speed and memory goals computed from a ``python -m bench`` result.

:func:`compute_goals` turns the measured figures of every part into rows of
``{goal, value, target, met, note}``; ``met`` is None when the part did not run or its
size (``--quick``) says nothing about the goal. Nothing is asserted here.
"""

from __future__ import annotations

from typing import Any

from bench.big import expected_sheets
from bench.load import ROUTES

__all__ = ["CLUSTER_EXPORTS", "compute_goals"]

CLUSTER_EXPORTS = 8
"""Exports started at once by the ``cluster`` part."""

BIG_PER_100K_DEVIATION = 0.10
"""The big export's seconds per 100k rows may differ from the 405k run's by this share."""


def _goal(
    goals: list[dict[str, Any]],
    name: str,
    value: float | None,
    target: str,
    met: bool | None,
    note: str = "",
) -> None:
    goals.append(
        {
            "goal": name,
            "value": None if value is None else round(value, 3),
            "target": target,
            "met": met,
            **({"note": note} if note else {}),
        }
    )


def compute_goals(results: dict[str, Any], quick: bool) -> list[dict[str, Any]]:
    """The issue's goals as measured values (``met`` None when not measured)."""
    goals: list[dict[str, Any]] = []
    writers = results.get("writer", {})
    ours_xlsx = writers.get("ours_xlsx", {}).get("rowsPerSecond")
    base = writers.get("openpyxl_write_only", {}).get("rowsPerSecond")
    ratio = ours_xlsx / base if ours_xlsx and base else None
    _goal(
        goals,
        "XLSX writer vs openpyxl write-only",
        ratio,
        ">= 8x",
        None if ratio is None else ratio >= 8,
    )
    e2e = results.get("e2e", {})
    sqlite = e2e.get("sqlite", {})
    for fmt, limit in (("csv", 15.0), ("xlsx", 20.0)):
        run = sqlite.get(fmt)
        # The "rows/s >= 40 % of the bare writer" goal is retired: the writers became
        # 6x faster; the peers goals compare the service with a hand-written dump.
        cpu_limit = 0.5 if fmt == "csv" else 0.9
        per_100k = run["cpuSeconds"] / run["rows"] * 100_000 if run else None
        _goal(
            goals,
            f"e2e {fmt.upper()} worker CPU-s per 100k rows (SQLite)",
            per_100k,
            f"<= {cpu_limit}",
            None if per_100k is None or quick else per_100k <= cpu_limit,
            "start-up dominates at --quick sizes" if quick else "",
        )
        for database in ("sqlite", "mariadb"):
            done = e2e.get(database, {}).get(fmt)
            peak = done["peakRssMb"] if done else None
            _goal(
                goals,
                f"e2e {fmt.upper()} worker peak RSS, {database} (MB)",
                peak,
                "<= 200",
                None if peak is None else peak <= 200,
            )
        if run:
            seconds_405k = run["seconds"] * 405_000 / run["rows"]
            note = "extrapolated from --quick" if quick else ""
            _goal(
                goals,
                f"e2e {fmt.upper()} 405,000 orders on SQLite (s)",
                seconds_405k,
                f"<= {limit:g}",
                None if quick else seconds_405k <= limit,
                note,
            )
        mariadb = e2e.get("mariadb", {}).get(fmt)
        factor = mariadb["seconds"] / run["seconds"] if mariadb and run else None
        _goal(
            goals,
            f"e2e {fmt.upper()} MariaDB / SQLite time",
            factor,
            "<= 1.5",
            None if factor is None else factor <= 1.5,
        )
    peers = results.get("peers", {})
    for database, label in (("sqlite", "SQLite"), ("mariadb", "MariaDB")):
        for fmt, peer, name, limit in (
            ("csv", "csv", "stdlib-csv", 0.6),
            ("xlsx", "xlsxwriter", "XlsxWriter", 0.1),
        ):
            run = e2e.get(database, {}).get(fmt)
            direct = peers.get(database, {}).get(peer, {})
            value, note = None, ""
            if run and "seconds" in direct:
                if run["rows"] != direct["rows"]:
                    note = f"rows differ: {run['rows']:,} e2e, {direct['rows']:,} direct"
                else:
                    value = run["seconds"] / direct["seconds"]
                    note = f"--quick: {run['rows']:,} rows" if quick else ""
            informational = database != "sqlite"
            _goal(
                goals,
                f"e2e {fmt.upper()} / direct {name} dump ({label})",
                value,
                "-" if informational else f"<= {limit:g}",
                None if informational or value is None else value <= limit,
                note,
            )
    storage = results.get("storage", {})
    for fmt in ("csv", "xlsx"):
        ratio = storage.get(fmt, {}).get("ratio")
        _goal(
            goals,
            f"{fmt.upper()} export to S3 / to a local directory (time to succeeded)",
            ratio,
            "<= 1.3",
            None if ratio is None else ratio <= 1.3,
        )
    cluster = results.get("cluster", {})
    ratio = cluster.get("ratio")
    _goal(
        goals,
        f"cluster: {CLUSTER_EXPORTS} concurrent exports / one alone (aggregate rows/s)",
        ratio,
        ">= 1.5",
        None if ratio is None else ratio >= 1.5,
    )
    shards = results.get("shards", {})
    speedup = shards.get("speedup")
    _goal(
        goals,
        "4 shards at once / 1, provider at 100 ms per page (same files)",
        speedup,
        ">= 3x",
        None if speedup is None else speedup >= 3 and bool(shards.get("identical")),
    )
    on_db = shards.get("mariadb", {})
    ratio = on_db.get("ratio")
    _goal(
        goals,
        "ORDERS, 16 day shards, MariaDB: 4 at once / 1 at once (time)",
        ratio,
        "< 1",
        None if ratio is None else ratio < 1,
    )
    _load_goals(goals, results.get("load", {}))
    big = results.get("big", {})
    for database in ("sqlite", "mariadb"):
        for fmt, run in big.get(database, {}).items():
            if not isinstance(run, dict):
                continue
            base = run["base"]
            what = f"big {database} {fmt.upper()} {run['rows']:,} vs {base['rows']:,} rows"
            growth = run["peakRssMb"] - base["peakRssMb"]
            _goal(
                goals, f"{what}: peak RSS difference (MB)", growth, "within 50", abs(growth) <= 50
            )
            per = run["secondsPer100k"] / base["secondsPer100k"] - 1
            _goal(
                goals,
                f"{what}: seconds per 100k rows, deviation",
                per,
                f"within ±{BIG_PER_100K_DEVIATION:g}",
                abs(per) <= BIG_PER_100K_DEVIATION,
            )
            if fmt == "xlsx":
                want = expected_sheets(run["rows"])
                _goal(
                    goals,
                    f"big {database} XLSX sheets (ceil(rows / 1,048,575)), each with the header",
                    run["sheets"],
                    f"= {want}",
                    run["sheets"] == want and bool(run["sheetHeadersOk"]),
                )
    scaling = results.get("scaling", [])
    for fmt in ("csv", "xlsx"):
        points = sorted((p for p in scaling if p["format"] == fmt), key=lambda p: p["rows"])
        if len(points) < 2:
            continue
        growth = points[-1]["peakRssMb"] - points[0]["peakRssMb"]
        _goal(
            goals,
            f"{fmt.upper()} peak RSS growth {points[0]['rows']:,} -> "
            f"{points[-1]['rows']:,} rows (MB)",
            growth,
            "<= 50",
            growth <= 50,
        )
        per = [p["secondsPer100k"] for p in points]
        mean = sum(per) / len(per)
        spread = max(abs(x / mean - 1) for x in per)
        _goal(
            goals,
            f"{fmt.upper()} seconds per 100k rows, largest deviation from the mean",
            spread,
            "<= 0.20",
            spread <= 0.20,
        )
    return goals


LOAD_P99_MS = {"create": 100.0, "detail": 50.0, "list": 50.0}
"""The load part's p99 targets per route, in milliseconds (MariaDB; SQLite informational)."""

LOAD_P99_MS_API_PROCESSES = {"create": 150.0, "detail": 80.0, "list": 80.0}
"""The p99 targets with several API processes (``serve --workers N``), in milliseconds."""

GUARD_QUEUE_MEAN = 1.0
"""Creates waiting on create-guard rows, on average, with several API processes."""


def _load_goals(goals: list[dict[str, Any]], load: dict[str, Any]) -> None:
    """The load part's goals: p99 per route, no 5xx, no "database is locked"; met on
    MariaDB, informational (``met`` still computed, with a note) on SQLite."""
    for database, r in load.items():
        note = "informational on SQLite" if database.startswith("sqlite") else ""
        if "skipped" in r:
            continue
        several = r.get("apiProcesses", 1) > 1
        for route in ROUTES:
            p99 = r[route]["p99Ms"]
            limit = (LOAD_P99_MS_API_PROCESSES if several else LOAD_P99_MS)[route]
            _goal(
                goals,
                f"load {database}: {route} p99 with {r['clients']} clients (ms)",
                p99,
                f"<= {limit:g}",
                None if p99 is None else p99 <= limit,
                note,
            )
        errors = sum(r[route]["errors5xx"] + r[route]["transportErrors"] for route in ROUTES)
        _goal(
            goals,
            f"load {database}: 5xx answers and failed requests",
            errors,
            "0",
            errors == 0,
            note,
        )
        queue = (r.get("guardQueue") or {}).get("mean")
        if several and queue is not None:
            _goal(
                goals,
                f"load {database}: creates waiting on a guard row (mean)",
                queue,
                f"<= {GUARD_QUEUE_MEAN:g}",
                queue <= GUARD_QUEUE_MEAN,
                note,
            )
        locked = sum(r[route]["locked"] for route in ROUTES) + r["lockedInLog"]
        _goal(
            goals,
            f"load {database}: 'database is locked' in answers and the server log",
            locked,
            "0",
            locked == 0,
            note,
        )
