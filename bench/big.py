"""The ``big`` part: all orders of TPC-H scale 7 (10,500,000) in one export.

Runs the e2e path (``bench.e2e_run`` subprocesses, as the ``e2e`` part) on a sample of
``--big-scale`` and compares each (database, format) with the e2e run of the 405,000
orders of scale 0.27 (``--quick``: 0.01) measured in the same invocation: the ``e2e``
part's result when it ran before, else a run made here. Nothing in the product is
changed for it; the subprocesses get

* ``--max-rows <orders>``: the ORDERS ``max_rows`` of the running registry raised to
  the sample's orders (``providers/export_types.yaml`` says 5,000,000, and the registry
  refuses a file with more: ``export_center.registry``, 1..5,000,000);
* ``EXPORT_CENTER_TASK__MAX_FILE_SIZE_MB`` = :data:`FILE_CAP_MB` (the embedded cap is
  512 MB; the CSV of 10.5 million orders is about 1.6 GB);
* on MariaDB, a load lock of their own (``--load-lock``): ``providers.tpch`` takes one
  advisory lock for the whole server, and a load of millions of orders holds it for
  minutes.

The export has no dates, so the sharded ORDERS type plans one ``all`` shard: one
keyset stream over the whole table, rendered into one part and joined into the file.

MariaDB: the database :data:`BIG_DATABASE` on the ``scripts/mariadb.sh`` test server
for the big sample, and :data:`BASE_DATABASE` for the 405,000-order comparison when it
runs here (the sample tables have fixed names, so one database holds one scale).
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy import create_engine, text

from bench.e2e import e2e_subprocess, load_sample, server_database_url
from export_center.writers.xlsx import EXCEL_MAX_ROWS
from providers.samples import ORDERS_COLUMNS

__all__ = [
    "BASE_DATABASE",
    "BIG_DATABASE",
    "BIG_SCALE",
    "ORDERS_TITLES",
    "SHEET_ROWS",
    "big_mariadb_urls",
    "inspect_xlsx",
    "run_big",
]

BIG_SCALE = 7.0
"""Default ``--big-scale``: 10,500,000 orders, 1,050,000 customers."""
BIG_DATABASE = "export_center_bench_big"
BASE_DATABASE = "export_center_bench_big_base"
LOAD_LOCK = "export_center_tpch_bench_big"
"""The advisory lock name of this part's MariaDB loads (``bench.e2e_run --load-lock``)."""
FILE_CAP_MB = 16_384
"""File size cap of the runs (MB): far above the 10.5-million-order CSV (about 1.6 GB)."""
PREPARE_TIMEOUT = 4 * 3600
"""Seconds a ``--prepare`` run may take (MariaDB loads 10.5 million orders in minutes)."""
EXPORT_TIMEOUT = 2 * 3600
"""Seconds one big export may take (about 2 to 3 minutes per 10 million rows)."""
SHEET_ROWS = EXCEL_MAX_ROWS - 1
"""Data rows per worksheet: 1,048,575 (row 1 of each sheet is the header)."""
ORDERS_TITLES = [c.title for c in ORDERS_COLUMNS]
"""The ORDERS header row, in file order."""

_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"


def _first_row(stream: Any, chunk: int = 16_384) -> tuple[str | None, list[str]] | None:
    """The first ``<row>`` of a worksheet XML stream: its ``r`` and its cell texts.

    Reads ``chunk`` bytes at a time until the row has ended (a sheet's head and its
    header row take about 1 kB), so a sheet of a million rows is never read whole.
    """
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("end",))
    while data := stream.read(chunk):
        parser.feed(data)
        for event in parser.read_events():
            element = event[1] if isinstance(event, tuple) and len(event) == 2 else None
            if isinstance(element, ET.Element) and element.tag == f"{_MAIN}row":
                return element.get("r"), [t.text or "" for t in element.iter(f"{_MAIN}t")]
    return None


def inspect_xlsx(path: Path, titles: list[str]) -> dict[str, Any]:
    """Count the sheets of an XLSX file and check that each starts with the header.

    Reads ``xl/workbook.xml`` and its relationships (small), then only the head of
    each worksheet entry through :func:`zipfile.ZipFile.open` (a stream): memory and
    time do not depend on the number of rows.

    Args:
        path: the XLSX file.
        titles: the header titles expected in row 1 of every sheet, in order.

    Returns:
        ``sheets`` (the workbook's sheet count), ``sheetHeadersOk`` (every sheet's
        first row is ``r="1"`` with exactly ``titles``) and, when some are not,
        ``badSheets`` (their names).
    """
    bad: list[str] = []
    with zipfile.ZipFile(path) as package:
        workbook = ET.fromstring(package.read("xl/workbook.xml"))
        rels = ET.fromstring(package.read("xl/_rels/workbook.xml.rels"))
        targets = {r.get("Id"): r.get("Target") or "" for r in rels.iter(f"{_PKG_REL}Relationship")}
        sheets = list(workbook.iter(f"{_MAIN}sheet"))
        for sheet in sheets:
            target = targets.get(sheet.get(f"{_REL}id"), "")
            entry = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
            entry = str(PurePosixPath(entry))
            try:
                with package.open(entry) as stream:
                    first = _first_row(stream)
            except KeyError:
                first = None
            if first != ("1", titles):
                bad.append(sheet.get("name") or entry)
    out: dict[str, Any] = {"sheets": len(sheets), "sheetHeadersOk": bool(sheets) and not bad}
    if bad:
        out["badSheets"] = bad
    return out


