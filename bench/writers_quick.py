"""Quick throughput check of the export writers on ORDERS-shaped rows.

Writes N rows (default 200,000) of the 12 ORDERS columns through our CSV writer,
our XLSX writer, openpyxl (write_only) and XlsxWriter (constant_memory) into /tmp,
in batches of 5,000 rows, and prints rows/s (wall clock), rows per CPU second (all
threads of the process; steadier when other work shares the machine), file size
and the speed ratio to openpyxl. A print-out, not a test: numbers depend on the
machine and its load.

Usage::

    python bench/writers_quick.py [ROWS]
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from export_center.columns import Column, ColumnType  # noqa: E402
from export_center.writers import open_writer  # noqa: E402

ORDERS_COLUMNS = [
    Column("o_orderkey", "Order key", ColumnType.INTEGER),
    Column("o_custkey", "Customer key", ColumnType.INTEGER),
    Column("c_name", "Customer", ColumnType.STRING),
    Column("c_phone", "Phone", ColumnType.STRING),
    Column("c_mktsegment", "Segment", ColumnType.STRING),
    Column("o_orderstatus", "Status", ColumnType.STRING),
    Column("o_totalprice", "Total price", ColumnType.DECIMAL),
    Column("o_orderdate", "Order date", ColumnType.DATE),
    Column("o_orderpriority", "Priority", ColumnType.STRING),
    Column("o_clerk", "Clerk", ColumnType.STRING),
    Column("o_shippriority", "Ship priority", ColumnType.INTEGER),
    Column("o_comment", "Comment", ColumnType.STRING),
]
BATCH = 5_000
_TEXT = (
    "furiously sly deposits haggle carefully final requests nag slyly regular accounts "
    "sleep quickly ironic packages wake blithely express pinto beans cajole instructions "
    "among the theodolites boost bold foxes"
)
_WORDS = _TEXT.split()


def make_batches(total: int, seed: int = 7) -> list[list[dict[str, Any]]]:
    """TPC-H-like ORDERS rows, built up front so that generation is not timed."""
    rnd = random.Random(seed)
    segments = ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"]
    priorities = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
    start = dt.date(1992, 1, 1).toordinal()
    rows = []
    for key in range(1, total + 1):
        cust = rnd.randint(1, 40_500)
        rows.append(
            {
                "o_orderkey": key * 4 - 3,
                "o_custkey": cust,
                "c_name": f"Customer#{cust:09d}",
                "c_phone": f"{rnd.randint(10, 34)}-{rnd.randint(100, 999)}-"
                f"{rnd.randint(100, 999)}-{rnd.randint(1000, 9999)}",
                "c_mktsegment": rnd.choice(segments),
                "o_orderstatus": rnd.choice("OFP"),
                "o_totalprice": Decimal(rnd.randint(85_000, 55_000_000)).scaleb(-2),
                "o_orderdate": dt.date.fromordinal(start + rnd.randint(0, 2_400)),
                "o_orderpriority": rnd.choice(priorities),
                "o_clerk": f"Clerk#{rnd.randint(1, 1000):09d}",
                "o_shippriority": 0,
                "o_comment": " ".join(rnd.choices(_WORDS, k=rnd.randint(3, 9))),
            }
        )
    return [rows[i : i + BATCH] for i in range(0, total, BATCH)]


def ours(fmt: str) -> Callable[[str, list[list[dict[str, Any]]]], None]:
    def run(path: str, batches: list[list[dict[str, Any]]]) -> None:
        with open(path, "wb") as out:
            writer = open_writer(fmt, out, ORDERS_COLUMNS, time_zone="Asia/Shanghai")
            for batch in batches:
                writer.write_rows(batch)
            writer.close()

    return run


def _plain(value: Any) -> Any:
    # What a fair caller of the libraries has to do anyway: Decimal -> float.
    return float(value) if isinstance(value, Decimal) else value


def openpyxl_write_only(path: str, batches: list[list[dict[str, Any]]]) -> None:
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Sheet1")
    keys = [c.key for c in ORDERS_COLUMNS]
    sheet.append([c.title for c in ORDERS_COLUMNS])
    for batch in batches:
        for row in batch:
            sheet.append([_plain(row.get(k)) for k in keys])
    workbook.save(path)


def xlsxwriter_constant_memory(path: str, batches: list[list[dict[str, Any]]]) -> None:
    import xlsxwriter

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
                elif isinstance(value, Decimal):
                    sheet.write_number(r, c, float(value), money)
                else:
                    sheet.write(r, c, value)
            r += 1
    workbook.close()


def _timed(
    run: Callable[[str, list[list[dict[str, Any]]]], None],
    path: str,
    batches: list[list[dict[str, Any]]],
) -> tuple[float, float]:
    """Wall seconds and CPU seconds (all threads of this process) of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(path, batches)
    return time.perf_counter() - wall, time.process_time() - cpu


def _cases() -> Iterator[tuple[str, str, Callable[[str, list[list[dict[str, Any]]]], None]]]:
    yield "export_center CSV", "/tmp/bench_orders_ours.csv", ours("csv")
    yield "export_center XLSX", "/tmp/bench_orders_ours.xlsx", ours("xlsx")
    yield "openpyxl write_only", "/tmp/bench_orders_openpyxl.xlsx", openpyxl_write_only
    yield (
        "XlsxWriter constant_memory",
        "/tmp/bench_orders_xlsxwriter.xlsx",
        xlsxwriter_constant_memory,
    )


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    batches = make_batches(total)
    results: dict[str, tuple[float, float, int]] = {}
    for name, path, run in _cases():
        try:
            wall, cpu = _timed(run, path, batches)
        except ImportError as exc:
            print(f"{name:28s} skipped: {exc}")
            continue
        results[name] = (total / wall, total / cpu, os.path.getsize(path))
    base_wall, base_cpu, _ = results.get("openpyxl write_only", (0.0, 0.0, 0))
    print(
        f"{total:,} ORDERS rows, 12 columns, batches of {BATCH:,} (load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)"
    )
    print(f"{'writer':28s} {'rows/s':>10s} {'rows/cpu-s':>11s} {'size MB':>8s}  vs openpyxl")
    for name, (wall_rate, cpu_rate, size) in results.items():
        ratio = (
            f"{wall_rate / base_wall:5.2f}x (cpu {cpu_rate / base_cpu:5.2f}x)" if base_wall else ""
        )
        print(f"{name:28s} {wall_rate:10,.0f} {cpu_rate:11,.0f} {size / 1e6:8.2f}  {ratio}")


if __name__ == "__main__":
    main()
