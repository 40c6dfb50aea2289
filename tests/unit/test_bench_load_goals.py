"""The load part's goals: one API process against 100/50/50 ms, two (``serve --workers
2``) against 150/80/80 ms and at most one create waiting on guard rows on average;
SQLite runs are informational whatever their label."""

from __future__ import annotations

from typing import Any

from bench.goals import compute_goals


def _run(p99: dict[str, float], api: int, queue: float | None) -> dict[str, Any]:
    routes = {
        route: {"p99Ms": ms, "errors5xx": 0, "transportErrors": 0, "locked": 0}
        for route, ms in p99.items()
    }
    guard = None if queue is None else {"mean": queue, "max": 4, "samples": 300}
    return {**routes, "clients": 32, "apiProcesses": api, "lockedInLog": 0, "guardQueue": guard}


def _load_goals(load: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["goal"]: g for g in compute_goals({"load": load}, quick=False) if "load" in g["goal"]}


def test_two_api_processes_are_judged_on_their_own_targets_and_the_guard_queue() -> None:
    p99 = {"create": 120.0, "detail": 70.0, "list": 60.0}
    goals = _load_goals({"mariadb": _run(p99, 1, 2.5), "mariadb-api2": _run(p99, 2, 0.4)})
    one = "load mariadb: {} p99 with 32 clients (ms)"
    two = "load mariadb-api2: {} p99 with 32 clients (ms)"
    assert [goals[one.format(r)]["met"] for r in ("create", "detail", "list")] == [False] * 3
    assert [goals[two.format(r)]["met"] for r in ("create", "detail", "list")] == [True] * 3
    assert goals["load mariadb-api2: creates waiting on a guard row (mean)"]["met"] is True
    assert "load mariadb: creates waiting on a guard row (mean)" not in goals


def test_a_long_guard_queue_fails_and_sqlite_stays_informational() -> None:
    p99 = {"create": 10.0, "detail": 5.0, "list": 5.0}
    goals = _load_goals({"mariadb-api2": _run(p99, 2, 1.7), "sqlite-api2": _run(p99, 2, None)})
    assert goals["load mariadb-api2: creates waiting on a guard row (mean)"]["met"] is False
    sqlite = [g for name, g in goals.items() if name.startswith("load sqlite-api2")]
    assert sqlite and all(g.get("note") == "informational on SQLite" for g in sqlite)
