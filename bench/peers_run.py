"""One "peer" in this process, measured: what a user would write instead of the service.

The ``peers`` part of ``python -m bench`` runs each peer in its own subprocess, so
that the peak RSS (``VmHWM``) and the CPU seconds of this process belong to that one
dump. A peer reads the ORDERS sample (``orders`` joined with ``customer``, the 12
columns of ``ORDERS_COLUMNS`` in their order, ordered by ``o_orderkey``, DECIMAL as
exact text and DATE as ISO text: the ORDERS provider's SELECT) and writes one file:

* ``query``: the query alone, rows discarded;
* ``csv``: the ``csv`` module's writer (``QUOTE_MINIMAL``, CRLF), UTF-8 with a BOM,
  a header of the column titles, values as the cursor gives them;
* ``xlsxwriter``: an XlsxWriter ``constant_memory`` workbook, one typed write per
  cell (INTEGER number, STRING ``write_string``, DECIMAL as ``float`` with a
  ``#,##0.00`` format, DATE as a date with ``yyyy-mm-dd``);
* ``openpyxl``: an openpyxl ``write_only`` workbook, ``append`` per row (DECIMAL as
  ``float``, DATE as a ``date``);
* ``pandas_csv``: ``pandas.read_sql(chunksize=5000)``, each chunk ``to_csv`` into one
  UTF-8-with-BOM file (pandas' defaults otherwise: LF row ends);
* ``pandas_xlsx``: ``pandas.read_sql(chunksize=5000)`` concatenated into one
  DataFrame (DECIMAL ``astype(float)``, DATE ``to_datetime``), then ``to_excel``
  with pandas' default engine (XlsxWriter when installed, else openpyxl).

Paging: the first four peers use the provider's keyset query on the raw DB-API cursor
(``sqlite3`` or PyMySQL), one ``execute`` + ``fetchall`` per page of 5,000 rows
(``o_orderkey > last key AND o_orderkey <= MAX(o_orderkey) ... LIMIT 5000``); the
pandas peers run the same SELECT without keyset once and pandas fetches it with
``fetchmany(5000)`` (PyMySQL's default cursor still holds the whole result in the
client). SQLite is opened read-only, with its default page cache. Neither peer guards
formulas (the service prefixes ``= + - @`` in STRING cells).

Timed: connect -> file closed, after the imports. Result keys: ``peer``, ``rows``,
``seconds``, ``rowsPerSecond``, ``cpuSeconds`` (this process, all threads; the
MariaDB server's CPU is not in it), ``rssStartMb`` (after the imports),
``peakRssMb`` (``VmHWM``), ``bytes`` (the file; 0 for ``query``), ``paging``,
``pageRows``, ``library`` (name and version), and ``engine`` for ``pandas_xlsx``.

Usage::

    python -m bench.peers_run --spec FILE --peer NAME --out PATH [--json FILE]

``--spec`` is the JSON file ``bench.peers`` writes: ``connect`` (``{"driver":
"sqlite3", "database": PATH}`` or ``{"driver": "pymysql", "host", "port", "user",
"password", "database"}`` plus ``url``, the SQLAlchemy URL pandas uses), ``pageSql``
(keyset page, three placeholders: after, max key, limit), ``maxKeySql``, ``fullSql``
(the whole SELECT, columns named by their keys), ``keys``, ``titles``, ``types`` (the
column types of ``ORDERS_COLUMNS``) and ``pageRows``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.procs import status_mb

Page = Sequence[Sequence[Any]]
PEERS = ("query", "csv", "xlsxwriter", "openpyxl", "pandas_csv", "pandas_xlsx")
"""Peer names, in the order ``bench.peers`` runs them."""
_LIBRARY = {"xlsxwriter": "xlsxwriter", "openpyxl": "openpyxl"}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def connect(spec: dict[str, Any]) -> Any:
    """A DB-API connection from ``spec["connect"]``: ``sqlite3`` read-only, or PyMySQL."""
    how = spec["connect"]
    if how["driver"] == "sqlite3":
        import sqlite3

        return sqlite3.connect(f"file:{how['database']}?mode=ro", uri=True)
    import pymysql

    return pymysql.connect(
        host=how["host"],
        port=int(how["port"]),
        user=how["user"],
        password=how["password"],
        database=how["database"],
        charset="utf8mb4",
    )


def keyset_pages(conn: Any, spec: dict[str, Any]) -> Iterator[Page]:
    """The ORDERS rows as pages of ``spec["pageRows"]`` row tuples, by keyset.

    One ``execute`` + ``fetchall`` per page, as the provider reads a batch; the upper
    bound is ``MAX(o_orderkey)`` read first (the provider's snapshot). Stops after the
    first short page.
    """
    size = int(spec["pageRows"])
    cur = conn.cursor()
    try:
        cur.execute(spec["maxKeySql"])
        max_key = int(cur.fetchone()[0] or 0)
        after = 0
        while True:
            cur.execute(spec["pageSql"], (after, max_key, size))
            rows = cur.fetchall()
            if rows:
                yield rows
            if len(rows) < size:
                return
            after = rows[-1][0]
    finally:
        cur.close()


Extra = dict[str, Any]
"""Result keys a peer adds (``engine`` of ``pandas_xlsx``)."""


def _query(pages: Iterator[Page], path: Path, spec: dict[str, Any]) -> tuple[int, Extra]:
    return sum(len(rows) for rows in pages), {}


def _csv(pages: Iterator[Page], path: Path, spec: dict[str, Any]) -> tuple[int, Extra]:
    import csv

    count = 0
    with open(path, "w", encoding="utf-8-sig", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(spec["titles"])
        for rows in pages:
            writer.writerows(rows)
            count += len(rows)
    return count, {}


def _xlsxwriter(pages: Iterator[Page], path: Path, spec: dict[str, Any]) -> tuple[int, Extra]:
    import xlsxwriter

    workbook = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    sheet = workbook.add_worksheet("Orders")
    day = workbook.add_format({"num_format": "yyyy-mm-dd"})
    money = workbook.add_format({"num_format": "#,##0.00"})
    sheet.write_row(0, 0, spec["titles"])

    def decimal(r: int, c: int, value: Any) -> Any:
        return sheet.write_number(r, c, float(value), money)

    def date(r: int, c: int, value: Any) -> Any:
        return sheet.write_datetime(r, c, dt.date.fromisoformat(value), day)

    by_type: dict[str, Callable[[int, int, Any], Any]] = {
        "INTEGER": sheet.write_number,
        "STRING": sheet.write_string,
        "DECIMAL": decimal,
        "DATE": date,
    }
    cells = list(enumerate(by_type[t] for t in spec["types"]))
    r = 0
    for rows in pages:
        for row in rows:
            r += 1
            for c, write in cells:
                value = row[c]
                if value is not None:
                    write(r, c, value)
    workbook.close()
    return r, {}


def _openpyxl(pages: Iterator[Page], path: Path, spec: dict[str, Any]) -> tuple[int, Extra]:
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Orders")
    sheet.append(spec["titles"])
    decimals = [i for i, t in enumerate(spec["types"]) if t == "DECIMAL"]
    dates = [i for i, t in enumerate(spec["types"]) if t == "DATE"]
    count = 0
    for rows in pages:
        for row in rows:
            values = list(row)
            for i in decimals:
                if values[i] is not None:
                    values[i] = float(values[i])
            for i in dates:
                if values[i] is not None:
                    values[i] = dt.date.fromisoformat(values[i])
            sheet.append(values)
        count += len(rows)
    workbook.save(str(path))
    return count, {}


def _pandas_source(spec: dict[str, Any]) -> Any:
    """What pandas reads from: the sqlite3 connection, or a SQLAlchemy engine for
    MariaDB (pandas supports no other DB-API connection)."""
    if spec["connect"]["driver"] == "sqlite3":
        return connect(spec)
    from sqlalchemy import create_engine

    return create_engine(spec["connect"]["url"])


def _pandas_csv(
    pages: Iterator[Page] | None, path: Path, spec: dict[str, Any]
) -> tuple[int, Extra]:
    pd = importlib.import_module("pandas")
    count = 0
    with open(path, "w", encoding="utf-8-sig", newline="") as out:
        chunks = pd.read_sql(spec["fullSql"], _pandas_source(spec), chunksize=spec["pageRows"])
        for chunk in chunks:
            chunk.to_csv(out, index=False, header=spec["titles"] if count == 0 else False)
            count += len(chunk)
    return count, {}


def _pandas_xlsx(
    pages: Iterator[Page] | None, path: Path, spec: dict[str, Any]
) -> tuple[int, Extra]:
    pd = importlib.import_module("pandas")
    chunks = pd.read_sql(spec["fullSql"], _pandas_source(spec), chunksize=spec["pageRows"])
    frame = pd.concat(list(chunks), ignore_index=True)
    for key, kind in zip(spec["keys"], spec["types"], strict=True):
        if kind == "DECIMAL":
            frame[key] = frame[key].astype(float)
        elif kind == "DATE":
            frame[key] = pd.to_datetime(frame[key], format="%Y-%m-%d")
    with pd.ExcelWriter(path, date_format="yyyy-mm-dd", datetime_format="yyyy-mm-dd") as out:
        frame.to_excel(out, sheet_name="Orders", index=False, header=spec["titles"])
        engine = out.engine
    return len(frame), {"engine": engine}


_RUN: dict[str, Callable[[Any, Path, dict[str, Any]], tuple[int, Extra]]] = {
    "query": _query,
    "csv": _csv,
    "xlsxwriter": _xlsxwriter,
    "openpyxl": _openpyxl,
    "pandas_csv": _pandas_csv,
    "pandas_xlsx": _pandas_xlsx,
}


def _library(peer: str) -> str:
    """``name version`` of the library a peer writes with (imported here, untimed)."""
    name = "pandas" if peer.startswith("pandas") else _LIBRARY.get(peer)
    if name is None:
        return f"Python {sys.version.split()[0]}"
    module = importlib.import_module(name)
    return f"{name} {getattr(module, '__version__', '?')}"


def run_peer(spec: dict[str, Any], peer: str, out: Path) -> dict[str, Any]:
    """Run ``peer`` once over the sample described by ``spec``, writing ``out``.

    Returns:
        The result keys of the module docstring (seconds and CPU seconds in s, RSS in
        MiB, ``bytes`` of the file, which is deleted afterwards).
    """
    library = _library(peer)  # imports before the clock (pandas alone takes ~0.5 s)
    if spec["connect"]["driver"] == "pymysql":
        import pymysql  # noqa: F401
    else:
        import sqlite3  # noqa: F401
    rss_start = status_mb("VmRSS") or 0.0
    cpu = _cpu_seconds()
    started = time.perf_counter()
    if peer.startswith("pandas"):
        rows, extra = _RUN[peer](None, out, spec)
    else:
        conn = connect(spec)
        try:
            rows, extra = _RUN[peer](keyset_pages(conn, spec), out, spec)
        finally:
            conn.close()
    seconds = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu
    size = out.stat().st_size if out.exists() else 0
    out.unlink(missing_ok=True)
    peak = status_mb("VmHWM")
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    result: dict[str, Any] = {
        "peer": peer,
        "rows": rows,
        "seconds": round(seconds, 3),
        "rowsPerSecond": round(rows / seconds, 1) if seconds > 0 else None,
        "cpuSeconds": round(cpu, 3),
        "rssStartMb": round(rss_start, 1),
        "peakRssMb": round(peak, 1),
        "bytes": size,
        "paging": "fetchmany" if peer.startswith("pandas") else "keyset",
        "pageRows": int(spec["pageRows"]),
        "library": library,
        **extra,
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers_run", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--spec", type=Path, required=True, help="JSON written by bench.peers")
    parser.add_argument("--peer", choices=PEERS, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the file to write")
    parser.add_argument(
        "--json", type=Path, default=None, help="write the result here (default: stdout)"
    )
    args = parser.parse_args(argv)
    spec = json.loads(args.spec.read_text())
    result = run_peer(spec, args.peer, args.out)
    text = json.dumps(result, indent=2) + "\n"
    if args.json:
        args.json.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
