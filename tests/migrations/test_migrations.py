"""Migrations: one head, upgrade/downgrade with data, models == migrations, sql/ current."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import func, insert, inspect, select, text

from export_center.db import make_engine
from export_center.models import Base, ExportTask, ExportTaskGuard
from export_center.runtime import alembic_config, upgrade_database
from tests.support.rows import task_row

ROOT = Path(__file__).resolve().parents[2]


def test_single_head():
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    assert len(script.get_heads()) == 1


def test_upgrade_downgrade_with_data(db_url):
    from alembic import command

    engine = make_engine(db_url)
    upgrade_database(engine)
    with engine.begin() as conn:
        assert conn.execute(select(ExportTaskGuard.__table__.c.id)).scalar_one() == "GLOBAL_CREATE"
        conn.execute(insert(ExportTask.__table__).values(**task_row()))
    upgrade_database(engine)  # idempotent: the row survives a second upgrade
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(ExportTask.__table__)).scalar() == 1
        cfg = alembic_config(db_url)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
        conn.commit()
    assert not {
        "export_task",
        "export_outbox",
        "export_task_guard",
        "export_request_key",
        "export_audit",
    } & set(inspect(engine).get_table_names())
    upgrade_database(engine)
    assert {
        "export_task",
        "export_outbox",
        "export_task_guard",
        "export_request_key",
        "export_audit",
    } <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_models_equal_migrations(db_url):
    engine = make_engine(db_url)
    upgrade_database(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []


@pytest.mark.mariadb
def test_reference_mysql_ddl_equals_alembic_head():
    import importlib.util

    from tests.conftest import mariadb_base_url

    spec = importlib.util.spec_from_file_location(
        "dump_schema", ROOT / "scripts" / "dump_schema.py"
    )
    dump = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dump)
    committed = (ROOT / "sql" / "mysql" / "schema.sql").read_text()
    assert dump.with_scratch_database(mariadb_base_url(), dump.render) == committed, (
        "sql/mysql/schema.sql is stale: run python scripts/dump_schema.py"
    )

    def created_by_file(url: str) -> dict[str, str]:
        engine = make_engine(url)
        with engine.begin() as conn:
            for statement in committed.split(";\n"):
                body = "\n".join(
                    line for line in statement.splitlines() if not line.startswith("--")
                ).strip()
                if body:
                    conn.execute(text(body))
            out = {t: conn.execute(text(f"SHOW CREATE TABLE `{t}`")).one()[1] for t in dump.TABLES}
            out["guard"] = conn.execute(text("SELECT id FROM export_task_guard")).scalar_one()
        engine.dispose()
        return out

    def created_by_alembic(url: str) -> dict[str, str]:
        engine = make_engine(url)
        upgrade_database(engine)
        with engine.connect() as conn:
            out = {t: conn.execute(text(f"SHOW CREATE TABLE `{t}`")).one()[1] for t in dump.TABLES}
            out["guard"] = conn.execute(text("SELECT id FROM export_task_guard")).scalar_one()
        engine.dispose()
        return out

    from_file = dump.with_scratch_database(mariadb_base_url(), created_by_file)
    from_alembic = dump.with_scratch_database(mariadb_base_url(), created_by_alembic)
    assert from_file == from_alembic


def test_existing_idempotency_keys_are_kept_by_the_key_table(db_url):
    from alembic import command

    from export_center.models import ExportRequestKey

    engine = make_engine(db_url)
    with engine.connect() as conn:
        cfg = alembic_config(db_url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        conn.commit()
    with engine.begin() as conn:
        for n, key in enumerate(("key-1", None, "Key-1")):
            conn.execute(
                insert(ExportTask.__table__).values(
                    **task_row(
                        task_no=f"exp_01J8Z4K200000000000000000{n}",
                        request_id=key,
                        status="SUCCEEDED",
                        phase="store",
                        attempt_count=1,
                    )
                )
            )
    upgrade_database(engine)
    keys = ExportRequestKey.__table__
    with engine.connect() as conn:
        rows = conn.execute(
            select(keys.c.request_key, ExportTask.__table__.c.task_no)
            .join(ExportTask.__table__, ExportTask.__table__.c.id == keys.c.task_id)
            .order_by(keys.c.request_key)
        ).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [
        ("Key-1", "exp_01J8Z4K2000000000000000002"),
        ("key-1", "exp_01J8Z4K2000000000000000000"),
    ]
