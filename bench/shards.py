"""Shards against a slow provider: 4 shards at once vs 1, same export, same run.

A provider whose every page takes 100 ms (``SLOW_PAGE_SECONDS``; a sleep standing for a
heavy query) serves ``DAYS`` days of ``ROWS_PER_DAY`` synthetic rows in pages of
``PAGE_ROWS``, as the sharded type ``SLOW_DAYS`` (``shards: {by: day}``). The embedded
export center (SQLite, local files) exports all days as CSV twice: with
``EXPORT_CENTER_TASK__SHARD_PARALLEL_CAP`` 1, then 4. Reported: seconds of each, the
speed-up, and whether the two files are byte-identical.

Usage::

    python -m bench.shards [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

SLOW_PAGE_SECONDS = 0.1
DAYS = 8
ROWS_PER_DAY = 2_500
PAGE_ROWS = 250
TOKEN = "bench-slow-provider-token"
REGISTRY = """
SLOW_DAYS:
  title: Slow days
  provider_url: {url}
  provider_path: /internal/exports/v1/SLOW_DAYS/batches
  required_permission: export:bench:create
  app_scope: PLATFORM
  batch_size: {page}
  max_attempts: 1
  parameters:
    - {{name: from, type: date}}
    - {{name: to, type: date}}
  date_range: [from, to]
  shards: {{by: day, max_shards: 64, parallel: 4}}
"""


def _provider() -> Any:
    """The slow provider: ``SLOW_DAYS`` rows of the request's shard day, keyset by id."""
    from fastapi import FastAPI

    from providers.sdk import BatchRequest, Column, ExportProvider, Page

    provider = ExportProvider(
        "SLOW_DAYS",
        [
            Column("id", "Id", "INTEGER"),
            Column("day", "Day", "DATE"),
            Column("amount", "Amount", "DECIMAL"),
            Column("note", "Note", "STRING"),
        ],
        token=TOKEN,
        secret="bench-secret",
    )

    @provider.fetcher
    def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
        time.sleep(SLOW_PAGE_SECONDS)
        day = dt.date.fromisoformat(req.parameters["from"])
        base = (day - dt.date(2024, 1, 1)).days * ROWS_PER_DAY
        after = int(cursor) if cursor is not None else 0
        ids = range(after + 1, min(after + req.limit, ROWS_PER_DAY) + 1)
        rows = [
            {
                "id": base + i,
                "day": day,
                "amount": f"{(base + i) % 100000 / 100:.2f}",
                "note": f"row {i} of {day.isoformat()}",
            }
            for i in ids
        ]
        last = ids[-1] if len(ids) else after
        return Page(
            rows=rows,
            next_cursor=last,
            has_more=last < ROWS_PER_DAY,
            snapshot={"day": day.isoformat()},
            total_rows=ROWS_PER_DAY if cursor is None else None,
        )

    app = FastAPI()
    app.add_api_route("/healthz", lambda: {"status": "ok"})
    app.include_router(provider.router())
    return app


