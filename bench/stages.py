"""Where the worker's CPU goes: each stage of the export path timed on its own.

The e2e part measures whole exports; this one splits the worker's share of one export
into its stages, single-threaded, on the same 405,000 orders (or ``--scale``), so the
CPU-seconds per 100k rows of each stage add up to what the worker spends:

* ``provider``: the sample ORDERS provider answering every batch (``handle``: SQL,
  JSON arrays built by SQL, the body). In the embedded default this runs in the
  provider's child process, not in the worker; shown for comparison.
* ``parse``: the export center's check and decoding of each answer
  (``ProviderClient._parse``: ``orjson.loads`` and the contract checks).
* ``convert``: typed columns (``BatchConverter.columns_of``, arrays).
* ``csv``: the CSV part writer (``CsvPartWriter.write_columns``) into memory.
* ``xlsx render``: the XLSX fragment writer (``XlsxFragmentWriter.write_columns``).
* ``xlsx assemble``: numbering the rows, the sheets and deflate (``assemble_xlsx``).
* ``objects parse`` / ``objects convert``: the same rows sent as JSON objects (the
  format before ``rowFormat: "array"``), for the comparison.

HTTP, storage, checkpoints and the loops are not in these figures; the e2e part's
``threadCpuSeconds`` covers them.

Usage::

    python -m bench.stages [--data-dir DIR] [--scale 0.27] [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

__all__ = ["run_stages"]

BATCH = 5000


def _bodies(data_dir: Path, scale: float) -> tuple[list[bytes], float]:
    """Every answer body of a whole ORDERS export, from the sample provider called in
    this process; and the CPU seconds the provider took."""
    from export_center.db import make_engine
    from providers import tpch
    from providers.samples import orders_provider

    data_dir.mkdir(parents=True, exist_ok=True)  # a fresh machine: `--only stages` alone
    engine = make_engine(f"sqlite:///{data_dir / 'export-center.db'}", immediate=False)
    tpch.ensure_loaded(engine, scale, data_dir)
    provider = orders_provider(engine, token="t", secret="s", read_ahead=False)
    bodies: list[bytes] = []
    cursor = snapshot = None
    cpu = 0.0
    while True:
        request = orjson.dumps(
            {
                "taskId": "exp_stages",
                "tenantId": "t",
                "appCode": "PLATFORM",
                "requestedBy": "u",
                "dispatchVersion": 1,
                "parameters": {},
                "cursor": cursor,
                "snapshotToken": snapshot,
                "limit": BATCH,
            }
        )
        started = time.process_time()
        answer = provider.handle(request, "t")
        cpu += time.process_time() - started
        body = bytes(answer.body)
        bodies.append(body)
        page = orjson.loads(body)
        snapshot = page["snapshotToken"]
        if not page["hasMore"]:
            break
        cursor = page["nextCursor"]
    engine.dispose()
    return bodies, cpu


def _as_objects(body: bytes) -> bytes:
    """The same answer with its rows as JSON objects (the format before arrays)."""
    from providers.samples import ORDERS_COLUMNS

    keys = [c.key for c in ORDERS_COLUMNS]
    page = orjson.loads(body)
    page["rows"] = [dict(zip(keys, row, strict=True)) for row in page["rows"]]
    page.pop("rowFormat", None)
    return orjson.dumps(page)


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The least CPU seconds of ``repeat`` calls of ``fn``, and its last result."""
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        started = time.process_time()
        result = fn()
        best = min(best, time.process_time() - started)
    return best, result


