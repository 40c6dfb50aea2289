"""One end-to-end export in this process, measured: the worker of ``python -m bench``.

Does what ``export-center demo`` does, for ONE format, so that the peak RSS of this
process belongs to one export of one size:

1. ``--prepare``: generate and load the TPC-H sample of ``--scale`` (nothing else),
   so that the measured run below finds it loaded and its RSS is the export's;
2. otherwise: start the embedded stack (API, outbox publisher, consumer, sample
   provider) on loopback, create one ORDERS export over HTTP, poll it until it ends,
   download the file through its signed link, and write a JSON result.

The process is the worker: API, publisher and consumer run here, the sample providers
in the child process the embedded default starts (``export_center.sample_process``).
Result keys: ``format``, ``rows``, ``seconds`` (create -> file
downloaded), ``taskSeconds`` (create -> succeeded seen), ``rowsPerSecond``,
``cpuSeconds`` (this process, all threads), ``threadCpuSeconds`` (by thread name),
``rssStartMb`` (after start-up), ``peakRssMb`` (``VmHWM``), ``bytes``, ``database``,
``scale``, ``storage``, and for the sample providers' child process (the embedded
default; ``--in-process-providers`` keeps them here) ``providerProcess``,
``providerCpuSeconds`` and ``providerPeakRssMb``; ``queueSeconds`` and ``runSeconds``
from the task's timestamps; with ``--inspect-xlsx``: ``sheets`` and
``sheetHeadersOk``; with ``--options JSON`` the create body's ``options`` (issue 23:
CSV options, compression, split); with ``--inspect-split``: the split download's
figures of :func:`bench.split_check.inspect_split` (parts, rows, hashes against the API
manifest).

Storage: the local directory under ``--data-dir`` (the embedded default), or with
``--s3-endpoint URL --s3-bucket NAME`` an S3-compatible bucket (path-style, keys from
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``); the download then follows the
redirect to a presigned GET of the bucket. The stored file is deleted after the run
either way.

Usage::

    python -m bench.e2e_run --data-dir DIR --scale 0.27 [--database-url URL]
                            [--s3-endpoint URL --s3-bucket NAME]
                            [--max-rows N] [--inspect-xlsx] [--load-lock NAME]
                            [--options JSON] [--inspect-split]
                            (--prepare | --format csv|xlsx|jsonl|parquet) [--json FILE]

``--max-rows`` raises the ORDERS ``max_rows`` of the running registry for this run
only (the bench's ``big`` part: the registry file allows at most 5,000,000 rows, the
product's limit); ``--inspect-xlsx`` adds the sheet check of ``bench.big``;
``--load-lock`` gives a ``--prepare`` on MariaDB its own advisory lock name.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.procs import status_mb

TERMINAL = ("succeeded", "failed", "cancelled", "expired", "rejected")
WHOLE_RANGE = {"from": "1992-01-01", "to": "1998-12-31"}
"""Every TPC-H order date: with these the ORDERS export runs as day shards."""


def _settings(
    data_dir: Path,
    scale: float,
    database_url: str | None,
    s3: tuple[str, str] | None = None,
    provider_process: bool = True,
    shard_parallel: int | None = None,
) -> Any:
    """The embedded settings of one run; ``s3`` is (endpoint URL, bucket) or None for
    the local directory; ``provider_process``: the sample providers in their child
    process (the default), else in this process."""
    from export_center.settings import Settings

    data = Settings().model_dump()  # the environment's settings, like the demo
    data.update(
        {
            "data_dir": data_dir,
            "database_url": database_url,
            "sample_scale": scale,
            "mount_sample_providers": True,
            "load_sample_data": True,
            "sample_providers_process": provider_process,
            "environment": "embedded",
        }
    )
    if shard_parallel is not None:
        data["task"] = {**data["task"], "shard_parallel_cap": shard_parallel}
    if s3 is not None:
        endpoint, bucket = s3
        data["storage"] = {
            "backend": "s3",
            "s3": {
                **data["storage"]["s3"],
                "endpoint_url": endpoint,
                "bucket": bucket,
                "region": data["storage"]["s3"].get("region") or "us-east-1",
                "path_style": True,
            },
        }
    return Settings.model_validate(data)


def _clean_storage(settings: Any) -> None:
    """Delete the files this run stored (local directory or bucket)."""
    from export_center.runtime import open_storage

    if settings.storage.backend == "local":
        shutil.rmtree(settings.files_dir, ignore_errors=True)
        return
    storage = open_storage(settings)
    for key in {obj.key for obj in storage.list()}:
        storage.delete(key)


def _poll_pause(detail: dict[str, Any], elapsed: float) -> float:
    """Seconds until the next status poll: half the remaining time the progress
    suggests, within 0.05..1 s. The polls run in the measured process, so a poll
    every 0.1 s (80 polls of 405,000 rows) would cost the export itself CPU time; a
    person in the download center polls every few seconds."""
    processed, total = detail.get("processed") or 0, detail.get("total") or 0
    if not processed or not total or elapsed <= 0:
        return 0.05  # not started yet: no rate to go by
    remaining = max(total - processed, 0) / (processed / elapsed)
    return min(1.0, max(0.05, remaining / 2))


def _rss_now_mb() -> float:
    return status_mb("VmRSS") or 0.0


def _peak_rss_mb() -> float:
    """Peak RSS of this process: ``VmHWM`` (``ru_maxrss`` survives ``execve`` and
    would report the parent's peak when that was larger)."""
    peak = status_mb("VmHWM")
    if peak is not None:
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of every thread of this process, by native id."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as fh:
                fields = fh.read().rpartition(")")[2].split()
            out[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, ValueError, IndexError):
            continue
    return out


class _ThreadCpu:
    """Samples per-thread CPU while an export runs; totals by thread name."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, float]] = {}
        self.start = _thread_cpu()

    def sample(self) -> None:
        import threading

        names = {t.native_id: t.name for t in threading.enumerate()}
        for tid, cpu in _thread_cpu().items():
            name = names.get(tid) or self.seen.get(tid, ("?", 0.0))[0]
            self.seen[tid] = (name, cpu - self.start.get(tid, 0.0))

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, cpu in self.seen.values():
            key = name.rstrip("0123456789_").rstrip("-_") or name
            out[key] = round(out.get(key, 0.0) + cpu, 2)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _task_times(detail: dict[str, Any]) -> dict[str, float | None]:
    """``queueSeconds`` (requested -> started: outbox, transport, claim) and
    ``runSeconds`` (started -> finished: the attempt, file stored), from the task's
    own timestamps (the database clock)."""
    from datetime import datetime

    def at(key: str) -> datetime | None:
        value = detail.get(key)
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None

    requested, started, finished = at("requestedAt"), at("startedAt"), at("finishedAt")
    return {
        "queueSeconds": round((started - requested).total_seconds(), 3)
        if started and requested
        else None,
        "runSeconds": round((finished - started).total_seconds(), 3)
        if finished and started
        else None,
    }


def _children() -> list[int]:
    """Process ids of this process's children (``/proc/self/task/*/children``)."""
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as fh:
                found += [int(p) for p in fh.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _process_figures(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of process ``pid`` so far, from ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rpartition(")")[2].split()
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            peak = next(
                (int(line.split()[1]) / 1024.0 for line in fh if line.startswith("VmHWM:")), 0.0
            )
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0
    return cpu, peak


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def prepare(
    data_dir: Path, scale: float, database_url: str | None, load_lock: str | None = None
) -> dict[str, Any]:
    """Generate and load the sample (once), run the migrations; no export.

    Args:
        load_lock: MariaDB only: the name of the advisory lock held while loading,
            instead of ``providers.tpch.LOCK_NAME``, which is one name for the whole
            server: a load of millions of orders holds it for minutes, and everybody
            else's first load on that server (the tests') would wait for it.

    Returns:
        ``orders`` (count), ``seconds`` (the whole step) and ``steps``: the loader's
        progress lines as ``[seconds since the start, line]``, whose times split
        generation and loading.
    """
    from export_center.db import make_engine
    from export_center.runtime import upgrade_database
    from providers import tpch

    if load_lock:
        tpch.LOCK_NAME = load_lock
    settings = _settings(data_dir, scale, database_url)
    data_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    steps: list[list[Any]] = []

    def progress(line: str) -> None:
        steps.append([round(time.perf_counter() - started, 1), line])
        print(line, file=sys.stderr)

    engine = make_engine(settings.resolved_database_url)
    upgrade_database(engine)
    engine.dispose()
    sample = make_engine(settings.resolved_sample_database_url, immediate=False)
    orders = tpch.ensure_loaded(sample, scale, data_dir, progress=progress)
    sample.dispose()
    return {"orders": orders, "seconds": round(time.perf_counter() - started, 3), "steps": steps}


def _raise_max_rows(app: Any, code: str, max_rows: int) -> None:
    """Give the export type ``code`` of the running app ``max_rows`` (the bench's big
    part: the registry file refuses more than 5,000,000). The registry is swapped the
    way a reload swaps it; ``max_rows`` is read at each execution."""
    import dataclasses

    from export_center.registry import Registry

    registry = app.state.runtime.registry
    etype = registry.get(code)
    if etype is None:
        raise RuntimeError(f"no export type {code} in {registry.source}")
    types = {**registry.types, code: dataclasses.replace(etype, max_rows=max_rows)}
    registry.replace(Registry(types=types, source=registry.source))


def _create_with_options(
    client: httpx.Client,
    fmt: str,
    parameters: dict[str, str] | None,
    options: dict[str, Any],
) -> str:
    """Ask for all ORDERS as ``fmt`` with the create body's ``options`` (the body of
    ``embedded.request_orders_export`` plus ``options``); returns the task id.

    Raises:
        RuntimeError: the API did not accept the export (its status and body).
    """
    answer = client.post(
        "/api/v1/exports",
        json={
            "exportType": "ORDERS",
            "format": fmt,
            "taskName": "bench orders",
            "parameters": parameters or {},
            "options": options,
            "requestId": f"bench-{fmt}-{os.getpid()}-{time.time_ns()}",
        },
    )
    if answer.status_code >= 300:
        raise RuntimeError(f"create {fmt}: HTTP {answer.status_code}: {answer.text}")
    return str(answer.json()["taskId"])


def run_export(
    data_dir: Path,
    scale: float,
    database_url: str | None,
    fmt: str,
    switch_interval: float | None = None,
    s3: tuple[str, str] | None = None,
    provider_process: bool = True,
    whole_range: bool = False,
    shard_parallel: int | None = None,
    max_rows: int | None = None,
    inspect_xlsx: bool = False,
    options: dict[str, Any] | None = None,
    inspect_split: bool = False,
) -> dict[str, Any]:
    """Start the embedded stack, export all orders as ``fmt``, download, measure.

    Args:
        s3: (endpoint URL, bucket) to store into S3, or None for the local directory.
        provider_process: the sample providers in their child process (the embedded
            default); False: in this process, as before they had one.
        whole_range: ask for every order date (:data:`WHOLE_RANGE`): the ORDERS type
            then runs as its day shards (16), in date order; without it the export
            has no dates and runs as one shard in key order.
        shard_parallel: shards at once (``task.shard_parallel_cap``); None: the
            setting's default (4).
        max_rows: the ORDERS ``max_rows`` for this run, or None for the registry's.
        inspect_xlsx: check the downloaded XLSX's sheets after the measurement
            (:func:`bench.big.inspect_xlsx`; adds ``sheets`` and
            ``sheetHeadersOk`` to the result).
        options: the create body's ``options`` (None: none sent, the defaults).
        inspect_split: after the measurement, read the API manifest and check the
            downloaded ZIP's parts against it (:func:`bench.split_check.inspect_split`;
            adds its figures under ``split``).
    """
    from export_center.auth import issue_token
    from export_center.embedded import ServerThread, build_app, free_port, request_orders_export
    from export_center.logs import configure_logging

    settings = _settings(data_dir, scale, database_url, s3, provider_process, shard_parallel)
    if switch_interval is not None:
        sys.setswitchinterval(switch_interval)
    configure_logging("WARNING", file=data_dir / "logs" / "bench.log")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = build_app(settings, self_url=url)
    server = ServerThread(app, "127.0.0.1", port)
    server.start()
    target = data_dir / f"bench-{os.getpid()}.{fmt}"
    manifest: dict[str, Any] | None = None
    try:
        if max_rows is not None:
            _raise_max_rows(app, "ORDERS", max_rows)
        bearer = issue_token(
            settings.jwt_secret,
            user="bench",
            tenant="bench",
            permissions=["export:orders:create"],
            ttl_seconds=3600,
        )
        with httpx.Client(
            base_url=url,
            headers={"authorization": f"Bearer {bearer}"},
            timeout=120,
            follow_redirects=True,
        ) as client:
            rss_start = _rss_now_mb()
            threads = _ThreadCpu()
            children = _children()
            child_start = sum(_process_figures(pid)[0] for pid in children)
            cpu_start = _cpu_seconds()
            started = time.perf_counter()
            parameters = WHOLE_RANGE if whole_range else None
            if options is None:
                task_id = request_orders_export(
                    client, fmt, name="bench orders", key_prefix="bench", parameters=parameters
                )
            else:
                task_id = _create_with_options(client, fmt, parameters, options)
            while True:
                detail = client.get(f"/api/v1/exports/{task_id}").json()
                threads.sample()
                if detail["state"] in TERMINAL:
                    break
                time.sleep(_poll_pause(detail, time.perf_counter() - started))
            task_seconds = time.perf_counter() - started
            if detail["state"] != "succeeded":
                raise RuntimeError(f"{fmt} export ended {detail['state']}: {detail['error']}")
            with client.stream("GET", detail["downloadUrl"]) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"download {fmt}: HTTP {response.status_code}")
                with open(target, "wb") as fh:
                    for chunk in response.iter_bytes(1 << 20):
                        fh.write(chunk)
            seconds = time.perf_counter() - started
            cpu = _cpu_seconds() - cpu_start
            child = [_process_figures(pid) for pid in children]
            if inspect_split:
                manifest = client.get(f"/api/v1/exports/{task_id}/manifest").json()
    finally:
        server.stop()
    rows = int(detail["processed"])
    size = target.stat().st_size
    peak_rss = _peak_rss_mb()  # before the inspection below, which is not the export's
    checked: dict[str, Any] = {}
    try:
        if inspect_xlsx and fmt == "xlsx":
            from bench import big

            checked = big.inspect_xlsx(target, big.ORDERS_TITLES)
        if manifest is not None:
            from bench.split_check import inspect_split as check_split

            checked = {"split": check_split(target, manifest)}
    finally:
        target.unlink(missing_ok=True)
        _clean_storage(settings)
    return {
        "format": fmt,
        "rows": rows,
        "seconds": round(seconds, 3),
        "taskSeconds": round(task_seconds, 3),
        "rowsPerSecond": round(rows / seconds, 1),
        "cpuSeconds": round(cpu, 3),
        "rssStartMb": round(rss_start, 1),
        "peakRssMb": round(peak_rss, 1),
        "bytes": size,
        "database": settings.resolved_database_url.split("://")[0],
        "switchInterval": sys.getswitchinterval(),
        "threadCpuSeconds": threads.totals(),
        "shards": detail.get("shardsTotal"),
        **_task_times(detail),
        "providerProcess": bool(children),
        "providerCpuSeconds": round(sum(c for c, _ in child) - child_start, 3),
        "providerPeakRssMb": round(max((p for _, p in child), default=0.0), 1),
        "scale": scale,
        "storage": settings.storage.backend,
        **checked,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.e2e_run", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--scale", type=float, required=True)
    parser.add_argument("--database-url", default=None)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--prepare", action="store_true", help="only generate and load the sample")
    group.add_argument("--format", choices=["csv", "xlsx", "jsonl", "parquet"])
    parser.add_argument(
        "--json", type=Path, default=None, help="write the result here (default: stdout)"
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=None,
        help="sys.setswitchinterval() for this run (experiment; default: Python's 0.005)",
    )
    parser.add_argument(
        "--in-process-providers",
        action="store_true",
        help="serve the sample providers in this process (A/B against the child process)",
    )
    parser.add_argument(
        "--whole-range", action="store_true", help="ask for every order date (day shards)"
    )
    parser.add_argument("--shard-parallel", type=int, default=None, help="shards at once")
    parser.add_argument("--s3-endpoint", default=None, help="store into S3 at this URL")
    parser.add_argument("--s3-bucket", default=None, help="the bucket (with --s3-endpoint)")
    parser.add_argument(
        "--max-rows",
        type=int,
        default=None,
        help="ORDERS max_rows for this run (the registry file allows at most 5,000,000)",
    )
    parser.add_argument(
        "--inspect-xlsx",
        action="store_true",
        help="count the downloaded XLSX's sheets and check each one's header row",
    )
    parser.add_argument(
        "--load-lock",
        default=None,
        help="with --prepare on MariaDB: a private name for the load's advisory lock",
    )
    parser.add_argument(
        "--options",
        type=json.loads,
        default=None,
        help='the create body\'s options as JSON, e.g. \'{"split": {"maxRowsPerFile": 100000}}\'',
    )
    parser.add_argument(
        "--inspect-split",
        action="store_true",
        help="check the downloaded ZIP's parts against the API manifest (after measuring)",
    )
    args = parser.parse_args(argv)
    if bool(args.s3_endpoint) != bool(args.s3_bucket):
        parser.error("--s3-endpoint and --s3-bucket go together")
    s3 = (args.s3_endpoint, args.s3_bucket) if args.s3_endpoint else None
    if args.prepare:
        result = prepare(args.data_dir, args.scale, args.database_url, args.load_lock)
    else:
        result = run_export(
            args.data_dir,
            args.scale,
            args.database_url,
            args.format,
            args.switch_interval,
            s3,
            provider_process=not args.in_process_providers,
            whole_range=args.whole_range,
            shard_parallel=args.shard_parallel,
            max_rows=args.max_rows,
            inspect_xlsx=args.inspect_xlsx,
            options=args.options,
            inspect_split=args.inspect_split,
        )
    text = json.dumps(result, indent=2) + "\n"
    if args.json:
        args.json.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
