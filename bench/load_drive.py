"""The clients of ``bench.load``: the route mix, one simulated user per client, and the
run that drives them all against a serving API for a number of seconds.

:func:`drive` answers ``({route: RouteStats}, seconds)``; latencies in milliseconds.
"""

from __future__ import annotations

import asyncio
import math
import random
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["CLIENTS", "CREATE_TYPE", "LOCKED", "MIX", "ROUTES", "RouteStats", "drive"]

ROUTES = ("create", "detail", "list")
MIX = (0.2, 0.4, 0.4)
"""Share of each route in :data:`ROUTES` order."""
CLIENTS = 32
CREATE_TYPE = "CUSTOMERS"
CREATE_PERMISSION = "export:customers:create"
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
LOCKED = "database is locked"


@dataclass
class RouteStats:
    """Answers of one route: latencies (ms) and status counts."""

    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    locked: int = 0
    transport_errors: int = 0

    def add(self, ms: float, response: httpx.Response) -> None:
        """Record one answer (its body is searched for "database is locked" when its
        status is 400 or more)."""
        self.latencies.append(ms)
        self.statuses[response.status_code] += 1
        if response.status_code >= 400 and LOCKED in response.text:
            self.locked += 1

    def summary(self, seconds: float) -> dict[str, Any]:
        """``{requests, requestsPerSecond, p50Ms, p99Ms, maxMs, meanMs, errors5xx,
        errors4xx, locked, transportErrors, statuses}``; latencies in milliseconds."""
        ordered = sorted(self.latencies)
        n = len(ordered)

        def pct(q: float) -> float | None:
            return round(ordered[max(0, math.ceil(n * q) - 1)], 2) if n else None

        return {
            "requests": n,
            "requestsPerSecond": round(n / seconds, 1) if seconds else None,
            "p50Ms": pct(0.50),
            "p99Ms": pct(0.99),
            "maxMs": round(ordered[-1], 2) if n else None,
            "meanMs": round(sum(ordered) / n, 2) if n else None,
            "errors5xx": sum(c for s, c in self.statuses.items() if s >= 500),
            "errors4xx": sum(c for s, c in self.statuses.items() if 400 <= s < 500),
            "locked": self.locked,
            "transportErrors": self.transport_errors,
            "statuses": {str(s): c for s, c in sorted(self.statuses.items())},
        }


@dataclass
class _Client:
    """One simulated user: its identity, its tasks and its HTTP connection."""

    index: int
    tenant: str
    user: str
    task_nos: list[str]
    http: httpx.AsyncClient
    rng: random.Random
    creates: int = 0


async def _one(
    client: _Client, route: str, secret: str, run_id: str
) -> tuple[float, httpx.Response]:
    """Send one request of ``route``; returns (milliseconds, answer)."""
    from export_center.auth import issue_token

    if route == "create":
        client.creates += 1
        creator = f"load-{client.index:02d}-{client.creates:06d}"
        token = issue_token(
            secret,
            user=creator,
            tenant=client.tenant,
            permissions=[CREATE_PERMISSION],
            ttl_seconds=3600,
        )
        body = {
            "exportType": CREATE_TYPE,
            "format": "csv",
            "taskName": "load bench",
            "parameters": {"segment": client.rng.choice(SEGMENTS)},
            "requestId": f"{run_id}-{client.index}-{client.creates}",
        }
        started = time.perf_counter()
        response = await client.http.post(
            "/api/v1/exports", json=body, headers={"authorization": f"Bearer {token}"}
        )
    elif route == "detail":
        task_no = client.rng.choice(client.task_nos)
        started = time.perf_counter()
        response = await client.http.get(f"/api/v1/exports/{task_no}")
    else:
        started = time.perf_counter()
        response = await client.http.get("/api/v1/exports")
    return (time.perf_counter() - started) * 1000.0, response


async def drive(
    url: str,
    picked: list[tuple[str, str, list[str]]],
    secret: str,
    seconds: float,
    pause: float = 0.0,
) -> tuple[dict[str, RouteStats], float]:
    """Warm up, then run every client until ``seconds`` have passed, each waiting
    ``pause`` seconds after each answer (0: none, the clients keep the server busy).

    Returns:
        ``({route: stats}, measured seconds)``: from the start of the window to the
        last answer.
    """
    from export_center.auth import issue_token

    run_id = f"load-{secrets.token_hex(4)}"
    stats = {route: RouteStats() for route in ROUTES}
    clients = [
        _Client(
            index=i,
            tenant=tenant,
            user=user,
            task_nos=task_nos,
            http=httpx.AsyncClient(
                base_url=url,
                timeout=120,
                headers={
                    "authorization": "Bearer "
                    + issue_token(
                        secret,
                        user=user,
                        tenant=tenant,
                        permissions=[CREATE_PERMISSION],
                        ttl_seconds=3600,
                    )
                },
            ),
            rng=random.Random(1000 + i),
        )
        for i, (tenant, user, task_nos) in enumerate(picked)
    ]

    async def warm(client: _Client) -> None:
        for route in ROUTES:
            await _one(client, route, secret, run_id + "-warm")

    async def work(client: _Client, deadline: float) -> None:
        while time.perf_counter() < deadline:
            route = client.rng.choices(ROUTES, weights=MIX)[0]
            try:
                ms, response = await _one(client, route, secret, run_id)
            except httpx.HTTPError:
                stats[route].transport_errors += 1
                continue
            stats[route].add(ms, response)
            if pause:
                await asyncio.sleep(pause)

    try:
        await asyncio.gather(*(warm(c) for c in clients))
        started = time.perf_counter()
        await asyncio.gather(*(work(c, started + seconds) for c in clients))
        elapsed = time.perf_counter() - started
    finally:
        await asyncio.gather(*(c.http.aclose() for c in clients))
    return stats, elapsed
