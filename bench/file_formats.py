"""End to end in every file format, and a split export checked against its manifest.

Issue 23's acceptance, as printed figures (never assertions): all orders of the TPC-H
sample (scale 0.27: 405,000; ``--quick`` 0.01: 15,000) exported end to end (create
over HTTP -> outbox -> provider -> file -> download through the signed link, the
``bench.e2e_run`` worker in a subprocess of its own, so its peak RSS is that one
export's) as CSV (the baseline), JSON Lines and Parquet, on SQLite and on MariaDB
(as the ``e2e`` part finds it). With ``--repeat N`` the formats run round by round,
the order reversed every other round (a busy minute then slows a different format
first), and the fastest run of each is kept. Ratios are against CSV of the same
invocation; the goals: time at most :data:`TIME_RATIO_GOAL` x CSV's, peak RSS at
most :data:`RSS_OVER_CSV_GOAL_MB` MB over CSV's.

Then one CSV export with ``options.split.maxRowsPerFile`` (100,000; ``--quick``
4,000): the ZIP downloaded through the signed link, its parts read alone with the
``csv`` module and compared with ``GET /api/v1/exports/{taskId}/manifest``
(:func:`bench.split_check.inspect_split`): parts against the expected count, rows
adding up to all orders, each part readable alone, the archive's and every part's
SHA-256 and bytes equal to the bytes served.

Usage::

    python -m bench.file_formats [--quick] [--repeat N] [--data-dir DIR]
                                 [--no-mariadb] [--json FILE]

``python -m bench --only file_formats`` runs the same part.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.e2e import ROOT, e2e_subprocess, fastest, mariadb_url, prepare_sample
from bench.tables import markdown_table

__all__ = [
    "FORMATS",
    "RSS_OVER_CSV_GOAL_MB",
    "TIME_RATIO_GOAL",
    "file_formats_goals",
    "file_formats_report",
    "round_order",
    "run_file_formats",
    "run_file_formats_part",
]

FORMATS = ("csv", "jsonl", "parquet")
"""The formats measured; CSV is the baseline."""

TIME_RATIO_GOAL = 1.5
"""Issue 23: JSON Lines and Parquet end to end within 1.5x CSV's seconds."""

RSS_OVER_CSV_GOAL_MB = 50.0
"""Issue 23: their peak RSS within 50 MB of CSV's."""

SPLIT_ROWS = {"full": 100_000, "quick": 4_000}
"""``maxRowsPerFile`` of the split export (405,000 orders -> 5 parts; 15,000 -> 4)."""


def round_order(round_index: int) -> tuple[str, ...]:
    """The formats' order in round ``round_index`` (0-based): :data:`FORMATS` in even
    rounds, reversed in odd ones."""
    return FORMATS if round_index % 2 == 0 else tuple(reversed(FORMATS))


