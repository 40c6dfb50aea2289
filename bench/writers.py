"""Writer-only benchmark: ORDERS rows through our CSV and XLSX writers and two libraries.

The data is what the export pipeline hands to a writer: TPC-H-like ORDERS rows as the
provider sends them (JSON values: DECIMAL and DATE as text), converted before timing.
Our writers get each batch as the pipeline gives it, typed columns from
``BatchConverter.columns_of`` through ``write_columns``. openpyxl (``write_only``),
XlsxWriter (``constant_memory``) and Python's ``csv`` module get the same values as
rows (``make_converters`` per row), with the DECIMAL as ``float`` for the two XLSX
libraries (what a caller of those libraries does anyway). Batches of 5,000 rows, as
the ORDERS export type.

Each writer is timed by wall clock and by CPU time of this process; a print-out and a
JSON fragment, never an assertion.
"""

from __future__ import annotations

import datetime as dt
import gc
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from export_center.attempt.batches import BatchConverter
from export_center.columns import Column, ColumnType
from export_center.values import DecimalText, make_converters
from export_center.writers import open_writer
from providers.samples import ORDERS_COLUMNS as _SAMPLE_COLUMNS

ORDERS_COLUMNS = [Column(c.key, c.title, ColumnType(c.type), c.width) for c in _SAMPLE_COLUMNS]
"""The columns the e2e part exports, as the pipeline holds them (the provider SDK's
``Column`` carries the type as text)."""

__all__ = ["ORDERS_COLUMNS", "WRITERS", "make_batches", "run_writers"]


BATCH = 5_000
_TEXT = (
    "furiously sly deposits haggle carefully final requests nag slyly regular accounts "
    "sleep quickly ironic packages wake blithely express pinto beans cajole instructions "
    "among the theodolites boost bold foxes, pending ideas. - special"
)
_WORDS = _TEXT.split()

Batches = list[list[dict[str, Any]]]
ColumnBatches = list[list[list[Any]]]


def _json_rows(total: int, seed: int) -> Iterator[dict[str, Any]]:
    """ORDERS rows as the provider's JSON decodes (DECIMAL and DATE as text)."""
    rnd = random.Random(seed)
    segments = ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"]
    priorities = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
    start = dt.date(1992, 1, 1).toordinal()
    for key in range(1, total + 1):
        cust = rnd.randint(1, 40_500)
        cents = rnd.randint(85_000, 55_000_000)
        yield {
            "o_orderkey": key * 4 - 3,
            "o_custkey": cust,
            "c_name": f"Customer#{cust:09d}",
            "c_phone": f"{rnd.randint(10, 34)}-{rnd.randint(100, 999)}-"
            f"{rnd.randint(100, 999)}-{rnd.randint(1000, 9999)}",
            "c_mktsegment": rnd.choice(segments),
            "o_orderstatus": rnd.choice("OFP"),
            "o_totalprice": f"{cents // 100}.{cents % 100:02d}",
            "o_orderdate": dt.date.fromordinal(start + rnd.randint(0, 2_400)).isoformat(),
            "o_orderpriority": rnd.choice(priorities),
            "o_clerk": f"Clerk#{rnd.randint(1, 1000):09d}",
            "o_shippriority": 0,
            "o_comment": " ".join(rnd.choices(_WORDS, k=rnd.randint(3, 9))),
        }


def make_batches(total: int, seed: int = 7) -> Batches:
    """Typed rows in batches of ``BATCH`` (``make_converters`` per row)."""
    converters = make_converters(ORDERS_COLUMNS)
    pairs = [(c.key, conv) for c, conv in zip(ORDERS_COLUMNS, converters, strict=True)]
    rows = [{k: conv(raw.get(k)) for k, conv in pairs} for raw in _json_rows(total, seed)]
    return [rows[i : i + BATCH] for i in range(0, total, BATCH)]


def make_column_batches(total: int, seed: int = 7) -> ColumnBatches:
    """The same values as :func:`make_batches`, as the pipeline hands them to our
    writers: one ``BatchConverter.columns_of`` result per batch."""
    converter = BatchConverter(ORDERS_COLUMNS)
    raw = list(_json_rows(total, seed))
    return [converter.columns_of(raw[i : i + BATCH]) for i in range(0, total, BATCH)]


def _ours(fmt: str) -> Callable[[str, Any], None]:
    def run(path: str, batches: ColumnBatches) -> None:
        with open(path, "wb") as out:
            writer = open_writer(fmt, out, ORDERS_COLUMNS, time_zone="UTC")
            for columns in batches:
                writer.write_columns(columns)
            writer.close()

    return run


