"""Every format of the table end to end over real HTTP, on SQLite and MariaDB: the API
accepts exactly the table's names (any letter case) and lists them per type, a single-
stream and a sharded export of each format end with the table's extension in the object
key and file name and the table's content type on the download, read by a real reader;
a name outside the table is refused by the API, and a task row naming one fails its
attempt with ``UNKNOWN_FORMAT``, both messages naming the table's formats."""

from __future__ import annotations

import time

import pytest

from export_center import repository
from export_center.commands import COMMAND_TAG
from export_center.writers.formats import DEFAULT_FORMAT, FORMATS, format_choices, format_names
from providers import tpch
from tests.conftest import SAMPLE_SCALE
from tests.support.helpers import ORDERS_PERMISSION, Stack, create, wait_state
from tests.unit.test_formats import READERS

ORDERS = int(SAMPLE_SCALE * tpch.ORDERS_PER_SCALE)
CUSTOMERS = int(SAMPLE_SCALE * 150_000)
CUSTOMERS_PERMISSION = "export:customers:create"
ALL_DATES = {"from": "1992-01-01", "to": "1998-12-31"}


def _task(stack: Stack, task_no: str) -> repository.Task:
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, task_no)
    assert task is not None
    return task


@pytest.mark.parametrize("name", list(FORMATS))
def test_each_format_exports_single_and_sharded_with_the_tables_names(
    stack: Stack, name: str
) -> None:
    entry = FORMATS[name]
    client = stack.client(perms=[ORDERS_PERMISSION, CUSTOMERS_PERMISSION])
    types = client.get("/api/v1/export-types").json()
    assert len(types) == 2 and all(t["formats"] == format_names() for t in types)
    runs = (  # CUSTOMERS: one stream; ORDERS over both dates: 16 day shards
        (name.upper(), "CUSTOMERS", {}, None, CUSTOMERS),
        (name.capitalize(), "ORDERS", ALL_DATES, 16, ORDERS),
    )
    for value, export_type, parameters, shards, count in runs:
        answer = create(
            client, value, exportType=export_type, parameters=parameters, taskName="orders"
        )
        assert answer.status_code == 202, answer.text
        detail = wait_state(client, answer.json()["taskId"])
        assert detail["state"] == "succeeded", detail
        assert detail["format"] == name
        assert detail["fileName"] == f"orders.{entry.extension}"
        task = _task(stack, detail["taskId"])
        assert task.format == entry.task_value
        assert task.shards_total == shards
        assert task.object_key is not None and task.object_key.endswith(f".{entry.extension}")
        assert task.content_type == entry.content_type
        download = client.get(detail["downloadUrl"])
        assert download.status_code == 200, download.text
        assert download.headers["content-type"] == entry.content_type
        rows = READERS[name](download.content)
        assert len(rows) == count + 1


def test_a_name_outside_the_table_is_refused_by_the_api_and_by_the_attempt(
    stack: Stack,
) -> None:
    client = stack.client()
    for value in ("pdf", "", " csvx", "xls"):
        answer = create(client, value)
        assert answer.status_code == 422, answer.text
        assert answer.json() == {
            "code": "INVALID_FORMAT",
            "message": f"format must be {format_choices()}, got {value!r}",
            "field": "format",
        }
    # A task row naming a format the table lacks (written before a format was removed):
    # its attempt fails for good, naming the formats there are.
    new = repository.NewTask(
        export_type="ORDERS",
        format="PDF",
        task_name="orders",
        parameters={},
        tenant_id="t1",
        app_code="PLATFORM",
        requested_by="alice",
        max_attempts=3,
    )
    with stack.runtime.engine.begin() as conn:
        created = repository.create_task(
            conn,
            new,
            topic=stack.settings.command_topic,
            tag=COMMAND_TAG,
            limits=repository.CreateLimits(0, 100, 100),
        ).task
    deadline = time.monotonic() + 60
    task = created
    while task.status not in ("FAILED", "SUCCEEDED") and time.monotonic() < deadline:
        time.sleep(0.05)
        task = _task(stack, created.task_no)
    assert task.status == "FAILED"
    assert task.failure_code == "UNKNOWN_FORMAT"
    assert task.failure_message.endswith(f": unknown file format 'PDF' ({format_choices()})")
    # The attempt was set up with the default format's key before its check failed.
    assert task.object_key is None or task.object_key.endswith(f".{DEFAULT_FORMAT.extension}")
