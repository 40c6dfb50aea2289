"""Rows and helpers shared by the package and verify tests."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from export_center.columns import Column, ColumnType
from export_center.filespec import CsvOptions, FileSpec, Split
from export_center.packaging.package import Package, open_package
from export_center.writers.formats import FORMATS

COLUMNS = [
    Column("id", "Id", ColumnType.INTEGER),
    Column("name", "Name", ColumnType.STRING),
    Column("amount", "Amount", ColumnType.DECIMAL),
    Column("day", "Day", ColumnType.DATE),
    Column("at", "At", ColumnType.DATETIME),
]
ZIP_TIME = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def make_rows(count: int, start: int = 0) -> list[list[Any]]:
    """``count`` rows (row-major) with a null now and then, text that needs quoting."""
    rows = []
    for i in range(start, start + count):
        rows.append(
            [
                i,
                f'客户 {i}, "q"\n{"=x" if i % 7 == 0 else ""}',
                None if i % 11 == 0 else Decimal(f"{i * 3}.{i % 100:02d}"),
                dt.date(2020, 1, 1) + dt.timedelta(days=i % 900),
                dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
                + dt.timedelta(seconds=i * 61, milliseconds=i % 1000),
            ]
        )
    return rows


def columns_of(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Row-major to column-major."""
    return [[row[i] for row in rows] for i in range(len(COLUMNS))]


def package(
    fmt: str,
    spec: FileSpec,
    rows: Sequence[Sequence[Any]],
    batches: Sequence[int] = (),
    **kwargs: Any,
) -> tuple[bytes, Package]:
    """Write ``rows`` through a package in batches of the given sizes (the rest last)."""
    out = io.BytesIO()
    pack = open_package(
        out,
        FORMATS[fmt],
        COLUMNS,
        spec,
        time_zone="Asia/Shanghai",
        max_bytes=kwargs.pop("max_bytes", None),
        file_stem="orders",
        zip_time=ZIP_TIME,
        **kwargs,
    )
    done = 0
    for size in batches:
        pack.write_columns(columns_of(rows[done : done + size]))
        done += size
    pack.write_columns(columns_of(rows[done:]))
    pack.close()
    return out.getvalue(), pack


def spec(
    compression: str = "none",
    rows: int | None = None,
    size: int | None = None,
    csv: CsvOptions | None = None,
) -> FileSpec:
    """A spec with the compression, the split and the CSV options asked."""
    split = Split(rows, size) if rows is not None or size is not None else None
    return FileSpec(compression=compression, split=split, csv=csv or CsvOptions())


def manifest_of(fmt: str, pack: Package, file_spec: FileSpec) -> dict[str, Any]:
    """The manifest of a closed package as the attempt records it (unsigned)."""
    return {
        "format": fmt,
        "options": file_spec.to_json()["options"],
        "timeZone": "Asia/Shanghai",
        "columns": [{"key": c.key, "title": c.title, "type": str(c.type)} for c in COLUMNS],
        "totalRows": pack.totals.rows,
        "files": [f.as_json() for f in pack.files],
        "archive": None if pack.archive is None else pack.archive.as_json(),
        "controlTotals": pack.totals.as_json(),
    }
