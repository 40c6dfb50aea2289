"""End-to-end and scaling runs: each export in its own ``bench.e2e_run`` subprocess.

The subprocess is the worker (API, publisher, consumer and the ORDERS provider in one
process, the embedded default), so its peak RSS belongs to that one export. Before the
measured runs of a database and scale, a ``--prepare`` subprocess generates and loads
the TPC-H sample once (kept under the bench data directory, reused later).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

__all__ = [
    "ROOT",
    "e2e_subprocess",
    "fastest",
    "load_sample",
    "mariadb_url",
    "prepare_sample",
    "run_e2e",
    "run_matrix",
    "server_database_url",
]

ROOT = Path(__file__).resolve().parents[1]
BENCH_DATABASE = "export_center_bench"
"""Database created on the MariaDB test server when its URL comes from scripts/mariadb.sh."""


def mariadb_url() -> tuple[str | None, str]:
    """The MariaDB URL to use and where it came from (or None and why not).

    ``EXPORT_CENTER_BENCH_MARIADB_URL`` is used as given (its ``orders`` and ``customer``
    tables are replaced by the TPC-H sample, as ``export-center demo`` does). Otherwise,
    when ``scripts/mariadb.sh status`` finds the private test server running, the
    database ``export_center_bench`` is created on it (:func:`server_database_url`).
    """
    url = os.environ.get("EXPORT_CENTER_BENCH_MARIADB_URL")
    if url:
        return url, "EXPORT_CENTER_BENCH_MARIADB_URL"
    return server_database_url(BENCH_DATABASE)


def server_database_url(database: str) -> tuple[str | None, str]:
    """The URL of ``database`` on the ``scripts/mariadb.sh`` test server, created when
    missing (or None and why not).

    The server is the one ``scripts/mariadb.sh status`` finds running; the URL is the
    script's ``url`` (the test database's) with the database name replaced.

    Args:
        database: a database name of the bench's own (never the tests').

    Returns:
        ``(url, source)``, or ``(None, reason)`` when there is no usable server.
    """
    script = ROOT / "scripts" / "mariadb.sh"
    if not script.exists():
        return None, "no EXPORT_CENTER_BENCH_MARIADB_URL and no scripts/mariadb.sh"
    try:
        status = subprocess.run(
            ["bash", str(script), "status"], capture_output=True, text=True, timeout=30
        )
        if status.returncode != 0:
            return (
                None,
                "no EXPORT_CENTER_BENCH_MARIADB_URL and the scripts/mariadb.sh server "
                "is not running",
            )
        base = subprocess.run(
            ["bash", str(script), "url"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
        admin = create_engine(make_url(base))
        with admin.begin() as conn:
            conn.execute(text(f"CREATE DATABASE IF NOT EXISTS `{database}` CHARACTER SET utf8mb4"))
        admin.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means: skip MariaDB with a note
        return None, f"MariaDB test server unusable: {type(exc).__name__}: {exc}"
    url = make_url(base).set(database=database).render_as_string(hide_password=False)
    return url, f"scripts/mariadb.sh (database {database})"


def e2e_subprocess(
    args: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
    module: str = "bench.e2e_run",
) -> dict[str, Any]:
    """Run ``python -m bench.e2e_run ARGS`` and return its JSON result.

    Args:
        args: the arguments of ``bench.e2e_run`` (without ``--json``).
        timeout: seconds before the run is killed.
        env: variables added to this process's environment.
        module: another module taking ``--json FILE`` the same way
            (``bench.peers_run``).

    Raises:
        RuntimeError: the run failed (the last lines of its output).
    """
    with tempfile.NamedTemporaryFile(prefix="ec-bench-", suffix=".json", delete=False) as tmp:
        result_path = Path(tmp.name)
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-m", module, *args, "--json", str(result_path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise RuntimeError(f"{module} {' '.join(args)} failed: " + " | ".join(tail))
        data: dict[str, Any] = json.loads(result_path.read_text())
        return data
    finally:
        result_path.unlink(missing_ok=True)


def fastest(done: list[dict[str, Any]], key: str = "seconds") -> dict[str, Any]:
    """The run of ``done`` with the least ``key``, with ``runs`` (every run's ``key``)
    added: what ``--repeat`` keeps (other work on the machine slows single runs)."""
    best = min(done, key=lambda r: r[key])
    best["runs"] = [r[key] for r in done]
    return best


def prepare_sample(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scale: float,
    say: Callable[[str], None] = print,
) -> list[str]:
    """Generate and load the TPC-H sample of ``scale`` once (a ``--prepare`` run).

    Returns:
        The ``bench.e2e_run`` arguments that name this sample (data directory, scale,
        database URL), for the measured runs.
    """
    common, _prepared = load_sample(
        data_dir=data_dir, database=database, database_url=database_url, scale=scale, say=say
    )
    return common


def load_sample(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scale: float,
    timeout: float = 3600,
    prepare_args: Sequence[str] = (),
    say: Callable[[str], None] = print,
) -> tuple[list[str], dict[str, Any]]:
    """:func:`prepare_sample`, also returning what the ``--prepare`` run reported.

    Args:
        data_dir: the bench data directory; the sample lives in its sub-directory
            ``<database>-sf<scale>`` (the CSV files under ``tpch-sf<scale>`` there, and
            the SQLite file when ``database_url`` is None).
        timeout: seconds before the ``--prepare`` run is killed.
        prepare_args: more ``bench.e2e_run`` arguments for the ``--prepare`` run only.

    Returns:
        ``(arguments, prepared)``: the arguments as :func:`prepare_sample` returns
        them, and the ``--prepare`` result (``orders``, ``seconds``, ``steps``).
    """
    common = ["--data-dir", str(data_dir / f"{database}-sf{scale}"), "--scale", str(scale)]
    if database_url:
        common += ["--database-url", database_url]
    prepared = e2e_subprocess([*common, "--prepare", *prepare_args], timeout=timeout)
    say(f"  {database} sf{scale}: {prepared['orders']:,} orders ready")
    return common, prepared


def run_e2e(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scale: float,
    formats: tuple[str, ...] = ("csv", "xlsx"),
    repeat: int = 1,
    say: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    """Prepare the sample of ``scale`` once, then export it in each format.

    Args:
        data_dir: the bench data directory (one sub-directory per database and scale).
        database: ``sqlite`` or ``mariadb`` (a label; the URL decides).
        database_url: None for the embedded SQLite file of that sub-directory.
        scale: TPC-H scale factor (0.27: 405,000 orders).
        repeat: runs per format; the fastest one is kept (others share the machine).

    Returns:
        ``{format: result}`` with the keys of ``bench.e2e_run`` plus ``loadAverage``
        (1-minute load before the run) and ``runs`` (seconds of every run).
    """
    return run_matrix(
        data_dir=data_dir,
        database=database,
        database_url=database_url,
        scales=[scale],
        formats=formats,
        repeat=repeat,
        say=say,
    )[scale]


def run_matrix(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scales: list[float],
    formats: tuple[str, ...] = ("csv", "xlsx"),
    repeat: int = 1,
    say: Callable[[str], None] = print,
) -> dict[float, dict[str, dict[str, Any]]]:
    """Export every (scale, format) ``repeat`` times, interleaved, keeping the fastest.

    The runs go round by round (each round: every scale, every format), so a busy
    minute on the shared machine slows one run of each kind rather than all the runs
    of one kind: the ratios between sizes and formats stay comparable.

    Returns:
        ``{scale: {format: result}}``, results as :func:`run_e2e` gives them.
    """
    commons = {
        scale: prepare_sample(
            data_dir=data_dir, database=database, database_url=database_url, scale=scale, say=say
        )
        for scale in scales
    }
    runs: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for _ in range(max(1, repeat)):
        for scale in scales:
            for fmt in formats:
                load = os.getloadavg()[0]
                result = e2e_subprocess([*commons[scale], "--format", fmt], timeout=3600)
                result["loadAverage"] = round(load, 2)
                runs.setdefault((scale, fmt), []).append(result)
                say(
                    f"  {database} sf{scale} {fmt:4s} {result['rows']:>9,} rows "
                    f"{result['seconds']:7.2f} s {result['rowsPerSecond']:>9,.0f} rows/s  "
                    f"peak RSS {result['peakRssMb']:.0f} MB  (load {load:.2f})"
                )
    out: dict[float, dict[str, dict[str, Any]]] = {}
    for (scale, fmt), done in runs.items():
        out.setdefault(scale, {})[fmt] = fastest(done)
    return out
