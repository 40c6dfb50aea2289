"""The Markdown tables of a ``python -m bench`` result (also what bench/README.md shows)."""

from __future__ import annotations

from typing import Any

from bench.file_formats import file_formats_report
from bench.load import load_report
from bench.peers import PEER_LABELS
from bench.tables import markdown_table

__all__ = ["print_report"]

WRITER_LABELS = {
    "ours_xlsx": "export_center XLSX",
    "openpyxl_write_only": "openpyxl write_only",
    "xlsxwriter_constant_memory": "XlsxWriter constant_memory",
    "ours_csv": "export_center CSV",
    "python_csv": "Python csv module",
}


def print_report(results: dict[str, Any]) -> str:
    """The Markdown tables of a result (also what bench/README.md shows)."""
    out = []
    machine = results["machine"]
    out.append(
        f"Machine: {machine['cpus']} CPUs, Python {machine['python']}, load average "
        f"{machine['loadAverageStart']:.2f} at start, {machine['loadAverageEnd']:.2f} at end"
        f"{' (--quick)' if results['quick'] else ''}; "
        f"ISA-L deflate: {'yes' if machine['isal'] else 'no'}."
    )
    writers = results.get("writer")
    if writers:
        rows = []
        for name, r in writers.items():
            label = WRITER_LABELS.get(name, name)
            if "skipped" in r:
                rows.append([label, "skipped", "", "", ""])
                continue
            rows.append(
                [
                    label,
                    f"{r['rowsPerSecond']:,.0f}",
                    f"{r['rowsPerCpuSecond']:,.0f}",
                    f"{r.get('ratioToOpenpyxl', 0):.1f}x",
                    f"{r['bytes'] / 1e6:.1f}",
                ]
            )
        out.append(
            f"\nWriters, {results['writerRows']:,} ORDERS rows "
            f"(load {results['writerLoad']:.2f}):\n"
        )
        out.append(markdown_table(["writer", "rows/s", "rows/CPU-s", "vs openpyxl", "MB"], rows))
    e2e = results.get("e2e")
    if e2e:
        rows = []
        for database, formats in e2e.items():
            if "skipped" in formats:
                rows.append([database, "-", "skipped: " + formats["skipped"], "", "", "", "", ""])
                continue
            for fmt, r in formats.items():
                bare = results.get("writer", {}).get(f"ours_{fmt}", {}).get("rowsPerSecond")
                share = f"{r['rowsPerSecond'] / bare:.0%}" if bare else "-"
                rows.append(
                    [
                        database,
                        fmt,
                        f"{r['rows']:,}",
                        f"{r['seconds']:.1f}",
                        f"{r['rowsPerSecond']:,.0f}",
                        share,
                        f"{r['peakRssMb']:.0f}",
                        f"{r['loadAverage']:.2f}",
                    ]
                )
        out.append("\nEnd to end (create over HTTP -> provider over HTTP -> file -> download):\n")
        out.append(
            markdown_table(
                [
                    "database",
                    "format",
                    "rows",
                    "seconds",
                    "rows/s",
                    "of bare writer",
                    "peak RSS MB",
                    "load",
                ],
                rows,
                left=(0, 1),
            )
        )
    if results.get("fileFormats"):
        out.append(file_formats_report(results["fileFormats"], goals=False))
    peers = results.get("peers")
    if peers:
        rows = []
        for database, runs in peers.items():
            if "skipped" in runs:
                rows.append([database, "skipped: " + runs["skipped"], *[""] * 8])
                continue
            for name, r in runs.items():
                label = PEER_LABELS.get(name, name)
                if "skipped" in r:
                    rows.append([database, label, "skipped: " + r["skipped"], *[""] * 7])
                    continue
                rows.append(
                    [
                        database,
                        label,
                        f"{r['rows']:,}",
                        f"{r['seconds']:.2f}",
                        f"{r['rowsPerSecond']:,.0f}",
                        f"{r['peakRssMb']:.0f}",
                        f"{r['cpuSeconds']:.2f}",
                        f"{r['bytes'] / 1e6:.1f}",
                        r["paging"],
                        f"{r['loadAverage']:.2f}",
                    ]
                )
        out.append(
            "\nPeers (what a user would write instead: the provider's query, pages of "
            "5,000 rows, one subprocess each):\n"
        )
        out.append(
            markdown_table(
                [
                    "database",
                    "peer",
                    "rows",
                    "seconds",
                    "rows/s",
                    "peak RSS MB",
                    "CPU s",
                    "MB",
                    "paging",
                    "load",
                ],
                rows,
                left=(0, 1, 8),
            )
        )
    scaling = results.get("scaling")
    if scaling:
        rows = [
            [
                p["format"],
                f"{p['rows']:,}",
                f"{p['seconds']:.1f}",
                f"{p['secondsPer100k']:.2f}",
                f"{p['peakRssMb']:.0f}",
                f"{p['loadAverage']:.2f}",
            ]
            for p in sorted(scaling, key=lambda p: (p["format"], p["rows"]))
        ]
        out.append("\nScaling on SQLite:\n")
        out.append(
            markdown_table(
                ["format", "orders", "seconds", "s per 100k", "peak RSS MB", "load"],
                rows,
                left=(0,),
            )
        )
    storage = results.get("storage")
    if storage and "skipped" not in storage:
        rows = []
        for fmt in ("csv", "xlsx"):
            if fmt not in storage:
                continue
            for kind in ("local", "s3"):
                r = storage[fmt][kind]
                s3_cpu = r.get("s3ProxyCpuSeconds")
                rows.append(
                    [
                        fmt,
                        kind,
                        f"{r['rows']:,}",
                        f"{r['taskSeconds']:.2f}",
                        f"{r['rows'] / r['taskSeconds']:,.0f}",
                        f"{r['seconds']:.2f}",
                        f"{r['peakRssMb']:.0f}",
                        f"{r['cpuSeconds']:.1f}",
                        "-" if s3_cpu is None else f"{s3_cpu:.1f}",
                        f"{storage[fmt]['ratio']:.2f}" if kind == "s3" else "",
                        f"{storage[fmt]['ratioWithDownload']:.2f}" if kind == "s3" else "",
                        f"{r['loadAverage']:.2f}",
                    ]
                )
        out.append(
            f"\nStorage ({storage['database']}; export = create -> succeeded, "
            "downloaded = create -> file downloaded):\n"
        )
        out.append(
            markdown_table(
                [
                    "format",
                    "storage",
                    "rows",
                    "export s",
                    "rows/s",
                    "downloaded s",
                    "peak RSS MB",
                    "worker CPU s",
                    "S3Proxy CPU s",
                    "S3 / local",
                    "with download",
                    "load",
                ],
                rows,
                left=(0, 1),
            )
        )
    elif storage:
        out.append(f"\nStorage: skipped ({storage['skipped']})")
    cluster = results.get("cluster")
    if cluster and "skipped" not in cluster:
        groups = ["apis", "workers", "mariadb", "rocketmq", "s3proxy", "machine"]
        rows = []
        for kind in ("single", "concurrent"):
            r = cluster[kind]
            cpu = r["cpuSeconds"]
            rows.append(
                [
                    kind,
                    str(r["exports"]),
                    f"{r['rows']:,}",
                    f"{r['seconds']:.2f}",
                    f"{r['rowsPerSecond']:,.0f}",
                    "-" if r["coresBusy"] is None else f"{r['coresBusy']:.2f}",
                    *("-" if cpu.get(g) is None else f"{cpu[g]:.1f}" for g in groups),
                    "-"
                    if cpu.get("machine") is None
                    else f"{cpu['machine'] / r['rows'] * 1e5:.2f}",
                ]
            )
        out.append(
            f"\nCluster ({cluster['workers']} workers x {cluster['perWorker']} exports at once, "
            f"CSV; CPU-seconds per group of processes; ratio {cluster['ratio']:.2f}):\n"
        )
        out.append(
            markdown_table(
                [
                    "phase",
                    "exports",
                    "rows",
                    "seconds",
                    "rows/s",
                    "cores busy",
                    *groups,
                    "CPU s / 100k rows",
                ],
                rows,
                left=(0,),
            )
        )
        peaks = ", ".join(f"{n} {v:.0f}" for n, v in cluster["peakRssMb"].items() if v)
        out.append(f"\nPeak RSS (MB): {peaks}.")
    elif cluster:
        out.append(f"\nCluster: skipped ({cluster['skipped']})")
    shards = results.get("shards")
    if shards:
        x1, x4 = shards["runs"]["x1"], shards["runs"]["x4"]
        out.append(
            f"\nShards: {shards['pages']} pages, {shards['pageSeconds'] * 1000:.0f} ms each, "
            f"{x1['shards']} day shards: 1 at once {x1['seconds']:.2f} s, 4 at once "
            f"{x4['seconds']:.2f} s ({shards['speedup']:.2f}x); files identical: "
            f"{shards['identical']}."
        )
        on_db = shards.get("mariadb", {})
        if "ratio" in on_db:
            rows = [
                [
                    key,
                    str(r["shards"]),
                    f"{r['seconds']:.2f}",
                    f"{r['rowsPerSecond']:,.0f}",
                    f"{r['cpuSeconds']:.2f}",
                    f"{r['providerCpuSeconds']:.2f}",
                    ", ".join(f"{x:.2f}" for x in r["runs"]),
                ]
                for key, r in (("1 at once", on_db["x1"]), ("4 at once", on_db["x4"]))
            ]
            out.append(
                "\nORDERS over every date on MariaDB (day shards, CSV):\n\n"
                + markdown_table(
                    [
                        "shards",
                        "count",
                        "seconds",
                        "rows/s",
                        "worker CPU s",
                        "provider CPU s",
                        "runs",
                    ],
                    rows,
                )
                + f"\n\n4 at once / 1 at once: {on_db['ratio']:.2f}"
            )
        elif on_db:
            out.append(f"\nORDERS shards on MariaDB: skipped ({on_db.get('skipped')})")
    stages = results.get("stages")
    if stages:
        rows = [
            [
                name,
                f"{f['cpuSeconds']:.3f}",
                f"{f['per100k']:.3f}",
                f"{f['microsecondsPerRow']:.2f}",
            ]
            for name, f in stages["stages"].items()
        ]
        out.append(
            f"\nWhere the worker's CPU goes, stage by stage ({stages['rows']:,} orders, one"
            f" thread, GC threshold {stages['gcThreshold'][0]:,}):\n\n"
            + markdown_table(["stage", "CPU s", "CPU s per 100k", "us per row"], rows)
            + f"\n\nAnswer bodies: {stages['bodyBytes']['arrays']:,} bytes as arrays,"
            f" {stages['bodyBytes']['objects']:,} as objects."
        )
    load = results.get("load")
    if load:
        out.append(load_report(load))
    big = results.get("big")
    if big:
        out.append(_big_report(big))
    goals = results.get("goals")
    if goals:
        rows = [
            [
                g["goal"],
                "-"
                if g["value"] is None
                else f"{g['value']:,}"
                if isinstance(g["value"], int)
                else f"{g['value']:,.2f}",
                g["target"],
                {True: "yes", False: "NO", None: "-"}[g["met"]]
                + (f" ({g['note']})" if g.get("note") else ""),
            ]
            for g in goals
        ]
        out.append("\nGoals (computed, not asserted):\n")
        out.append(markdown_table(["goal", "measured", "target", "met"], rows, left=(0, 3)))
    return "\n".join(out)


