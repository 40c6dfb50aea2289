"""What ``export-center tasks show`` prints of the file a task asked for and delivered:
the chosen columns and options, and the signed manifest (files with rows, bytes and
SHA-256, the archive, the control totals)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from export_center.filespec import FileSpec
from export_center.repository import Task
from export_center.terminal import print_table
from export_center.writers.formats import task_format

__all__ = ["file_asked", "manifest_tables"]


def file_asked(t: Task) -> str:
    """The chosen columns (renames as ``key=title``) and the options of a task."""
    spec = FileSpec.from_text(t.file_spec_json)
    columns = ", ".join(c.key + (f"={c.title}" if c.title else "") for c in spec.columns)
    options = spec.options_for(task_format(t.format))
    return f"columns: {columns or 'all'}; options: {json.dumps(options, ensure_ascii=False)}"


def manifest_tables(console: Console, manifest: dict[str, Any]) -> None:
    """The manifest of ``tasks show``: its files (and archive) with rows, bytes and
    SHA-256, then the control totals; ``--json`` prints it whole."""
    sig = manifest["signature"]
    rows = [[f["name"], f["rows"], f"{f['bytes']:,}", f["sha256"]] for f in manifest["files"]]
    if manifest["archive"] is not None:
        a = manifest["archive"]
        rows.append(
            [f"{a['name']} (the archive)", manifest["totalRows"], f"{a['bytes']:,}", a["sha256"]]
        )
    print_table(
        console,
        f"manifest ({sig['alg']}, key {sig['keyId']}; export-center verify FILE --manifest M.json)",
        ["file", "rows", "bytes", "sha256"],
        rows,
    )
    totals = manifest["controlTotals"]
    print_table(
        console,
        f"control totals ({totals['rowCount']:,} rows)",
        ["column", "sum / min .. max", "nulls"],
        [
            [
                key,
                t["sum"] if "sum" in t else f"{t.get('min')} .. {t.get('max')}",
                t.get("nulls", 0),
            ]
            for key, t in totals["columns"].items()
        ],
    )
