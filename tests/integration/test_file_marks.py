"""XLSX files carry their task id, requester and creation time in their document
properties (core and custom), and, for a type with ``trace_footer: true``, a printed
footer line on every sheet; read back with openpyxl, on SQLite and on MariaDB, for a
sharded export (ORDERS: shards assembled into one file) and a single-stream one
(CUSTOMERS)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openpyxl
import pytest

from export_center.registry_source import default_registry_path
from tests.integration.test_downloads_audit import link_of
from tests.support.helpers import ORDERS_PERMISSION, create, wait_state

pytestmark = pytest.mark.timeout(300)

CUSTOMERS_PERMISSION = "export:customers:create"


def footer_registry(directory: Path) -> Path:
    text = default_registry_path().read_text(encoding="utf-8")
    assert text.count("ORDERS:\n") == 1
    text = text.replace("ORDERS:\n", "ORDERS:\n  trace_footer: true\n")
    path = directory / "export_types.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def workbook(stack, client: httpx.Client, task_id: str) -> openpyxl.Workbook:
    detail = wait_state(client, task_id)
    assert detail["state"] == "succeeded", detail
    with httpx.Client(base_url=stack.url, timeout=30) as anonymous:
        data = anonymous.get(link_of(client, task_id)).content
    return openpyxl.load_workbook(io.BytesIO(data))


def test_xlsx_files_name_their_task_requester_and_time(make_stack, tmp_path):
    stack = make_stack(export_types_file=str(footer_registry(tmp_path)))
    alice = stack.client(perms=[ORDERS_PERMISSION, CUSTOMERS_PERMISSION])
    before = datetime.now(UTC).replace(microsecond=0)
    orders = create(alice, "xlsx", parameters={"from": "1995-09-01", "to": "1995-09-03"})
    customers = create(alice, "xlsx", exportType="CUSTOMERS", parameters={})
    assert orders.status_code == customers.status_code == 202, (orders.text, customers.text)
    for answer, footer in ((orders, True), (customers, False)):
        task_id = answer.json()["taskId"]
        book = workbook(stack, alice, task_id)
        props = book.properties
        assert props.identifier == task_id
        assert props.creator == "Export Center"
        assert task_id in props.description and "t1/alice" in props.description
        custom = {p.name: p.value for p in book.custom_doc_props.props}
        assert custom["ExportCenterTaskId"] == task_id
        assert custom["ExportCenterRequester"] == "t1/alice"
        created = custom["ExportCenterCreated"]
        created = created if isinstance(created, datetime) else datetime.fromisoformat(created)
        created = created if created.tzinfo else created.replace(tzinfo=UTC)
        assert before.timestamp() - 2 <= created.timestamp() <= datetime.now(UTC).timestamp()
        for sheet in book.worksheets:
            text = sheet.oddFooter.left.text or ""
            if footer:
                assert task_id in text and "t1/alice" in text, text
            else:
                assert text == ""