def expected_sheets(rows: int) -> int:
    """Worksheets an XLSX of ``rows`` data rows has: ceil(rows / 1,048,575), at least 1."""
    return max(1, math.ceil(rows / SHEET_ROWS))


def big_mariadb_urls() -> tuple[tuple[str, str] | None, str]:
    """The URLs of :data:`BIG_DATABASE` and :data:`BASE_DATABASE` on the test server
    (both created when missing), or None and why not."""
    big, source = server_database_url(BIG_DATABASE)
    if big is None:
        return None, source
    base, base_source = server_database_url(BASE_DATABASE)
    if base is None:
        return None, base_source
    return (big, base), f"{source}, {BASE_DATABASE} for the comparison"


def _size_mb(paths: list[Path]) -> float:
    total = 0
    for path in paths:
        if path.is_dir():
            total += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        elif path.exists():
            total += path.stat().st_size
    return round(total / 1e6, 1)


def _disk(sample_dir: Path, scale: float, database_url: str | None) -> dict[str, float]:
    """Disk used by a prepared sample, in MB (10^6 bytes).

    Returns:
        ``csvMb``: the generated CSV files; ``databaseMb``: the SQLite file (which also
        holds the service's tables), or on MariaDB the ``orders`` and ``customer``
        tables' data and indexes as ``information_schema.TABLES`` reports them after
        ``ANALYZE TABLE``.
    """
    out = {"csvMb": _size_mb([sample_dir / f"tpch-sf{float(scale)}"])}
    if database_url is None:
        out["databaseMb"] = _size_mb(sorted(sample_dir.glob("export-center.db*")))
        return out
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            conn.execute(text("ANALYZE TABLE orders, customer"))  # fresh sizes after a load
            size = conn.execute(
                text(
                    "SELECT COALESCE(SUM(data_length + index_length), 0) FROM "
                    "information_schema.TABLES WHERE table_schema = DATABASE() "
                    "AND table_name IN ('orders', 'customer')"
                )
            ).scalar_one()
    finally:
        engine.dispose()
    out["databaseMb"] = round(int(size) / 1e6, 1)
    return out


def _split_steps(prepared: dict[str, Any]) -> dict[str, float | None]:
    """Generation and loading seconds from a ``--prepare`` run's ``steps`` (None when
    the sample was already loaded): generation runs from the first line to the
    ``loading ...`` line, loading (and its check) from there to the last line."""
    steps = prepared.get("steps") or []
    loading = next((t for t, line in steps if str(line).startswith("loading ")), None)
    if not steps or loading is None:
        return {"generateSeconds": None, "loadSeconds": None}
    return {
        "generateSeconds": round(loading - steps[0][0], 1),
        "loadSeconds": round(steps[-1][0] - loading, 1),
    }


def _entry(run: dict[str, Any]) -> dict[str, Any]:
    """The reported figures of one run: seconds (create -> downloaded; ``taskSeconds``:
    create -> succeeded), RSS in MB, CPU seconds of the worker process (all threads, and
    by thread name), file bytes."""
    rows = int(run["rows"])
    out = {
        "rows": rows,
        "seconds": run["seconds"],
        "secondsPer100k": round(run["seconds"] / rows * 100_000, 3) if rows else None,
        "rowsPerSecond": run["rowsPerSecond"],
        "peakRssMb": run["peakRssMb"],
        "cpuSeconds": run["cpuSeconds"],
        "cpuSecondsPer100k": round(run["cpuSeconds"] / rows * 100_000, 3) if rows else None,
        "threadCpuSeconds": run.get("threadCpuSeconds"),
        "taskSeconds": run.get("taskSeconds"),
        "bytes": run.get("bytes"),
        "loadAverage": run.get("loadAverage"),
    }
    if "runs" in run:
        out["runs"] = run["runs"]
    return out