def _stream(
    bodies: list[bytes], repeat: int, xlsx: bool
) -> tuple[dict[str, float], int, bytes, Any]:
    """One pass over ``bodies`` as the worker makes it, batch by batch (each batch freed
    before the next, as in the pipeline): parse, convert, write (CSV part, or XLSX
    fragment). Returns the least CPU seconds per stage over ``repeat`` passes, the
    rows, and the last XLSX fragment and its stats (for the assembly)."""
    from export_center.attempt.batches import BatchConverter
    from export_center.provider_client import ProviderClient
    from export_center.writers.parts import CsvPartWriter, XlsxFragmentWriter
    from providers.samples import ORDERS_COLUMNS

    columns: Any = list(ORDERS_COLUMNS)
    client = ProviderClient(token="t")
    best: dict[str, float] = {}
    rows = 0
    fragment, stats = b"", None
    clock = time.process_time
    for _ in range(repeat):
        spent = {"parse": 0.0, "convert": 0.0, "write": 0.0}
        out = io.BytesIO()
        writer = (XlsxFragmentWriter if xlsx else CsvPartWriter)(out, columns)
        converter = BatchConverter(columns)
        rows = 0
        for body in bodies:
            t0 = clock()
            batch = client._parse(body, BATCH)
            t1 = clock()
            typed = converter.columns_of(batch.rows, batch.arrays)
            t2 = clock()
            writer.write_columns(typed)
            t3 = clock()
            rows += len(batch.rows)
            del batch, typed
            spent["parse"] += t1 - t0
            spent["convert"] += t2 - t1
            spent["write"] += t3 - t2
        stats = writer.close()
        fragment = out.getvalue() if xlsx else b""
        for name, cpu in spent.items():
            best[name] = min(best.get(name, float("inf")), cpu)
    return best, rows, fragment, stats


def run_stages(
    data_dir: Path, scale: float, repeat: int = 3, python_gc: bool = False
) -> dict[str, Any]:
    """Time each stage; returns ``{rows, bodyBytes, gcThreshold, stages: {name:
    {cpuSeconds, per100k, microsecondsPerRow}}}`` (CPU seconds of this process, the
    least of ``repeat`` passes). The garbage collector is tuned as in the worker
    (``runtime.tune_gc``) unless ``python_gc``."""
    import gc

    from export_center.runtime import tune_gc
    from export_center.settings import ConsumerSettings

    if not python_gc:
        tune_gc(ConsumerSettings().gc_gen0_threshold)
    from export_center.writers.base import WriterStats
    from export_center.writers.parts import assemble_xlsx
    from providers.samples import ORDERS_COLUMNS

    columns: Any = list(ORDERS_COLUMNS)
    bodies, provider_cpu = _bodies(data_dir, scale)
    stages: dict[str, float] = {"provider (child process)": provider_cpu}
    csv, rows, _, _ = _stream(bodies, repeat, xlsx=False)
    stages["parse"], stages["convert"], stages["csv write"] = (
        csv["parse"],
        csv["convert"],
        csv["write"],
    )
    xlsx, _, fragment, part_stats = _stream(bodies, repeat, xlsx=True)
    stages["xlsx render"] = xlsx["write"]

    def assemble() -> None:
        chunks = [fragment[i : i + (1 << 18)] for i in range(0, len(fragment), 1 << 18)]
        assemble_xlsx(io.BytesIO(), columns, [chunks], part_stats=WriterStats.total([part_stats]))

    stages["xlsx assemble"], _ = _timed(assemble, repeat)
    objects = [_as_objects(b) for b in bodies]
    body_bytes = {"arrays": sum(map(len, bodies)), "objects": sum(map(len, objects))}
    del bodies
    as_objects, _, _, _ = _stream(objects, repeat, xlsx=False)
    stages["objects: parse"], stages["objects: convert"] = (
        as_objects["parse"],
        as_objects["convert"],
    )
    return {
        "rows": rows,
        "bodyBytes": body_bytes,
        "gcThreshold": list(gc.get_threshold()),
        "stages": {
            name: {
                "cpuSeconds": round(cpu, 3),
                "per100k": round(cpu / rows * 100_000, 3),
                "microsecondsPerRow": round(cpu / rows * 1e6, 2),
            }
            for name, cpu in stages.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.stages", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--data-dir", type=Path, default=Path(".export-center/bench"))
    parser.add_argument("--scale", type=float, default=0.27)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--python-gc", action="store_true", help="keep CPython's GC thresholds (A/B)"
    )
    args = parser.parse_args(argv)
    result = run_stages(
        args.data_dir / f"sqlite-sf{args.scale}", args.scale, args.repeat, args.python_gc
    )
    for name, figures in result["stages"].items():
        print(
            f"{name:26} {figures['cpuSeconds']:7.3f} CPU-s  {figures['per100k']:6.3f} per 100k"
            f"  {figures['microsecondsPerRow']:6.2f} us/row"
        )
    print(
        f"rows {result['rows']:,}; body bytes {result['bodyBytes']};"
        f" gc threshold {result['gcThreshold']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