def _big_report(big: dict[str, Any]) -> str:
    """The ``big`` part's tables: the samples' preparation, then the runs against the
    comparison runs (s per 100k and peak RSS of both)."""
    out = []
    rows = []
    for database, p in big["prepare"].items():
        rows.append(
            [
                database,
                f"{p['orders']:,}",
                "-" if p["generateSeconds"] is None else f"{p['generateSeconds']:.0f}",
                "-" if p["loadSeconds"] is None else f"{p['loadSeconds']:.0f}",
                f"{p['csvMb']:,.0f}",
                f"{p['databaseMb']:,.0f}",
            ]
        )
    out.append(f'\nBig sample, TPC-H scale {big["scale"]:g} ("-": loaded by an earlier run):\n')
    out.append(
        markdown_table(
            ["database", "orders", "generate s", "load s", "CSV MB", "database MB"],
            rows,
            left=(0,),
        )
    )
    rows = []
    for database in ("sqlite", "mariadb"):
        formats = big.get(database)
        if not formats:
            continue
        if "skipped" in formats:
            rows.append([database, "-", "skipped: " + formats["skipped"], *[""] * 10])
            continue
        for fmt, r in formats.items():
            base = r["base"]
            rows.append(
                [
                    database,
                    fmt,
                    f"{r['rows']:,}",
                    f"{r['seconds']:.1f}",
                    f"{r['secondsPer100k']:.2f}",
                    f"{r['rowsPerSecond']:,.0f}",
                    f"{r['peakRssMb']:.0f}",
                    f"{r['cpuSeconds']:.1f}",
                    "-" if r.get("sheets") is None else str(r["sheets"]),
                    f"{base['secondsPer100k']:.2f}",
                    f"{base['peakRssMb']:.0f}",
                    base["source"],
                    f"{r['loadAverage']:.2f}",
                ]
            )
    if rows:
        out.append(
            f"\nBig export (all orders in one e2e export) against the "
            f"{big['baseScale']:g}-scale run:\n"
        )
        out.append(
            markdown_table(
                [
                    "database",
                    "format",
                    "rows",
                    "seconds",
                    "s per 100k",
                    "rows/s",
                    "peak RSS MB",
                    "CPU s",
                    "sheets",
                    "base s per 100k",
                    "base peak RSS MB",
                    "base from",
                    "load",
                ],
                rows,
                left=(0, 1, 11),
            )
        )
    return "\n".join(out)