def _measure(
    args: list[str], fmt: str, timeout: float, label: str, say: Callable[[str], None]
) -> dict[str, Any]:
    load = os.getloadavg()[0]
    result = e2e_subprocess(
        [*args, "--format", fmt],
        timeout=timeout,
        env={"EXPORT_CENTER_TASK__MAX_FILE_SIZE_MB": str(FILE_CAP_MB)},
    )
    result["loadAverage"] = round(load, 2)
    say(
        f"  {label} {fmt:4s} {result['rows']:>10,} rows {result['seconds']:8.2f} s "
        f"{result['rowsPerSecond']:>9,.0f} rows/s  peak RSS {result['peakRssMb']:.0f} MB  "
        f"CPU {result['cpuSeconds']:.1f} s  (load {load:.2f})"
    )
    return result


def run_big(
    *,
    data_dir: Path,
    targets: dict[str, tuple[str | None, str | None]],
    scale: float,
    base_scale: float,
    formats: tuple[str, ...] = ("csv", "xlsx"),
    repeat: int = 1,
    e2e: dict[str, Any] | None = None,
    prepare_only: bool = False,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Prepare the big sample on each database, export it in each format, compare.

    Args:
        data_dir: the bench data directory (``<database>-sf<scale>`` under it: CSV files
            and the SQLite file; about 3 GB for SQLite at scale 7).
        targets: ``{database label: (URL of the big sample, URL of the comparison
            sample)}``, both None for SQLite.
        scale: TPC-H scale of the big sample (7.0: 10,500,000 orders).
        base_scale: TPC-H scale of the comparison (0.27: 405,000 orders).
        formats: the formats to export.
        repeat: runs per (sample, format), round by round; the fastest is kept.
        e2e: the ``e2e`` part's result of this invocation (its runs are the comparison
            of a database when they cover every format), or None.
        prepare_only: generate and load the big samples, export nothing.

    Returns:
        ``{"scale", "baseScale", "prepare": {database: {orders, seconds, steps,
        generateSeconds, loadSeconds, csvMb, databaseMb}}, database: {format: {rows,
        seconds, secondsPer100k, rowsPerSecond, peakRssMb, cpuSeconds,
        cpuSecondsPer100k, threadCpuSeconds, taskSeconds, bytes, loadAverage, runs,
        sheets and sheetHeadersOk (XLSX), base: {the same figures of the comparison
        run, source: "e2e" or "big"}}}}``.
    """
    out: dict[str, Any] = {"scale": scale, "baseScale": base_scale, "prepare": {}}
    for database, (big_url, base_url) in targets.items():
        lock = ["--load-lock", LOAD_LOCK] if big_url else []
        big_args, prepared = load_sample(
            data_dir=data_dir,
            database=database,
            database_url=big_url,
            scale=scale,
            timeout=PREPARE_TIMEOUT,
            prepare_args=lock,
            say=say,
        )
        prepared.update(_split_steps(prepared))
        prepared.update(_disk(data_dir / f"{database}-sf{scale}", scale, big_url))
        out["prepare"][database] = prepared
        took = (
            "already loaded"
            if prepared["loadSeconds"] is None
            else f"generate {prepared['generateSeconds']} s, load {prepared['loadSeconds']} s"
        )
        say(
            f"  {database} sf{scale}: prepared in {prepared['seconds']:.0f} s ({took}); "
            f"CSV {prepared['csvMb']:,.0f} MB, database {prepared['databaseMb']:,.0f} MB"
        )
        if prepare_only:
            continue
        reused = (e2e or {}).get(database) or {}
        base_args: list[str] | None = None
        if not all(fmt in reused for fmt in formats):
            reused = {}
            base_args, _ = load_sample(
                data_dir=data_dir,
                database=database,
                database_url=base_url,
                scale=base_scale,
                prepare_args=lock,
                say=say,
            )
        big_run = [*big_args, "--max-rows", str(prepared["orders"]), "--inspect-xlsx"]
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(max(1, repeat)):
            for fmt in formats:
                if base_args is not None:
                    run = _measure(base_args, fmt, 3600, f"{database} sf{base_scale}", say)
                    runs.setdefault(("base", fmt), []).append(run)
                run = _measure(big_run, fmt, EXPORT_TIMEOUT, f"{database} sf{scale}", say)
                runs.setdefault(("big", fmt), []).append(run)
        results: dict[str, Any] = {}
        for fmt in formats:
            done = runs[("big", fmt)]
            best = min(done, key=lambda r: r["seconds"])
            entry = _entry({**best, "runs": [r["seconds"] for r in done]})
            if fmt == "xlsx":
                entry["sheets"] = best.get("sheets")
                entry["sheetHeadersOk"] = best.get("sheetHeadersOk")
                if best.get("badSheets"):
                    entry["badSheets"] = best["badSheets"]
            if reused:
                entry["base"] = {**_entry(reused[fmt]), "source": "e2e"}
            else:
                base_runs = runs[("base", fmt)]
                base_best = min(base_runs, key=lambda r: r["seconds"])
                entry["base"] = {
                    **_entry({**base_best, "runs": [r["seconds"] for r in base_runs]}),
                    "source": "big",
                }
            results[fmt] = entry
        out[database] = results
    return out
