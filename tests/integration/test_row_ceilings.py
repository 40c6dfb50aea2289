"""Row ceilings by permission (issue 25 item 3), over real HTTP on SQLite and MariaDB.

The FLAKY provider (tests/support/fault_provider.py) answers a schema request with the
estimate the test sets (``Behaviour.estimate``), which may lie about the rows it then
serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from export_center import repository
from export_center.models import ExportTask
from tests.support.fault_provider import FAULT_TOKEN, FaultProviderServer, flaky, registry_file
from tests.support.helpers import wait_state

CREATE = "export:flaky:create"
BULK = "export:flaky:bulk"
CEILINGS = f"  row_ceilings:\n    {CREATE}: 1000\n    {BULK}: 100000\n"


def governed_stack(make_stack: Any, faulty: FaultProviderServer, tmp_path: Path, extra: str) -> Any:
    path = registry_file(tmp_path, faulty.url)
    path.write_text(path.read_text() + extra)
    return make_stack(export_types_file=str(path), provider={"internal_token": FAULT_TOKEN})


def task_count(stack: Any) -> int:
    with stack.runtime.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(ExportTask)).scalar_one())


def test_an_estimate_above_the_ceiling_is_refused_before_a_task_exists(
    make_stack, faulty, tmp_path
):
    stack = governed_stack(make_stack, faulty, tmp_path, CEILINGS)
    faulty.reset(rows=2500, estimate=2500)
    answer = flaky(stack.client(perms=[CREATE]))
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert body["code"] == "ROW_CEILING"
    assert "1,000" in body["message"] and "2,500" in body["message"], body
    assert "约有 2,500 行" in body["messageZh"] and "上限 1,000 行" in body["messageZh"]
    assert task_count(stack) == 0
    # The strongest permission held applies: the bulk ceiling lets the same export run.
    client = stack.client("bob", perms=[CREATE, BULK])
    created = flaky(client)
    assert created.status_code in (200, 201, 202), created.text
    detail = wait_state(client, created.json()["taskId"], timeout=60)
    assert detail["state"] == "succeeded", detail
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, detail["taskId"])
    assert task is not None and task.row_ceiling == 100000 and task.row_count == 2500


def test_a_wrong_estimate_is_stopped_while_writing_and_the_file_deleted(
    make_stack, faulty, tmp_path
):
    stack = governed_stack(make_stack, faulty, tmp_path, CEILINGS)
    behaviour = faulty.reset(rows=2500, estimate=500)  # the provider lies: 500 < 1000
    client = stack.client(perms=[CREATE])
    created = flaky(client)
    assert created.status_code in (200, 201, 202), created.text
    detail = wait_state(client, created.json()["taskId"], timeout=60)
    assert detail["state"] == "failed", detail
    assert detail["error"]["code"] == "ROW_CEILING", detail["error"]
    assert "1,000" in detail["error"]["message"]
    assert detail["attempts"] == 1 and {r["version"] for r in behaviour.requests} <= {1}
    assert detail.get("downloadUrl") is None
    assert list(stack.runtime.storage.list()) == []  # no file, not a truncated one
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, detail["taskId"])
    assert task is not None and task.row_ceiling == 1000 and task.object_key is None


def test_no_ceiling_for_a_caller_without_a_listed_permission(make_stack, faulty, tmp_path):
    stack = governed_stack(make_stack, faulty, tmp_path, f"  row_ceilings:\n    {BULK}: 10\n")
    faulty.reset(rows=120, estimate=120)
    client = stack.client(perms=[CREATE])
    created = flaky(client)
    assert created.status_code in (200, 201, 202), created.text
    detail = wait_state(client, created.json()["taskId"], timeout=60)
    assert detail["state"] == "succeeded", detail
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, detail["taskId"])
    assert task is not None and task.row_ceiling is None and task.row_count == 120