def _python_csv(path: str, batches: Batches) -> None:
    import csv

    keys = [c.key for c in ORDERS_COLUMNS]
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([c.title for c in ORDERS_COLUMNS])
        for batch in batches:
            writer.writerows([[row.get(k) for k in keys] for row in batch])


def _plain(value: Any) -> Any:
    # What a fair caller of the libraries does: decimal -> float.
    return float(value) if isinstance(value, DecimalText) else value


def _openpyxl_write_only(path: str, batches: Batches) -> None:
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Sheet1")
    keys = [c.key for c in ORDERS_COLUMNS]
    sheet.append([c.title for c in ORDERS_COLUMNS])
    for batch in batches:
        for row in batch:
            sheet.append([_plain(row.get(k)) for k in keys])
    workbook.save(path)


def _xlsxwriter_constant_memory(path: str, batches: Batches) -> None:
    import xlsxwriter  # type: ignore[import-not-found,unused-ignore]

    workbook = xlsxwriter.Workbook(path, {"constant_memory": True})
    sheet = workbook.add_worksheet("Sheet1")
    date_format = workbook.add_format({"num_format": "yyyy-mm-dd"})
    money = workbook.add_format({"num_format": "#,##0.00"})
    keys = [c.key for c in ORDERS_COLUMNS]
    sheet.write_row(0, 0, [c.title for c in ORDERS_COLUMNS])
    r = 1
    for batch in batches:
        for row in batch:
            for c, key in enumerate(keys):
                value = row.get(key)
                if isinstance(value, dt.date):
                    sheet.write_datetime(r, c, value, date_format)
                elif isinstance(value, DecimalText):
                    sheet.write_number(r, c, float(value), money)
                else:
                    sheet.write(r, c, value)
            r += 1
    workbook.close()


WRITERS: dict[str, tuple[str, Callable[[str, Any], None]]] = {
    "ours_xlsx": ("xlsx", _ours("xlsx")),
    "openpyxl_write_only": ("xlsx", _openpyxl_write_only),
    "xlsxwriter_constant_memory": ("xlsx", _xlsxwriter_constant_memory),
    "ours_csv": ("csv", _ours("csv")),
    "python_csv": ("csv", _python_csv),
}
"""Writer name -> (file extension, run(path, batches)); ``ours_*`` take column
batches, the others row batches."""


def _lxml() -> bool:
    try:
        import lxml  # noqa: F401  # type: ignore[import-untyped]
    except ImportError:
        return False
    return True


def run_writers(
    rows: int, *, repeat: int = 1, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Run every writer on the same ``rows`` ORDERS rows; return the results.

    Args:
        rows: rows per file.
        repeat: rounds (each round runs every writer once); each writer keeps its
            fastest round, as the end-to-end runs do.

    Returns:
        ``{"rows", "loadAverage", "writers": {name: {rowsPerSecond, rowsPerCpuSecond,
        seconds, bytes, ratioToOpenpyxl, runs}}}``; a writer whose library is missing
        has ``{"skipped": reason}``.
    """
    batches = make_batches(rows)
    column_batches = make_column_batches(rows)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ec-bench-writers-") as tmp:
        for _ in range(max(1, repeat)):
            for name, (ext, run) in WRITERS.items():
                if "skipped" in results.get(name, {}):
                    continue
                path = str(Path(tmp) / f"{name}.{ext}")
                gc.collect()
                wall, cpu = time.perf_counter(), time.process_time()
                try:
                    run(path, column_batches if name.startswith("ours_") else batches)
                except ImportError as exc:
                    results[name] = {"skipped": f"{exc}"}
                    say(f"  {name:28s} skipped: {exc}")
                    continue
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                say(f"  {name:28s} {rows / wall:12,.0f} rows/s")
                previous = results.get(name)
                result = {
                    "rowsPerSecond": round(rows / wall, 1),
                    "rowsPerCpuSecond": round(rows / cpu, 1) if cpu > 0 else None,
                    "seconds": round(wall, 3),
                    "bytes": os.path.getsize(path),
                    "runs": [*(previous or {}).get("runs", []), round(wall, 3)],
                }
                os.unlink(path)
                if previous is None or wall < previous["seconds"]:
                    results[name] = result
                else:
                    previous["runs"] = result["runs"]
    base = results.get("openpyxl_write_only", {}).get("rowsPerSecond")
    for result in results.values():
        if base and "rowsPerSecond" in result:
            result["ratioToOpenpyxl"] = round(result["rowsPerSecond"] / base, 2)
    return {
        "rows": rows,
        "batchRows": BATCH,
        "loadAverage": round(os.getloadavg()[0], 2),
        "openpyxlUsesLxml": _lxml(),
        "writers": results,
    }