def run_shards() -> dict[str, Any]:
    """Export the slow type with 1 and then 4 shards at once; return the figures."""
    from export_center.auth import issue_token
    from export_center.embedded import ServerThread, build_app, free_port
    from export_center.logs import configure_logging
    from export_center.settings import Settings

    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
        data_dir = Path(tmp)
        configure_logging("WARNING", file=data_dir / "logs" / "bench.log")
        provider = ServerThread(_provider(), "127.0.0.1", free_port())
        provider.start()
        registry = data_dir / "types.yaml"
        registry.write_text(REGISTRY.format(url=provider.url, page=PAGE_ROWS))
        settings = Settings.model_validate(
            {
                **Settings().model_dump(),
                "data_dir": data_dir,
                "database_url": None,
                "environment": "embedded",
                "mount_sample_providers": False,
                "load_sample_data": False,
                "export_types_file": str(registry),
                "provider_allowed_hosts": ["127.0.0.1"],
                "provider": {**Settings().provider.model_dump(), "internal_token": TOKEN},
            }
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        app = build_app(settings, self_url=url)
        server = ServerThread(app, "127.0.0.1", port)
        server.start()
        bearer = issue_token(
            settings.jwt_secret,
            user="bench",
            tenant="bench",
            permissions=["export:bench:create"],
            ttl_seconds=3600,
        )
        last = dt.date(2024, 1, 1) + dt.timedelta(days=DAYS - 1)
        runs: dict[str, Any] = {}
        files: list[bytes] = []
        try:
            with httpx.Client(
                base_url=url, headers={"authorization": f"Bearer {bearer}"}, timeout=120
            ) as client:
                for parallel in (1, 4):
                    app.state.runtime.settings.task.shard_parallel_cap = parallel
                    started = time.perf_counter()
                    answer = client.post(
                        "/api/v1/exports",
                        json={
                            "exportType": "SLOW_DAYS",
                            "format": "csv",
                            "taskName": f"slow days x{parallel}",
                            "parameters": {"from": "2024-01-01", "to": last.isoformat()},
                        },
                    )
                    answer.raise_for_status()
                    task_id = answer.json()["taskId"]
                    while True:
                        detail = client.get(f"/api/v1/exports/{task_id}").json()
                        if detail["state"] in ("succeeded", "failed", "cancelled"):
                            break
                        time.sleep(0.05)
                    seconds = time.perf_counter() - started
                    if detail["state"] != "succeeded":
                        raise RuntimeError(f"x{parallel}: {detail['state']} {detail['error']}")
                    download = client.get(detail["downloadUrl"], follow_redirects=True)
                    files.append(download.content)
                    runs[f"x{parallel}"] = {
                        "seconds": round(seconds, 3),
                        "rows": detail["processed"],
                        "shards": detail["shardsTotal"],
                    }
        finally:
            server.stop()
            provider.stop()
    pages = DAYS * -(-ROWS_PER_DAY // PAGE_ROWS)
    return {
        "pageSeconds": SLOW_PAGE_SECONDS,
        "pages": pages,
        "runs": runs,
        "speedup": round(runs["x1"]["seconds"] / runs["x4"]["seconds"], 2),
        "identical": files[0] == files[1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shards", description=__doc__)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run_shards()
    x1, x4 = result["runs"]["x1"], result["runs"]["x4"]
    print(
        f"{result['pages']} pages of {PAGE_ROWS} rows, {SLOW_PAGE_SECONDS * 1000:.0f} ms each, "
        f"{x1['shards']} day shards: 1 at once {x1['seconds']:.2f} s, 4 at once "
        f"{x4['seconds']:.2f} s, speed-up {result['speedup']:.2f}x (goal >= 3x), "
        f"files identical: {result['identical']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def run_shards_database(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scale: float,
    repeat: int = 1,
    say: Any = print,
) -> dict[str, Any]:
    """The ORDERS sample over every order date (its 16 day shards) as CSV, with 1 and
    then 4 shards at once, ``repeat`` rounds interleaved, the fastest run of each kept.

    The sample providers run in their child process and the SQL in the database's own
    process (MariaDB), so shards at once overlap the provider's reads with the worker's
    writing. Returns ``{x1, x4}`` (``bench.e2e_run`` results, ``runs`` the seconds of
    every run) and ``ratio`` = x4 seconds / x1 seconds (below 1: 4 at once is faster).
    """
    from bench.e2e import e2e_subprocess, fastest, prepare_sample

    common = prepare_sample(
        data_dir=data_dir, database=database, database_url=database_url, scale=scale, say=say
    )
    runs: dict[str, list[dict[str, Any]]] = {"x1": [], "x4": []}
    for _ in range(max(1, repeat)):
        for key, parallel in (("x1", 1), ("x4", 4)):
            result = e2e_subprocess(
                [*common, "--format", "csv", "--whole-range", "--shard-parallel", str(parallel)],
                timeout=3600,
            )
            runs[key].append(result)
            say(
                f"  {database} {result['shards']} shards, {parallel} at once:"
                f" {result['seconds']:.2f} s, worker CPU {result['cpuSeconds']:.2f} s,"
                f" provider CPU {result['providerCpuSeconds']:.2f} s"
            )
    out: dict[str, Any] = {}
    for key, done in runs.items():
        out[key] = fastest(done)
    out["ratio"] = round(out["x4"]["seconds"] / out["x1"]["seconds"], 3)
    return out