def _ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per format but CSV: ``timeRatioToCsv`` (seconds / CSV's seconds) and
    ``peakRssOverCsvMb`` (peak RSS MB minus CSV's)."""
    base = results["csv"]
    return {
        fmt: {
            "timeRatioToCsv": round(r["seconds"] / base["seconds"], 3),
            "peakRssOverCsvMb": round(r["peakRssMb"] - base["peakRssMb"], 1),
        }
        for fmt, r in results.items()
        if fmt != "csv"
    }


def _export(common: list[str], fmt: str, label: str, say: Callable[[str], None]) -> dict[str, Any]:
    load = os.getloadavg()[0]
    result = e2e_subprocess([*common, "--format", fmt], timeout=3600)
    result["loadAverage"] = round(load, 2)
    say(
        f"  {label} {fmt:7s} {result['rows']:>9,} rows {result['seconds']:7.2f} s "
        f"{result['rowsPerSecond']:>9,.0f} rows/s  peak RSS {result['peakRssMb']:.0f} MB  "
        f"CPU {result['cpuSeconds']:.1f} s  (load {load:.2f})"
    )
    return result


def _split_export(
    common: list[str], split_rows: int, label: str, say: Callable[[str], None]
) -> dict[str, Any]:
    options = {"split": {"maxRowsPerFile": split_rows}}
    args = [*common, "--format", "csv", "--options", json.dumps(options), "--inspect-split"]
    load = os.getloadavg()[0]
    result = e2e_subprocess(args, timeout=3600)
    split = result.pop("split")
    rows = int(result["rows"])
    summary = {
        "maxRowsPerFile": split_rows,
        "expectedParts": math.ceil(rows / split_rows) if rows else 1,
        "orders": rows,
        "seconds": result["seconds"],
        "peakRssMb": result["peakRssMb"],
        "cpuSeconds": result["cpuSeconds"],
        "threadCpuSeconds": result["threadCpuSeconds"],
        "loadAverage": round(load, 2),
        **split,
    }
    say(
        f"  {label} split   {summary.get('parts')} parts (expected "
        f"{summary['expectedParts']}), {summary.get('rowsTotal')} rows, readable alone "
        f"{summary.get('partsReadableAlone')}, archive sha256 equal "
        f"{summary['archiveSha256Equal']}, part sha256 equal {summary.get('fileSha256Equal')}"
    )
    return summary


def run_file_formats(
    *,
    data_dir: Path,
    database: str,
    database_url: str | None,
    scale: float,
    repeat: int = 1,
    split_rows: int = SPLIT_ROWS["full"],
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Prepare the sample once, export it in every format ``repeat`` times, then split.

    Args:
        data_dir: the bench data directory (the sample in ``<database>-sf<scale>``).
        database: ``sqlite`` or ``mariadb`` (a label; the URL decides).
        database_url: None for the embedded SQLite file of that sub-directory.
        scale: TPC-H scale factor (0.27: 405,000 orders).
        repeat: rounds (:func:`round_order`); the fastest run of each format is kept.
        split_rows: ``maxRowsPerFile`` of the split export.

    Returns:
        ``formats`` (``{format: result}``: the ``bench.e2e_run`` keys plus
        ``loadAverage`` and ``runs``, the seconds of every run; but for CSV with
        ``timeRatioToCsv`` and ``peakRssOverCsvMb`` of the fastest runs),
        ``rounds`` (``[{order, ratios}]``, each round's ratios among its own runs) and
        ``split`` (the split export's seconds, peak RSS and CPU seconds, and
        :func:`bench.split_check.inspect_split`'s figures with ``expectedParts``).
    """
    common = prepare_sample(
        data_dir=data_dir, database=database, database_url=database_url, scale=scale, say=say
    )
    runs: dict[str, list[dict[str, Any]]] = {fmt: [] for fmt in FORMATS}
    rounds = []
    for index in range(max(1, repeat)):
        order = round_order(index)
        this = {fmt: _export(common, fmt, database, say) for fmt in order}
        for fmt, result in this.items():
            runs[fmt].append(result)
        rounds.append({"order": list(order), "ratios": _ratios(this)})
    best = {fmt: fastest(done) for fmt, done in runs.items()}
    for fmt, ratios in _ratios(best).items():
        best[fmt].update(ratios)
    split = _split_export(common, split_rows, database, say)
    return {"formats": best, "rounds": rounds, "split": split}


def file_formats_goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals as computed values, per database (``met`` None when not run).

    Args:
        results: ``{database: run_file_formats(...) or {"skipped": why}}``.

    Returns:
        ``[{goal, value, target, met}]``: time ratio and RSS over CSV for JSON Lines
        and Parquet, then the split export's parts and rows (numbers), and its
        equalities (``value`` None: ``met`` says whether it holds).
    """
    goals: list[dict[str, Any]] = []

    def goal(name: str, value: Any, target: str, met: bool | None) -> None:
        goals.append({"goal": name, "value": value, "target": target, "met": met})

    for database, done in results.items():
        if "skipped" in done:
            goal(f"file formats, {database}", None, "run", None)
            continue
        for fmt in FORMATS[1:]:
            r = done["formats"][fmt]
            ratio, over = r["timeRatioToCsv"], r["peakRssOverCsvMb"]
            goal(
                f"e2e {fmt} / csv time ({database})",
                ratio,
                f"<= {TIME_RATIO_GOAL}",
                ratio <= TIME_RATIO_GOAL,
            )
            goal(
                f"e2e {fmt} peak RSS over csv, MB ({database})",
                over,
                f"<= {RSS_OVER_CSV_GOAL_MB:g}",
                over <= RSS_OVER_CSV_GOAL_MB,
            )
        s = done["split"]
        goal(
            f"split parts ({database})",
            s.get("parts"),
            f"= {s['expectedParts']}",
            s.get("parts") == s["expectedParts"],
        )
        goal(
            f"split rows add up ({database})",
            s.get("rowsTotal"),
            f"= {s['orders']:,}",
            s.get("rowsTotal") == s["orders"] == s.get("manifestTotalRows"),
        )
        checks = (
            "partsReadableAlone",
            "hasManifestJson",
            "archiveBytesEqual",
            "archiveSha256Equal",
            "fileNamesEqual",
            "fileRowsEqual",
            "fileBytesEqual",
            "fileSha256Equal",
            "zipManifestFilesEqual",
        )
        for key in checks:
            goal(f"split {key} ({database})", None, "true", s.get(key) is True)
    return goals


def _yes(value: Any) -> str:
    return {True: "yes", False: "NO", None: "-"}.get(value, str(value))


def file_formats_report(results: dict[str, Any], *, goals: bool = True) -> str:
    """The Markdown tables of ``{database: run_file_formats(...)}`` (bench/README.md);
    ``goals``: with the table of :func:`file_formats_goals` (``python -m bench`` prints
    every part's goals in one table of its own)."""
    rows, splits = [], []
    for database, done in results.items():
        if "skipped" in done:
            rows.append([database, "-", "skipped: " + done["skipped"], *[""] * 8])
            continue
        for fmt, r in done["formats"].items():
            rows.append(
                [
                    database,
                    fmt,
                    f"{r['rows']:,}",
                    f"{r['seconds']:.2f}",
                    f"{r['rowsPerSecond']:,.0f}",
                    f"{r.get('timeRatioToCsv', 1.0):.2f}",
                    f"{r['peakRssMb']:.0f}",
                    f"{r['peakRssOverCsvMb']:+.0f}" if "peakRssOverCsvMb" in r else "",
                    f"{r['cpuSeconds']:.1f}",
                    f"{r['bytes'] / 1e6:.1f}",
                    " / ".join(f"{s:.2f}" for s in r["runs"]),
                ]
            )
        s = done["split"]
        splits.append(
            [
                database,
                f"{s['maxRowsPerFile']:,}",
                f"{s.get('parts')} ({s['expectedParts']})",
                " + ".join(f"{n:,}" for n in s.get("partRows", [])),
                f"{s.get('rowsTotal', 0):,} / {s.get('manifestTotalRows') or 0:,}",
                _yes(s.get("partsReadableAlone")),
                _yes(s.get("hasManifestJson")),
                f"{_yes(s['archiveBytesEqual'])} / {_yes(s['archiveSha256Equal'])}",
                f"{_yes(s.get('fileRowsEqual'))} / {_yes(s.get('fileBytesEqual'))} / "
                f"{_yes(s.get('fileSha256Equal'))}",
                _yes(s.get("zipManifestFilesEqual")),
                f"{s['seconds']:.2f}",
                f"{s['peakRssMb']:.0f}",
            ]
        )
    out = [
        "\nFile formats end to end (fastest of the runs; ratios against CSV of the same "
        "invocation):\n",
        markdown_table(
            [
                "database",
                "format",
                "rows",
                "seconds",
                "rows/s",
                "x CSV",
                "peak RSS MB",
                "vs CSV MB",
                "CPU s",
                "MB",
                "runs s",
            ],
            rows,
            left=(0, 1, 10),
        ),
    ]
    if splits:
        out += [
            "\nSplit CSV export against the API manifest (parts read alone with the csv module):\n",
            markdown_table(
                [
                    "database",
                    "rows/file",
                    "parts (expected)",
                    "part rows",
                    "rows / manifest",
                    "readable alone",
                    "manifest.json",
                    "archive bytes / sha256 =",
                    "part rows / bytes / sha256 =",
                    "zip manifest = API",
                    "seconds",
                    "peak RSS MB",
                ],
                splits,
                left=(0, 3),
            ),
        ]
    if not goals:
        return "\n".join(out)
    computed = file_formats_goals(results)
    out += [
        "\nGoals:\n",
        markdown_table(
            ["goal", "value", "target", "met"],
            [
                [g["goal"], "-" if g["value"] is None else f"{g['value']:,}", g["target"]]
                + [_yes(g["met"])]
                for g in computed
            ],
            left=(0, 2, 3),
        ),
    ]
    return "\n".join(out)


def run_file_formats_part(
    *,
    data_dir: Path,
    quick: bool,
    repeat: int,
    no_mariadb: bool,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The ``file_formats`` part of ``python -m bench``: SQLite, then MariaDB when found.

    Returns:
        ``{database: run_file_formats(...)}``, MariaDB as ``{"skipped": why}`` when
        there is none (``--no-mariadb``, no URL, the test server not running).
    """
    scale = 0.01 if quick else 0.27
    split_rows = SPLIT_ROWS["quick" if quick else "full"]
    say(f"file formats: {', '.join(FORMATS)} end to end, then a split CSV, TPC-H scale {scale}")
    out: dict[str, Any] = {}
    targets: list[tuple[str, str | None]] = [("sqlite", None)]
    url, source = (None, "--no-mariadb") if no_mariadb else mariadb_url()
    if url is None:
        say(f"  mariadb: skipped ({source})")
    else:
        say(f"  mariadb: {source}")
        targets.append(("mariadb", url))
    for database, database_url in targets:
        out[database] = run_file_formats(
            data_dir=data_dir,
            database=database,
            database_url=database_url,
            scale=scale,
            repeat=repeat,
            split_rows=split_rows,
            say=say,
        )
    if url is None:
        out["mariadb"] = {"skipped": source}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.file_formats", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="TPC-H scale 0.01 (15,000 orders)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the fastest is kept")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("EXPORT_CENTER_BENCH_DIR", ROOT / ".export-center" / "bench")),
    )
    parser.add_argument("--no-mariadb", action="store_true", help="SQLite only")
    parser.add_argument(
        "--json", type=Path, default=Path("bench-file-formats.json"), help="result file"
    )
    args = parser.parse_args(argv)
    results = run_file_formats_part(
        data_dir=args.data_dir.resolve(),
        quick=args.quick,
        repeat=args.repeat,
        no_mariadb=args.no_mariadb,
    )
    print(file_formats_report(results))
    document = {
        "quick": args.quick,
        "loadAverageEnd": round(os.getloadavg()[0], 2),
        "fileFormats": results,
        "goals": file_formats_goals(results),
    }
    args.json.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nresults: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
