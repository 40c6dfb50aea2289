"""The typed rows have one face: their fields are their table's columns, with the model's
Python types, and they are read by attribute only. A migration that adds a column to
``export_task`` or ``export_outbox`` (and the model, which tests/migrations holds equal
to the migrations) therefore has to add the field, or these tests fail."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from sqlalchemy import Engine, Table, inspect

from export_center import repository
from export_center.db import make_engine
from export_center.models import ExportOutbox, ExportTask
from export_center.repository import OutboxRow, Task
from export_center.repository.tables import OUTBOX, TASKS
from export_center.runtime import upgrade_database

ROWS = [(Task, TASKS, ExportTask), (OutboxRow, OUTBOX, ExportOutbox)]
ROW_IDS = ["task", "outbox"]


def _fields(row_type: type[Any]) -> list[str]:
    return [field.name for field in dataclasses.fields(row_type)]


@pytest.mark.parametrize(("row_type", "table", "model"), ROWS, ids=ROW_IDS)
def test_fields_are_the_table_columns_in_order(row_type: type[Any], table: Table, model: Any):
    assert _fields(row_type) == [column.name for column in table.columns]


@pytest.mark.parametrize(("row_type", "table", "model"), ROWS, ids=ROW_IDS)
def test_field_types_are_the_model_types(row_type: type[Any], table: Table, model: Any):
    """Each field has the type the model maps its column to (``Mapped[X]`` gives ``X``),
    so a nullable column is ``X | None`` and a NOT NULL column is never optional."""
    fields = typing.get_type_hints(row_type)
    mapped = typing.get_type_hints(model)
    assert {name: fields[name] for name in _fields(row_type)} == {
        name: typing.get_args(mapped[name])[0] for name in _fields(row_type)
    }
    for column in table.columns:
        optional = type(None) in typing.get_args(fields[column.name])
        assert optional == column.nullable, column.name


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    upgrade_database(engine)
    yield engine
    engine.dispose()


def test_migrated_database_has_exactly_the_row_fields(engine: Engine):
    """The columns a migrated database really has (SQLite and MariaDB) are the fields;
    the order is the migrations' (later columns come last), and rows are read by name."""
    columns = inspect(engine)
    assert sorted(c["name"] for c in columns.get_columns("export_task")) == sorted(_fields(Task))
    assert sorted(c["name"] for c in columns.get_columns("export_outbox")) == sorted(
        _fields(OutboxRow)
    )


def _created(engine: Engine) -> Task:
    with engine.begin() as conn:
        result = repository.create_task(
            conn,
            repository.NewTask(
                export_type="ORDERS",
                format="CSV",
                task_name="x",
                parameters={"n": 1},
                tenant_id="t",
                app_code="PLATFORM",
                requested_by="u",
                max_attempts=3,
            ),
            topic="t",
            tag="EXPORT_TASK",
            limits=repository.CreateLimits(),
        )
    return result.task


def _assert_typed(row: Any) -> None:
    """Every value read from the database has its field's type (None only where the
    field allows it)."""
    hints = typing.get_type_hints(type(row))
    for name in _fields(type(row)):
        value = getattr(row, name)
        allowed = typing.get_args(hints[name]) or (hints[name],)
        assert isinstance(value, allowed), (name, value, allowed)


def test_rows_read_from_the_database_are_typed_and_read_by_attribute_only(engine: Engine):
    task = _created(engine)
    with engine.begin() as conn:
        claimed = repository.claim_task(
            conn, task.id, 1, "w/1", lease_seconds=60, max_duration_seconds=600
        )
        assert claimed
        read = repository.read_task(conn, task.id)
        outbox = repository.outbox_rows(conn, task.id)
    assert read is not None and len(outbox) == 1
    assert (read.status, read.lease_owner, read.dispatch_version) == ("RUNNING", "w/1", 1)
    assert (outbox[0].task_id, outbox[0].message_key) == (task.id, task.task_no)
    for row in (task, read, outbox[0]):
        _assert_typed(row)
        assert not isinstance(row, Mapping)
        with pytest.raises(TypeError):
            row["status"]  # type: ignore[index]
        with pytest.raises(TypeError):
            dict(row)  # type: ignore[call-overload]
        with pytest.raises(dataclasses.FrozenInstanceError):
            row.status = "FAILED"  # type: ignore[misc]


def test_repository_exports_no_task_row_alias():
    assert not hasattr(repository, "TaskRow")
    assert "TaskRow" not in repository.__all__


def test_a_row_is_built_from_every_column():
    """Building a row from a SELECT mapping takes exactly the columns: a missing column
    is an error, never a silently absent field."""
    values = {name: None for name in _fields(OutboxRow)}
    assert OutboxRow.from_row(values).event_id is None
    del values["event_id"]
    with pytest.raises(KeyError, match="event_id"):
        OutboxRow.from_row(values)
