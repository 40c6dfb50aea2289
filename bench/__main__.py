"""Side-by-side benchmark of the writers, whole exports, their peers and the API.

Usage::

    python -m bench [--quick] [--json FILE] [--repeat N]
                    [--only writer,e2e,file_formats,stages,peers,scaling,storage,cluster,
                            shards,load,big]
                    [--data-dir DIR] [--no-mariadb] [--big-scale 7]
                    [--big-formats csv,xlsx] [--big-prepare-only]

Ten parts (and ``big``, run only when named), printed as Markdown tables and
written to ``--json`` (default ``bench-results.json``):

* ``writer``: the ORDERS columns, 200,000 rows (``--quick``: 20,000) through our XLSX
  writer, openpyxl write-only, XlsxWriter constant-memory and our CSV writer, in this
  one process: rows/s, rows per CPU second, ratio to openpyxl.
* ``e2e``: the demo path (create over HTTP -> outbox -> transport -> provider over
  HTTP -> file -> download) on all 405,000 orders (TPC-H scale 0.27; ``--quick``
  0.01), CSV and XLSX, on SQLite and on MariaDB (``EXPORT_CENTER_BENCH_MARIADB_URL``,
  else the ``scripts/mariadb.sh`` server when it runs, else skipped with a note); each
  export runs in its own subprocess, whose peak RSS is the worker's; the sample
  providers run in their own child process, as in the embedded default, with their
  CPU seconds and peak RSS reported apart.
* ``file_formats``: the same export as ``e2e`` as CSV, JSON Lines and Parquet, rounds
  alternating the order, ratios to CSV and issue 23's goals (1.5x time, +50 MB peak
  RSS), then one CSV export split into parts of 100,000 rows (``--quick``: 4,000)
  checked against the API manifest (``bench.file_formats``).
* ``stages``: the worker's share of one export split into its stages (decode,
  convert, CSV write, XLSX render and assembly), timed one by one in one thread on the
  e2e sample (``bench.stages``): CPU seconds per 100k rows of each, and the same rows
  decoded and converted as JSON objects for comparison.
* ``peers``: what a user would write instead of the service, on the same sample and
  databases as ``e2e`` (``bench.peers``): the ORDERS provider's query alone, the
  ``csv`` module, XlsxWriter constant-memory, openpyxl write-only, and pandas
  ``read_sql`` + ``to_csv`` / ``to_excel`` when pandas is installed; pages of 5,000
  rows, each dump in its own subprocess: seconds, rows/s, peak RSS, CPU seconds,
  bytes.
* ``scaling``: TPC-H scale 0.07, 0.27 and 1.0 (``--quick``: 0.01 and 0.03) on SQLite,
  CSV and XLSX: seconds per 100k rows and peak RSS at each size.
* ``storage``: the e2e export of all orders on SQLite, CSV and XLSX, stored in S3
  (``bench.storage``: the ``scripts/s3proxy.sh`` server or
  ``EXPORT_CENTER_BENCH_S3_ENDPOINT``) and in the local directory: seconds and the
  ratio S3 / local.
* ``shards``: a provider taking 100 ms per page, one export of 8 day shards with 1
  and then 4 shards at once (``bench.shards``): seconds, the speed-up, and whether the
  two files are byte-identical; then, on MariaDB, the ORDERS sample over every order
  date (16 day shards) as CSV with 1 and with 4 shards at once.
* ``load``: the API under load (``bench.load``): 100,000 ended tasks seeded
  (``--quick``: 10,000), ``export-center serve`` on them, 32 clients for 30 s
  (``--quick``: 5 s) mixing create, detail and list, on SQLite and on MariaDB (its own
  database ``export_center_bench_load``), each with one API process and with ``serve
  --workers 2``: p50/p99/max per route, requests/s, 5xx, "database is locked" and
  creates waiting on create-guard rows; and the EXPLAIN of the list, detail, create, publisher and
  reconciler statements (``python -m bench.load --explain`` prints them alone).
* ``cluster``: the ``deploy/cluster`` recipe (2 APIs, 3 workers, MariaDB, the broker,
  S3): one full CSV export alone, then 8 at once; aggregate rows/s, the ratio, and the
  CPU-seconds of every group of processes (``bench.cluster``).
* ``distributed`` (only with ``--only``): sharded exports on the cluster recipe with
  distributed shards (``bench.distributed``): every order of TPC-H scale
  ``--distributed-scale`` (default 7) in one ``--distributed-format`` export (XLSX) on
  1 and on 3 workers: seconds, the ratio, the core ceiling, whether the files are the
  same; then ``--distributed-kills`` (10) CSV exports of the e2e sample, each with one
  worker holding shards killed -9 at a random moment: exact or not, rows fetched again.
* ``big`` (only with ``--only``): all orders of TPC-H scale ``--big-scale`` (default
  7: 10,500,000 orders) in one e2e export, CSV and XLSX, on SQLite and MariaDB, against
  the 405,000-order e2e run of the same database and format (``bench.big``): seconds
  per 100k rows, peak RSS, CPU seconds, and for XLSX the sheets (one per 1,048,575
  rows, each starting with the header). ``--big-prepare-only`` only generates and
  loads the samples (scale 7: about 6 GB of disk, and up to 5 GB more while an export
  runs; see bench/README.md).

``goals`` lists the issue's targets as computed values; nothing is asserted. The
samples are generated once and kept under ``--data-dir`` (default
``.export-center/bench``; scale 1.0 needs about 1 GB of disk).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.big import BIG_DATABASE, BIG_SCALE, big_mariadb_urls, run_big
from bench.cluster import broker_endpoint, run_cluster
from bench.distributed import distributed_goals, run_distributed
from bench.e2e import ROOT, mariadb_url, run_e2e, run_matrix, server_database_url
from bench.file_formats import file_formats_goals, run_file_formats_part
from bench.goals import CLUSTER_EXPORTS, compute_goals
from bench.load import load_mariadb_url, run_load
from bench.peers import run_peers
from bench.report import print_report
from bench.shards import run_shards, run_shards_database
from bench.stages import run_stages
from bench.storage import run_storage, s3_server
from bench.writers import run_writers

FULL: dict[str, Any] = {
    "writer_rows": 200_000,
    "e2e_scale": 0.27,
    "scaling": [0.07, 0.27, 1.0],
    "load_tasks": 100_000,
    "load_seconds": 30.0,
}
QUICK: dict[str, Any] = {
    "writer_rows": 20_000,
    "e2e_scale": 0.01,
    "scaling": [0.01, 0.03],
    "load_tasks": 10_000,
    "load_seconds": 5.0,
}
PARTS = "writer,e2e,file_formats,stages,peers,scaling,storage,cluster,shards,load"
"""The default parts; ``big`` runs only when ``--only`` names it."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--json", type=Path, default=Path("bench-results.json"), help="result file")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per export; the fastest is kept"
    )
    parser.add_argument("--only", default=PARTS, help="comma-separated parts to run")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("EXPORT_CENTER_BENCH_DIR", ROOT / ".export-center" / "bench")),
    )
    parser.add_argument(
        "--no-mariadb", action="store_true", help="skip the MariaDB end-to-end runs"
    )
    parser.add_argument(
        "--big-scale",
        type=float,
        default=BIG_SCALE,
        help=f"TPC-H scale of the big part (default {BIG_SCALE:g}: 10,500,000 orders)",
    )
    parser.add_argument(
        "--big-formats", default="csv,xlsx", help="formats of the big part (csv,xlsx)"
    )
    parser.add_argument(
        "--big-prepare-only",
        action="store_true",
        help="big part: only generate and load the samples (timed, disk reported)",
    )
    parser.add_argument(
        "--distributed-scale",
        type=float,
        default=BIG_SCALE,
        help="TPC-H scale of the distributed part's speed-up export (default: the big scale)",
    )
    parser.add_argument(
        "--distributed-format", default="xlsx", help="format of that export (csv, xlsx)"
    )
    parser.add_argument(
        "--distributed-kills", type=int, default=10, help="kill -9 runs of the distributed part"
    )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    data_dir = args.data_dir.resolve()
    say = print
    try:
        from export_center.writers import xlsx as _xlsx

        isal = _xlsx._isal_zlib is not None
    except ImportError:  # pragma: no cover
        isal = False
    results: dict[str, Any] = {
        "quick": args.quick,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadAverageStart": round(os.getloadavg()[0], 2),
            "isal": isal,
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    say(
        f"bench: {', '.join(sorted(parts))}; data under {data_dir}; load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    if "writer" in parts:
        say(f"writers: {sizes['writer_rows']:,} ORDERS rows")
        writer = run_writers(sizes["writer_rows"], repeat=args.repeat, say=say)
        results["writer"] = writer["writers"]
        results["writerRows"] = writer["rows"]
        results["writerLoad"] = writer["loadAverage"]
        results["openpyxlUsesLxml"] = writer["openpyxlUsesLxml"]
    if "e2e" in parts:
        scale = sizes["e2e_scale"]
        say(f"end to end: TPC-H scale {scale}")
        e2e: dict[str, Any] = {
            "sqlite": run_e2e(
                data_dir=data_dir,
                database="sqlite",
                database_url=None,
                scale=scale,
                repeat=args.repeat,
                say=say,
            )
        }
        url, source = (None, "--no-mariadb") if args.no_mariadb else mariadb_url()
        if url is None:
            say(f"  mariadb: skipped ({source})")
            e2e["mariadb"] = {"skipped": source}
        else:
            say(f"  mariadb: {source}")
            e2e["mariadb"] = run_e2e(
                data_dir=data_dir,
                database="mariadb",
                database_url=url,
                scale=scale,
                repeat=args.repeat,
                say=say,
            )
        results["e2e"] = e2e
    if "file_formats" in parts:
        results["fileFormats"] = run_file_formats_part(
            data_dir=data_dir,
            quick=args.quick,
            repeat=args.repeat,
            no_mariadb=args.no_mariadb,
            say=say,
        )
    if "stages" in parts:
        scale = sizes["e2e_scale"]
        say(f"stages: the worker's share of one export, stage by stage, TPC-H scale {scale}")
        results["stages"] = run_stages(data_dir / f"sqlite-sf{scale}", scale, args.repeat)
    if "peers" in parts:
        scale = sizes["e2e_scale"]
        say(f"peers: the same dump without the service, TPC-H scale {scale}")
        peers: dict[str, Any] = {
            "sqlite": run_peers(
                data_dir=data_dir,
                database="sqlite",
                database_url=None,
                scale=scale,
                repeat=args.repeat,
                say=say,
            )
        }
        url, source = (None, "--no-mariadb") if args.no_mariadb else mariadb_url()
        if url is None:
            say(f"  mariadb: skipped ({source})")
            peers["mariadb"] = {"skipped": source}
        else:
            peers["mariadb"] = run_peers(
                data_dir=data_dir,
                database="mariadb",
                database_url=url,
                scale=scale,
                repeat=args.repeat,
                say=say,
            )
        results["peers"] = peers
    if "scaling" in parts:
        say(f"scaling on SQLite: TPC-H scales {', '.join(map(str, sizes['scaling']))}")
        points = []
        matrix = run_matrix(
            data_dir=data_dir,
            database="sqlite",
            database_url=None,
            scales=list(sizes["scaling"]),
            repeat=args.repeat,
            say=say,
        )
        for scale, runs in matrix.items():
            for fmt, r in runs.items():
                points.append(
                    {
                        "format": fmt,
                        "scale": scale,
                        "rows": r["rows"],
                        "seconds": r["seconds"],
                        "secondsPer100k": round(r["seconds"] / r["rows"] * 100_000, 3),
                        "rowsPerSecond": r["rowsPerSecond"],
                        "peakRssMb": r["peakRssMb"],
                        "rssStartMb": r["rssStartMb"],
                        "loadAverage": r["loadAverage"],
                    }
                )
        results["scaling"] = points
    if "storage" in parts or "cluster" in parts:
        server, s3_source = s3_server()
        say(f"S3: {s3_source}")
    if "storage" in parts:
        scale = sizes["e2e_scale"]
        if server is None:
            results["storage"] = {"skipped": s3_source}
        else:
            say(f"storage: S3 against a local directory, SQLite, TPC-H scale {scale}")
            results["storage"] = run_storage(
                data_dir=data_dir,
                database="sqlite",
                database_url=None,
                scale=scale,
                server=server,
                repeat=args.repeat,
                say=say,
            )
    if "cluster" in parts:
        scale = sizes["e2e_scale"]
        url, source = (None, "--no-mariadb") if args.no_mariadb else mariadb_url()
        broker, broker_source = broker_endpoint()
        missing = [
            m for m, ok in ((source, url), (broker_source, broker), (s3_source, server)) if not ok
        ]
        if url is None or broker is None or server is None:
            results["cluster"] = {"skipped": "; ".join(missing)}
            say(f"cluster: skipped ({'; '.join(missing)})")
        else:
            say(f"cluster: 1 then {CLUSTER_EXPORTS} full CSV exports, TPC-H scale {scale}")
            results["cluster"] = run_cluster(
                data_dir=data_dir,
                sample_url=url,
                broker=broker,
                server=server,
                scale=scale,
                concurrent=CLUSTER_EXPORTS,
                repeat=args.repeat,
                say=say,
            )
    if "shards" in parts:
        say("shards: a 100 ms/page provider, 1 then 4 shards at once")
        results["shards"] = run_shards()
        url, source = (None, "--no-mariadb") if args.no_mariadb else mariadb_url()
        if url is None:
            results["shards"]["mariadb"] = {"skipped": source}
        else:
            say("shards: ORDERS over every date (day shards) on MariaDB, 1 then 4 at once")
            results["shards"]["mariadb"] = run_shards_database(
                data_dir=data_dir,
                database="mariadb",
                database_url=url,
                scale=sizes["e2e_scale"],
                repeat=args.repeat,
                say=say,
            )
    if "load" in parts:
        say(
            f"load: {sizes['load_tasks']:,} seeded tasks, 32 clients for "
            f"{sizes['load_seconds']:g} s, SQLite and MariaDB"
        )
        load: dict[str, Any] = {}
        databases: list[tuple[str, str | None]] = [("sqlite", None)]
        if args.no_mariadb:
            load["mariadb"] = {"skipped": "--no-mariadb"}
        else:
            url, source = load_mariadb_url()
            say(f"  mariadb: {source}")
            if url is None:
                load["mariadb"] = {"skipped": source}
            else:
                databases.append(("mariadb", url))
        # With serve --workers 2 the exports run in a separate worker process when the
        # broker runs (the setting); else in the server's parent, as with one.
        broker, broker_source = broker_endpoint()
        if broker is None:
            say(f"  exports in the server for serve --workers 2: no broker ({broker_source})")
        for database, url in databases:
            for api_workers in (1, 2):  # one API process, and serve --workers 2 beside it
                label = database if api_workers == 1 else f"{database}-api{api_workers}"
                # Every run seeds a fresh database: MariaDB's is dropped and created again.
                fresh = None if url is None else load_mariadb_url()[0]
                load[label] = run_load(
                    data_dir=data_dir,
                    database=label,
                    database_url=fresh,
                    tasks=sizes["load_tasks"],
                    seconds=sizes["load_seconds"],
                    api_workers=api_workers,
                    broker=broker if api_workers > 1 else None,
                    say=say,
                )
        results["load"] = dict(sorted(load.items(), key=lambda kv: kv[0] != "sqlite"))
    if "big" in parts:
        formats = tuple(f.strip() for f in args.big_formats.split(",") if f.strip())
        say(f"big: TPC-H scale {args.big_scale:g}, {', '.join(formats)}")
        targets: dict[str, tuple[str | None, str | None]] = {"sqlite": (None, None)}
        urls, source = (None, "--no-mariadb") if args.no_mariadb else big_mariadb_urls()
        if urls is None:
            say(f"  mariadb: skipped ({source})")
        else:
            say(f"  mariadb: {source}")
            targets["mariadb"] = urls
        results["big"] = run_big(
            data_dir=data_dir,
            targets=targets,
            scale=args.big_scale,
            base_scale=sizes["e2e_scale"],
            formats=formats,
            repeat=args.repeat,
            e2e=results.get("e2e"),
            prepare_only=args.big_prepare_only,
            say=say,
        )
        if urls is None:
            results["big"]["mariadb"] = {"skipped": source}
    if "distributed" in parts:
        _distributed(args, sizes, data_dir, results, say)
    results["machine"]["loadAverageEnd"] = round(os.getloadavg()[0], 2)
    results["goals"] = compute_goals(results, args.quick)
    if "fileFormats" in results:
        results["goals"] += file_formats_goals(results["fileFormats"])
    if "distributed" in results:
        results["goals"] += distributed_goals(results["distributed"])
    report = print_report(results)
    say("")
    say(report)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    say(f"\nresults: {args.json}")
    return 0


def _distributed(
    args: argparse.Namespace,
    sizes: dict[str, Any],
    data_dir: Path,
    results: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """The ``distributed`` part (only when ``--only`` names it)."""
    scale = args.distributed_scale
    kill_url, source = mariadb_url()
    # The big part's sample when the scale is its own (one 10.5M-order sample for both).
    name = (
        BIG_DATABASE if scale == BIG_SCALE else f"export_center_bench_sf{scale:g}".replace(".", "_")
    )
    big_url, _ = server_database_url(name) if kill_url else (None, source)
    broker, broker_source = broker_endpoint()
    server, s3_source = s3_server()
    missing = [
        m for m, ok in ((source, big_url), (broker_source, broker), (s3_source, server)) if not ok
    ]
    if big_url is None or kill_url is None or broker is None or server is None:
        results["distributed"] = {"skipped": "; ".join(missing)}
        say(f"distributed: skipped ({'; '.join(missing)})")
        return
    say(
        f"distributed: TPC-H scale {scale:g} as {args.distributed_format} on 1 and 3 workers, "
        f"then {args.distributed_kills} kill -9 runs at scale {sizes['e2e_scale']:g}"
    )
    results["distributed"] = run_distributed(
        data_dir=data_dir,
        sample_url=big_url,
        kill_sample_url=kill_url,
        broker=broker,
        server=server,
        scale=scale,
        kill_scale=sizes["e2e_scale"],
        fmt=args.distributed_format,
        kills=args.distributed_kills,
        say=say,
    )


if __name__ == "__main__":
    sys.exit(main())
