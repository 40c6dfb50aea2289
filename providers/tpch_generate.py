"""TPC-H CSV generation for the sample providers: ``tpchgen-cli`` run once per scale.

:func:`generate` writes ``customer.csv`` and ``orders.csv`` for a scale into a
directory and marks it complete (:data:`MARKER_NAME`) only when both files are whole,
so a process that dies mid-way leaves nothing another process would trust. Several
processes generating the same scale at once serialize on a file lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "MARKER_NAME",
    "count_csv_rows",
    "file_lock",
    "generate",
    "noop",
    "read_marker",
    "scale_key",
]

#: Marker written into a generated directory once both CSV files are complete.
MARKER_NAME = ".complete.json"


def noop(_message: str) -> None:
    return None


def scale_key(scale: float) -> str:
    return str(float(scale))


def tpchgen_cli() -> str:
    found = shutil.which("tpchgen-cli")
    if found:
        return found
    candidate = Path(sys.executable).parent / "tpchgen-cli"
    if candidate.exists():
        return str(candidate)
    raise FileNotFoundError(
        "tpchgen-cli not found on PATH nor next to the Python interpreter "
        f"({candidate.parent}); install it with `pip install tpchgen-cli`"
    )


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive ``flock`` on ``path`` (created if missing), released on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def count_csv_rows(path: Path) -> int:
    """Data lines of a tpchgen CSV file (no field contains a newline)."""
    lines = 0
    last = b"\n"
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        lines += 1
    return max(lines - 1, 0)


def read_marker(directory: Path) -> dict[str, Any] | None:
    marker = directory / MARKER_NAME
    if not marker.exists():
        return None
    try:
        data: dict[str, Any] = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if not (directory / "orders.csv").exists() or not (directory / "customer.csv").exists():
        return None
    return data


def generate(scale: float, out_dir: Path) -> Path:
    """Generate the TPC-H ``orders`` and ``customer`` tables as CSV files.

    Runs ``tpchgen-cli csv -s <scale> --tables orders,customer --output-dir <dir>``
    into ``out_dir / f"tpch-sf{scale}"``. A marker file written after a successful run
    (with the row counts) makes later calls return at once; a directory without it
    (an interrupted run) is generated again. Concurrent callers are serialized with a
    file lock.

    Args:
        scale: TPC-H scale factor (1.0 is 1.5 million orders).
        out_dir: parent directory; created if missing.

    Returns:
        The directory holding ``orders.csv`` and ``customer.csv``.

    Raises:
        FileNotFoundError: ``tpchgen-cli`` is not installed.
        RuntimeError: ``tpchgen-cli`` failed or wrote incomplete files.
    """
    scale = float(scale)
    target = Path(out_dir) / f"tpch-sf{scale}"
    if read_marker(target) is not None:
        return target
    with file_lock(Path(out_dir) / f".tpch-sf{scale}.lock"):
        if read_marker(target) is not None:  # another process finished meanwhile
            return target
        target.mkdir(parents=True, exist_ok=True)
        (target / MARKER_NAME).unlink(missing_ok=True)
        cli = tpchgen_cli()
        command = [
            cli,
            "csv",
            "--scale-factor",
            str(scale),
            "--tables",
            "orders,customer",
            "--output-dir",
            str(target),
            "--overwrite",
            "--no-progress",
            "--quiet",
        ]
        started = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"tpchgen-cli failed with exit code {result.returncode}: "
                f"{' '.join(command)}\n{result.stderr.strip()}"
            )
        counts = {}
        for table in ("orders", "customer"):
            path = target / f"{table}.csv"
            if not path.exists() or path.stat().st_size == 0:
                raise RuntimeError(f"tpchgen-cli did not write {path}")
            counts[table] = count_csv_rows(path)
        if counts["orders"] == 0:
            raise RuntimeError(f"tpchgen-cli wrote no orders into {target}")
        marker = {
            "scale": scale,
            "orders": counts["orders"],
            "customers": counts["customer"],
            "seconds": round(time.monotonic() - started, 3),
            "generator": Path(cli).name,
        }
        tmp = target / f"{MARKER_NAME}.tmp"
        tmp.write_text(json.dumps(marker, indent=2) + "\n")
        tmp.replace(target / MARKER_NAME)
    return target
