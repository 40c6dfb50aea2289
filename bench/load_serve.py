"""The server of the load part: ``export-center serve`` as a subprocess, with one API
process or ``--workers N`` (the loops once, in the parent), its stop, and, with a
broker, the exports in a separate ``export-center worker`` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.e2e import ROOT

__all__ = ["children_of", "serve", "start_worker", "stop"]

TOPIC_PREFIX = "bench-"
"""Topic prefix of the broker's bench topics (``bench.cluster.broker_endpoint`` makes them)."""


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a read-only scan of ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def serve(
    data_dir: Path,
    database_url: str,
    secret: str,
    log: Path,
    *,
    sample_scale: float,
    api_workers: int = 1,
    broker: str | None = None,
) -> tuple[Any, str]:
    """Start ``export-center serve`` on a free loopback port, every loop on and the
    per-type active limit lifted; with ``api_workers`` > 1 as ``--workers N``; with a
    ``broker`` on the RocketMQ transport and without a consumer, the exports left to a
    worker (:func:`start_worker`). Returns (process, URL).

    Raises:
        RuntimeError: it stopped or did not answer ``/healthz`` within 120 s.
    """
    from export_center.embedded import free_port
    from export_center.healthz import NotHealthy, wait_healthy

    port = free_port()
    env = _env(data_dir, database_url, secret, sample_scale, broker)
    if broker is not None:
        env["EXPORT_CENTER_CONSUMER__ENABLED"] = "false"
    command = [sys.executable, "-m", "export_center.cli", "serve"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    if api_workers > 1:
        command += ["--workers", str(api_workers)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=120, alive=lambda: proc.poll() is None, interval=0.2)
    except NotHealthy as exc:
        if exc.stopped:
            raise RuntimeError(
                f"export-center serve stopped (exit {proc.returncode}); see {log}"
            ) from None
        stop(proc)
        raise RuntimeError(
            f"export-center serve did not answer on {url} within 120 s; see {log}"
        ) from None
    return proc, url


def start_worker(
    data_dir: Path,
    database_url: str,
    secret: str,
    log: Path,
    *,
    sample_scale: float,
    broker: str,
    api_url: str,
) -> Any:
    """Start ``export-center worker`` (consumer, no API) on the broker, calling the
    sample providers of the API at ``api_url``; returns the process."""
    from export_center.embedded import free_port

    env = _env(data_dir, database_url, secret, sample_scale, broker)
    env.update(
        {
            "EXPORT_CENTER_CONSUMER__ENABLED": "true",
            "EXPORT_CENTER_INSTANCE_ID": "bench-load-worker",
            "EXPORT_CENTER_API__PUBLIC_BASE_URL": api_url,
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
        }
    )
    command = [sys.executable, "-m", "export_center.cli", "worker"]
    command += ["--metrics-port", str(free_port())]
    with open(log, "wb") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _env(
    data_dir: Path, database_url: str, secret: str, sample_scale: float, broker: str | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            "EXPORT_CENTER_ENVIRONMENT": "embedded",
            "EXPORT_CENTER_DATA_DIR": str(data_dir),
            "EXPORT_CENTER_DATABASE_URL": database_url,
            "EXPORT_CENTER_SAMPLE_SCALE": str(sample_scale),
            "EXPORT_CENTER_API__JWT_SECRET": secret,
            "EXPORT_CENTER_INSTANCE_ID": "bench-load",
            "EXPORT_CENTER_LIMITS__MAX_ACTIVE_PER_TYPE": "1000000",
        }
    )
    if broker is not None:
        env.update(
            {
                "EXPORT_CENTER_TRANSPORT": "rocketmq",
                "EXPORT_CENTER_ROCKETMQ__ENDPOINT": broker,
                "EXPORT_CENTER_TOPIC_PREFIX": TOPIC_PREFIX,
            }
        )
    return env


def stop(proc: Any) -> None:
    """SIGINT (uvicorn's graceful stop; the parent of ``--workers`` stops its API
    processes), then SIGKILL after 60 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
