"""Write sql/mysql/schema.sql: the reference MySQL DDL of the Alembic head.

Runs the migrations on an empty MySQL/MariaDB database (URL as the first argument or
EXPORT_CENTER_TEST_MARIADB_URL) and writes each table's SHOW CREATE TABLE plus the
guard row. tests/migrations checks that the file still equals the head.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from export_center.db import make_engine  # noqa: E402
from export_center.runtime import upgrade_database  # noqa: E402

TABLES = (
    "export_task",
    "export_outbox",
    "export_task_guard",
    "export_request_key",
    "export_audit",
    "export_shard",
    "export_schedule",
    "export_schedule_run",
    "export_principal",
    "export_notification",
    "export_delivery_attempt",
    "export_webhook_endpoint",
)
HEADER = """-- Export Center: reference MySQL 8 / MariaDB 10.11 DDL.
-- Generated from the Alembic head by scripts/dump_schema.py; do not edit by hand.
-- tests/migrations/test_migrations.py fails when this file and the migrations differ.
-- Identity and key columns compare byte for byte: binary NO PAD collation, which MariaDB
-- names utf8mb4_nopad_bin and MySQL 8 utf8mb4_0900_bin (the migrations pick the right
-- name; on MySQL 8 replace it in this file before running it by hand).
"""


def render(url: str) -> str:
    """Return the DDL of the tables as created by the migrations on ``url``."""
    engine = make_engine(url)
    upgrade_database(engine)
    parts = [HEADER]
    with engine.connect() as conn:
        for table in TABLES:
            ddl = conn.execute(text(f"SHOW CREATE TABLE `{table}`")).one()[1]
            ddl = _normalize(ddl)
            parts.append(f"\nCREATE TABLE IF NOT EXISTS {ddl.removeprefix('CREATE TABLE ')};\n")
    parts.append(
        "\n-- The single row that task creation locks (every create locks it first).\n"
        "INSERT IGNORE INTO `export_task_guard` (`id`, `updated_at`) "
        "VALUES ('GLOBAL_CREATE', CURRENT_TIMESTAMP(3));\n"
    )
    engine.dispose()
    return "".join(parts)


def _normalize(ddl: str) -> str:
    import re

    ddl = re.sub(r" AUTO_INCREMENT=\d+", "", ddl)
    # The server's default collation differs between MySQL 8 and MariaDB; keep the charset.
    return re.sub(r" COLLATE=\w+", "", ddl)


def with_scratch_database(base_url: str, fn):  # type: ignore[no-untyped-def]
    """Call ``fn(url)`` on a new empty database and drop it afterwards."""
    base = make_url(base_url)
    name = f"export_center_schema_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    try:
        return fn(base.set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ["EXPORT_CENTER_TEST_MARIADB_URL"]
    ddl = with_scratch_database(url, render)
    target = ROOT / "sql" / "mysql" / "schema.sql"
    target.write_text(ddl)
    print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
