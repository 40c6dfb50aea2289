"""The ``peers`` part: what a user would write instead of the service, measured.

On the same TPC-H sample as the ``e2e`` part (prepared by
:func:`bench.e2e.prepare_sample`: the SQLite file under the bench data directory, or
the MariaDB database), each peer of ``bench.peers_run`` dumps all ORDERS rows with
the ORDERS provider's SELECT (``providers.samples``: ``orders`` joined with
``customer``, the 12 columns of ``ORDERS_COLUMNS``, ordered by ``o_orderkey``, DECIMAL
as exact text, DATE as ISO text) in pages of 5,000 rows: keyset pages on the raw
DB-API cursor, or ``fetchmany`` through ``pandas.read_sql(chunksize=5000)``.

Each run is its own ``python -m bench.peers_run`` subprocess, so its peak RSS and CPU
seconds belong to that one dump. Peers whose library is not importable (pandas is
not a dependency; XlsxWriter is a test dependency) are skipped with a note.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from bench.e2e import e2e_subprocess, prepare_sample
from bench.peers_run import PEERS
from providers.samples import ORDERS_COLUMNS, _Dialect

__all__ = ["PAGE_ROWS", "PEERS", "PEER_LABELS", "run_peers", "sample_spec"]

PAGE_ROWS = 5_000
"""Rows per page, as the ORDERS export type's ``batch_size``."""

PEER_LABELS = {
    "query": "query only (rows discarded)",
    "csv": "csv.writer",
    "xlsxwriter": "XlsxWriter constant_memory",
    "openpyxl": "openpyxl write_only",
    "pandas_csv": "pandas read_sql + to_csv",
    "pandas_xlsx": "pandas read_sql + to_excel",
}
"""Peer name -> label of the report."""

_REQUIRES = {
    "xlsxwriter": "xlsxwriter",
    "openpyxl": "openpyxl",
    "pandas_csv": "pandas",
    "pandas_xlsx": "pandas",
}
_EXTENSION = {"query": "none", "csv": "csv", "pandas_csv": "csv"}


def sample_spec(sample_dir: Path, scale: float, database_url: str | None) -> dict[str, Any]:
    """The ``--spec`` of ``bench.peers_run`` for the sample a ``bench.e2e_run`` of
    these arguments reads (``resolved_sample_database_url`` of its settings).

    Returns:
        ``{connect, pageSql, maxKeySql, fullSql, keys, titles, types, pageRows}``; the
        SQL is the ORDERS provider's row query (``providers.samples._Dialect``).

    Raises:
        ValueError: the sample database is neither SQLite nor MySQL/MariaDB.
    """
    from bench.e2e_run import _settings

    url = make_url(_settings(sample_dir, scale, database_url).resolved_sample_database_url)
    backend = url.get_backend_name()
    connect: dict[str, Any]
    if backend == "sqlite":
        connect = {"driver": "sqlite3", "database": url.database}
        dialect = _Dialect("sqlite", "qmark")
    elif backend in ("mysql", "mariadb"):
        connect = {
            "driver": "pymysql",
            "host": url.host or "127.0.0.1",
            "port": url.port or 3306,
            "user": url.username,
            "password": url.password,
            "database": url.database,
            "url": url.render_as_string(hide_password=False),
        }
        dialect = _Dialect("mysql", "format")
    else:
        raise ValueError(f"peers: unsupported sample database {backend!r}")
    keys = [c.key for c in ORDERS_COLUMNS]
    selected = ", ".join(f"{e} AS {k}" for e, k in zip(dialect.exprs, keys, strict=True))
    return {
        "connect": connect,
        "pageSql": dialect.rows_sql(""),
        "maxKeySql": "SELECT MAX(o_orderkey) FROM orders",
        "fullSql": (
            f"SELECT {selected} FROM orders o JOIN customer c ON c.c_custkey = o.o_custkey"
            " ORDER BY o.o_orderkey"
        ),
        "keys": keys,
        "titles": [c.title for c in ORDERS_COLUMNS],
        "types": [c.type for c in ORDERS_COLUMNS],
        "pageRows": PAGE_ROWS,
    }


def _missing(peer: str) -> str | None:
    """Why ``peer`` cannot run here (its library is not importable), or None."""
    module = _REQUIRES.get(peer)
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return f"{module} not installed"


def run_peers(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scale: float,
    repeat: int = 1,
    say: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    """Prepare the sample of ``scale`` (as the e2e part does), then run every peer.

    Args:
        data_dir: the bench data directory (one sub-directory per database and scale).
        database: ``sqlite`` or ``mariadb`` (a label; the URL decides).
        database_url: None for the embedded SQLite file of that sub-directory.
        scale: TPC-H scale factor (0.27: 405,000 orders).
        repeat: rounds (each round runs every peer once); each peer keeps its fastest.

    Returns:
        ``{peer: result}`` with the keys of ``bench.peers_run`` (``seconds``,
        ``rowsPerSecond``, ``peakRssMb`` in MiB, ``cpuSeconds``, ``bytes``, ``rows``,
        ...) plus ``loadAverage`` (1-minute load before the run) and ``runs`` (seconds
        of every run); a peer whose library is missing is ``{"skipped": reason}``.
    """
    common = prepare_sample(
        data_dir=data_dir, database=database, database_url=database_url, scale=scale, say=say
    )
    spec = sample_spec(Path(common[common.index("--data-dir") + 1]), scale, database_url)
    skipped = {p: why for p in PEERS if (why := _missing(p)) is not None}
    for peer, why in skipped.items():
        say(f"  {database} {peer:12s} skipped: {why}")
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="ec-bench-peers-") as tmp:
        spec_path = Path(tmp) / "spec.json"  # the directory is private: the URL has a password
        spec_path.write_text(json.dumps(spec))
        for _ in range(max(1, repeat)):
            for peer in PEERS:
                if peer in skipped:
                    continue
                target = Path(tmp) / f"{peer}.{_EXTENSION.get(peer, 'xlsx')}"
                load = os.getloadavg()[0]
                result = e2e_subprocess(
                    ["--spec", str(spec_path), "--peer", peer, "--out", str(target)],
                    timeout=3600,
                    module="bench.peers_run",
                )
                result["loadAverage"] = round(load, 2)
                runs.setdefault(peer, []).append(result)
                say(
                    f"  {database} {peer:12s} {result['rows']:>9,} rows "
                    f"{result['seconds']:7.2f} s {result['rowsPerSecond']:>9,.0f} rows/s  "
                    f"peak RSS {result['peakRssMb']:.0f} MB  CPU {result['cpuSeconds']:.1f} s"
                    f"  (load {load:.2f})"
                )
    out: dict[str, dict[str, Any]] = {}
    for peer in PEERS:
        if peer in skipped:
            out[peer] = {"skipped": skipped[peer]}
            continue
        best = min(runs[peer], key=lambda r: r["seconds"])
        best["runs"] = [r["seconds"] for r in runs[peer]]
        out[peer] = best
    return out
