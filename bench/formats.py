"""Format benchmark: ORDERS rows through the CSV, JSON Lines and Parquet writers.

The rows are ``bench.writers``' ORDERS rows (TPC-H-like, 12 columns), converted as the
pipeline converts them (``BatchConverter.columns_of``) before timing, in batches of
5,000; each writer gets them through ``write_columns`` into a file in a temporary
directory (the in-process writer only: no provider, no database, no storage).

Each format runs in a child process of its own, so its peak RSS is its own: the child
prepares the rows, resets its peak (``/proc/self/clear_refs``), writes, and reports
wall seconds, CPU seconds, rows/s, file bytes and the peak RSS growth over the RSS
before writing (``VmHWM - VmRSS``). CSV is the baseline of the same run: the ratios
are time and RSS growth against it. Goals (issue 23): JSON Lines and Parquet within
1.5x CSV's time, their RSS growth within 50 MB of CSV's. Printed figures, never an
assertion.

Usage::

    python -m bench.formats [ROWS]        # default 405,000
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["FORMATS", "run_formats"]

FORMATS = ("csv", "jsonl", "parquet")
"""The formats measured, CSV (the baseline) first."""

_ROOT = Path(__file__).resolve().parents[1]


def _status_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def _child(fmt: str, rows: int) -> dict[str, Any]:
    """Write ``rows`` ORDERS rows as ``fmt`` in this process; the figures as a dict."""
    from bench.writers import ORDERS_COLUMNS, make_column_batches
    from export_center.writers import open_writer

    batches = make_column_batches(rows)
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")  # reset VmHWM to the current RSS
        reset = True
    except OSError:
        reset = False
    before = _status_mb("VmRSS")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"orders.{fmt}")
        wall, cpu = time.perf_counter(), time.process_time()
        with open(path, "wb") as out:
            writer = open_writer(fmt, out, ORDERS_COLUMNS, time_zone="Asia/Shanghai")
            for columns in batches:
                writer.write_columns(columns)
            stats = writer.close()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        size = os.path.getsize(path)
    return {
        "rows": stats.rows,
        "seconds": round(wall, 3),
        "cpuSeconds": round(cpu, 3),
        "rowsPerSecond": round(rows / wall),
        "bytes": size,
        "rssBeforeMb": round(before, 1),
        "peakRssGrowthMb": round(_status_mb("VmHWM") - before, 1) if reset else None,
    }


def run_formats(rows: int = 405_000) -> dict[str, Any]:
    """Run every format in a child process; add the ratios to CSV.

    Returns:
        ``{"rows": N, "loadAverage": 1-min load, "formats": {fmt: figures}}``; each
        figure set has ``seconds``, ``cpuSeconds``, ``rowsPerSecond``, ``bytes``,
        ``peakRssGrowthMb`` and, but for CSV, ``timeRatioToCsv`` and
        ``rssGrowthOverCsvMb``.
    """
    results: dict[str, Any] = {}
    env = dict(os.environ, PYTHONPATH=str(_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for fmt in FORMATS:
        done = subprocess.run(
            [sys.executable, "-m", "bench.formats", "--child", fmt, str(rows)],
            capture_output=True,
            text=True,
            check=True,
            cwd=_ROOT,
            env=env,
        )
        results[fmt] = json.loads(done.stdout.strip().splitlines()[-1])
    base = results["csv"]
    for fmt in FORMATS[1:]:
        r = results[fmt]
        r["timeRatioToCsv"] = round(r["seconds"] / base["seconds"], 2)
        if r["peakRssGrowthMb"] is not None and base["peakRssGrowthMb"] is not None:
            r["rssGrowthOverCsvMb"] = round(r["peakRssGrowthMb"] - base["peakRssGrowthMb"], 1)
    return {"rows": rows, "loadAverage": os.getloadavg()[0], "formats": results}


def main() -> None:
    """Print the figures (``--child FMT ROWS`` is the child's entry)."""
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], int(sys.argv[3]))))
        return
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 405_000
    result = run_formats(rows)
    print(
        f"{rows:,} ORDERS rows, 12 columns, batches of 5,000, in-process writers "
        f"(load average {result['loadAverage']:.2f})"
    )
    print(
        f"{'format':8s} {'seconds':>8s} {'cpu-s':>7s} {'rows/s':>9s} {'size MB':>8s} "
        f"{'RSS +MB':>8s} {'x CSV':>6s} {'RSS vs CSV':>10s}"
    )
    for fmt, r in result["formats"].items():
        ratio = f"{r['timeRatioToCsv']:.2f}" if "timeRatioToCsv" in r else "1.00"
        over = f"{r['rssGrowthOverCsvMb']:+.1f}" if "rssGrowthOverCsvMb" in r else ""
        print(
            f"{fmt:8s} {r['seconds']:8.2f} {r['cpuSeconds']:7.2f} {r['rowsPerSecond']:9,} "
            f"{r['bytes'] / 1e6:8.2f} {r['peakRssGrowthMb']!s:>8s} {ratio:>6s} {over:>10s}"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
