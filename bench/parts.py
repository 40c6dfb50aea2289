"""Shard parts of a sharded export, written and read back: CPU seconds per step.

A sharded export (ORDERS always is) writes each shard's rows into a *part* and joins
the parts at finalize. This bench times the part writers and readers alone, in one
process, on ``bench.writers``' ORDERS rows as the pipeline hands them over
(``BatchConverter.columns_of``, batches of 5,000; 405,000 rows by default), with a
checkpoint after every batch as a shard makes one per page:

* ``parquet part write``: ``ParquetPartWriter`` (Arrow IPC record batches).
* ``parquet assemble``: ``assemble_parquet`` of that part (the IPC messages read back
  in 256 kB chunks, the row groups, the Parquet file).
* ``rows part write``: ``RowsPartWriter`` (JSON lines), the part a split or compressed
  file is rendered from.
* ``rows part read``: ``read_rows_parts`` of that part (typed batches back).
* ``parquet from rows``: ``ParquetWriter`` given those batches (the Parquet path of
  sharded exports before the IPC parts: rows part write + read + this).
* ``parquet single``: ``ParquetWriter`` given the rows directly (no shard).

``--datetimes`` adds a DATETIME column (the order date at a minute of the day, aware
UTC), which ORDERS does not have. CPU seconds (``time.process_time``), the least of
``--repeat`` runs; printed figures, never an assertion.

Usage::

    python -m bench.parts [--rows N] [--repeat 3] [--datetimes] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench.tables import markdown_table

__all__ = ["STEPS", "run_parts"]

CHUNK = 256 << 10
"""Bytes per chunk a part is read back in (as storage hands segments over)."""

STEPS = (
    "parquet part write",
    "parquet assemble",
    "rows part write",
    "rows part read",
    "parquet from rows",
    "parquet single",
)
"""The steps timed, in the order printed."""


def _chunks(part: bytes) -> Iterator[memoryview]:
    view = memoryview(part)
    for start in range(0, len(part), CHUNK):
        yield view[start : start + CHUNK]


def _write(writer: Any, batches: list[list[list[Any]]], out: io.BytesIO) -> bytes:
    """Every batch, a checkpoint after each (its bytes become a segment), then close."""
    segments = []
    for columns in batches:
        writer.write_columns(columns)
        writer.checkpoint()
        segments.append(out.getvalue())
        out.seek(0)
        out.truncate()
    writer.close()
    segments.append(out.getvalue())
    return b"".join(segments)


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.process_time()
        result = fn()
        best = min(best, time.process_time() - started)
    return best, result


def run_parts(rows: int = 405_000, repeat: int = 3, datetimes: bool = False) -> dict[str, Any]:
    """Time the steps of the module docstring.

    Args:
        rows: ORDERS rows.
        repeat: runs per step; the least CPU seconds is kept.
        datetimes: add a DATETIME column.

    Returns:
        ``{"rows", "columns", "steps": {step: {"cpuSeconds", "microsecondsPerRow"}},
        "bytes": {"parquetPart", "rowsPart", "parquet"}, "sameFile"}``; ``sameFile``:
        the three Parquet files (assembled, from rows, single) are the same bytes.
    """
    from bench.writers import ORDERS_COLUMNS, make_column_batches
    from export_center.columns import Column, ColumnType
    from export_center.writers import (
        ParquetPartWriter,
        ParquetWriter,
        RowsPartWriter,
        WriterStats,
        assemble_parquet,
        read_rows_parts,
    )

    columns = list(ORDERS_COLUMNS)
    batches = make_column_batches(rows)
    if datetimes:
        columns.append(Column("o_ordertime", "Order time", ColumnType.DATETIME))
        day = columns.index(next(c for c in columns if c.key == "o_orderdate"))
        for n, batch in enumerate(batches):
            batch.append(
                [
                    dt.datetime.combine(d, dt.time(), dt.UTC) + dt.timedelta(minutes=(n + i) % 1440)
                    for i, d in enumerate(batch[day])
                ]
            )
    zone = "Asia/Shanghai"
    figures: dict[str, float] = {}
    out = io.BytesIO()

    def parquet_part() -> tuple[bytes, WriterStats]:
        writer = ParquetPartWriter(out, columns, time_zone=zone)
        part = _write(writer, batches, out)
        return part, writer.close()

    figures["parquet part write"], (ipc, ipc_stats) = _timed(parquet_part, repeat)

    def assemble() -> bytes:
        file = io.BytesIO()
        assemble_parquet(file, columns, [_chunks(ipc)], part_stats=ipc_stats, time_zone=zone)
        return file.getvalue()

    figures["parquet assemble"], assembled = _timed(assemble, repeat)

    def rows_part() -> bytes:
        return _write(RowsPartWriter(out, columns, time_zone=zone), batches, out)

    figures["rows part write"], stored = _timed(rows_part, repeat)
    figures["rows part read"], back = _timed(
        lambda: list(read_rows_parts(columns, [_chunks(stored)])), repeat
    )

    def parquet_of(given: list[list[list[Any]]]) -> Callable[[], bytes]:
        def run() -> bytes:
            file = io.BytesIO()
            writer = ParquetWriter(file, columns, time_zone=zone)
            for batch in given:
                writer.write_columns(batch)
            writer.close()
            return file.getvalue()

        return run

    figures["parquet from rows"], from_rows = _timed(parquet_of(back), repeat)
    figures["parquet single"], single = _timed(parquet_of(batches), repeat)
    return {
        "rows": rows,
        "columns": len(columns),
        "steps": {
            step: {
                "cpuSeconds": round(figures[step], 3),
                "microsecondsPerRow": round(figures[step] / rows * 1e6, 2),
            }
            for step in STEPS
        },
        "bytes": {"parquetPart": len(ipc), "rowsPart": len(stored), "parquet": len(single)},
        "sameFile": assembled == single == from_rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=405_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--datetimes", action="store_true", help="add a DATETIME column")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    result = run_parts(args.rows, args.repeat, args.datetimes)
    steps = result["steps"]
    print(
        markdown_table(
            ["step", "CPU s", "µs/row"],
            [
                [s, f"{steps[s]['cpuSeconds']:.3f}", f"{steps[s]['microsecondsPerRow']:.2f}"]
                for s in STEPS
            ],
        )
    )
    sizes = result["bytes"]
    print(
        f"{result['rows']:,} rows, {result['columns']} columns; parts: Arrow IPC "
        f"{sizes['parquetPart'] / 1e6:.1f} MB, rows {sizes['rowsPart'] / 1e6:.1f} MB; "
        f"Parquet {sizes['parquet'] / 1e6:.1f} MB, the same file every way: "
        f"{'yes' if result['sameFile'] else 'NO'}"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
