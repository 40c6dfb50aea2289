"""The README's first command, in a subprocess: ``export-center demo`` on real data.

All 405,000 TPC-H orders (scale 0.27) as CSV and XLSX, on the embedded SQLite default
and on MariaDB; each file read back with Python's csv module and with openpyxl and
compared with the TPC-H source for every order.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path

import openpyxl
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from providers import tpch

SCALE = 0.27
ORDERS = 405_000

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo-data")


def _run_demo(data_dir: Path, out: Path, *extra: str, env_extra: dict | None = None) -> dict:
    env = {**os.environ, "EXPORT_CENTER_DATA_DIR": str(data_dir), **(env_extra or {})}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "export_center.cli",
            "demo",
            "--scale",
            str(SCALE),
            "--output-dir",
            str(out),
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rows/s" in proc.stdout and "peak RSS" in proc.stdout
    return json.loads((out / "summary.json").read_text())


def _guarded(text_value: str) -> str:
    return (
        "'" + text_value if text_value[:1] in ("=", "+", "-", "@", "\t", "\r", "\n") else text_value
    )


def _xlsx_data_rows(path: Path) -> int:
    """Data rows of every sheet: ``<row`` elements in the sheet XML, minus each header."""
    import zipfile

    rows = 0
    with zipfile.ZipFile(path) as zf:
        for name in (n for n in zf.namelist() if n.startswith("xl/worksheets/sheet")):
            tail = b""
            with zf.open(name) as fh:
                while chunk := fh.read(1 << 20):
                    data = tail + chunk
                    rows += data.count(b"<row ") - tail.count(b"<row ")
                    tail = data[-4:]
            rows -= 1  # the header row of this sheet
    return rows


def _check_counts(data_dir: Path, out: Path, summary: dict) -> None:
    """Same counts as the embedded run: CSV read fully, XLSX rows counted."""
    for fmt in ("csv", "xlsx"):
        assert summary[fmt]["rows"] == ORDERS
    raw = (out / "orders.csv").read_bytes()
    rows = list(csv.reader(io.StringIO(raw[3:].decode("utf-8"), newline="")))
    source = list(tpch.read_source_orders(data_dir / f"tpch-sf{SCALE}"))
    assert [int(r[0]) for r in rows[1:]] == [s["o_orderkey"] for s in source]
    assert [r[11] for r in rows[1:]] == [_guarded(s["o_comment"]) for s in source]
    assert _xlsx_data_rows(out / "orders.xlsx") == ORDERS


def _check_files(data_dir: Path, out: Path, summary: dict) -> None:
    for fmt in ("csv", "xlsx"):
        assert summary[fmt]["rows"] == ORDERS
        assert summary[fmt]["bytes"] == (out / f"orders.{fmt}").stat().st_size
        assert summary[fmt]["seconds"] > 0 and summary[fmt]["rowsPerSecond"] > 0
    assert summary["peakRssMb"] > 0
    source = list(tpch.read_source_orders(data_dir / f"tpch-sf{SCALE}"))
    assert len(source) == ORDERS

    raw = (out / "orders.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and raw.count(b"\xef\xbb\xbf") == 1
    rows = list(csv.reader(io.StringIO(raw[3:].decode("utf-8"), newline="")))
    assert rows[0][0] == "Order key" and len(rows) == ORDERS + 1
    assert len({r[0] for r in rows[1:]}) == ORDERS
    for got, src in zip(rows[1:], source, strict=True):
        assert int(got[0]) == src["o_orderkey"]
        assert got[2] == src["c_name"]
        assert Decimal(got[6]) == src["o_totalprice"]
        assert dt.date.fromisoformat(got[7]) == src["o_orderdate"]
        assert got[11] == _guarded(src["o_comment"])

    wb = openpyxl.load_workbook(out / "orders.xlsx", read_only=True)
    ws = wb.worksheets[0]
    it = ws.iter_rows(values_only=True)
    assert next(it)[0] == "Order key"
    seen = set()
    count = 0
    for got, src in zip(it, source, strict=True):
        count += 1
        seen.add(got[0])
        assert got[0] == src["o_orderkey"]
        assert got[2] == src["c_name"]
        assert Decimal(str(got[6])) == src["o_totalprice"]
        assert got[7].date() == src["o_orderdate"]
        assert got[11] == src["o_comment"]
    wb.close()
    assert count == ORDERS and len(seen) == ORDERS


@pytest.mark.second_process  # long: runs beside the rest (scripts/test.sh)
def test_demo_on_embedded_sqlite(data_dir: Path, tmp_path: Path) -> None:
    summary = _run_demo(data_dir, tmp_path / "out")
    assert summary["database"] == "sqlite"
    _check_files(data_dir, tmp_path / "out", summary)


@pytest.mark.mariadb
def test_demo_on_mariadb(data_dir: Path, tmp_path: Path) -> None:
    from tests.conftest import mariadb_base_url

    base = make_url(mariadb_base_url())
    name = f"export_center_demo_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    try:
        url = base.set(database=name).render_as_string(hide_password=False)
        summary = _run_demo(data_dir, tmp_path / "out", "--database-url", url)
        assert summary["database"].startswith("mysql")
        _check_counts(data_dir, tmp_path / "out", summary)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


@pytest.mark.mariadb
@pytest.mark.rocketmq
def test_demo_through_rocketmq_on_mariadb(data_dir: Path, tmp_path: Path) -> None:
    from tests.conftest import mariadb_base_url
    from tests.integration.test_rocketmq_broker import rocketmq_endpoint

    endpoint = rocketmq_endpoint()
    base = make_url(mariadb_base_url())
    name = f"export_center_demo_mq_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    try:
        url = base.set(database=name).render_as_string(hide_password=False)
        summary = _run_demo(
            data_dir,
            tmp_path / "out",
            "--database-url",
            url,
            env_extra={
                "EXPORT_CENTER_TRANSPORT": "rocketmq",
                "EXPORT_CENTER_TOPIC_PREFIX": "test-",
                "EXPORT_CENTER_ROCKETMQ__ENDPOINT": endpoint,
            },
        )
        assert summary["transport"] == "rocketmq"
        _check_counts(data_dir, tmp_path / "out", summary)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()
