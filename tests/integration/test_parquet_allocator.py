"""The allocator the Parquet writer loads pyarrow with (export_center.writers.parquet:
``load_pyarrow``), in a fresh interpreter: pyarrow reads ``ARROW_DEFAULT_MEMORY_POOL``
once, at its first import, so this cannot be seen in the test process itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import io, os
from export_center.columns import Column, ColumnType
from export_center.writers import open_writer
writer = open_writer("parquet", io.BytesIO(), [Column("n", "N", ColumnType.INTEGER)])
writer.write_columns([[1, 2, 3]])
writer.close()
import pyarrow
print(pyarrow.default_memory_pool().backend_name, os.environ.get("ARROW_DEFAULT_MEMORY_POOL"))
"""


def _backend(pool: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if pool is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = pool
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def test_the_writer_loads_pyarrow_with_the_system_allocator() -> None:
    assert _backend(None) == "system system"


def test_an_operators_allocator_is_kept() -> None:
    import pyarrow

    other = next((b for b in pyarrow.supported_memory_backends() if b != "system"), None)
    if other is None:
        pytest.skip("this pyarrow build has no allocator but the system one")
    assert _backend(other) == f"{other} {other}"
