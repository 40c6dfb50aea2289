"""Quick throughput check of the export writers (kept for its old command line).

Runs the writer part of ``python -m bench`` (``bench/writers.py``) on ROWS ORDERS rows
(default 200,000) and prints rows/s and the ratio to openpyxl. A print-out, not a
test: numbers depend on the machine and its load.

Usage::

    python bench/writers_quick.py [ROWS]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from bench.writers import run_writers  # noqa: E402


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    result = run_writers(rows, say=lambda _line: None)
    print(
        f"{rows:,} ORDERS rows, 12 columns, batches of {result['batchRows']:,} "
        f"(load average {result['loadAverage']:.2f})"
    )
    print(f"{'writer':28s} {'rows/s':>10s} {'rows/cpu-s':>11s} {'size MB':>8s}  vs openpyxl")
    for name, r in result["writers"].items():
        if "skipped" in r:
            print(f"{name:28s} skipped: {r['skipped']}")
            continue
        ratio = f"{r['ratioToOpenpyxl']:6.2f}x" if "ratioToOpenpyxl" in r else ""
        print(
            f"{name:28s} {r['rowsPerSecond']:10,.0f} {r['rowsPerCpuSecond']:11,.0f} "
            f"{r['bytes'] / 1e6:8.2f}  {ratio}"
        )


if __name__ == "__main__":
    main()
