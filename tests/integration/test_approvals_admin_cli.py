"""Approvals through the admin API and the operator CLI (issue 25 item 5), on SQLite
and MariaDB: an admin decides the requests of their tenant (never their own), an
operator lists, approves and rejects at the CLI, audited as ``operator:<login>``."""

from __future__ import annotations

import getpass
import json

from export_center import repository
from export_center.auth import ADMIN
from tests.integration.test_approvals import APPROVE, CREATE, approval_stack, audit_of
from tests.support.fault_provider import flaky
from tests.support.helpers import wait_state
from tests.support.operator_seed import cli_env, last_line, run_cli


def test_an_admin_decides_the_requests_of_their_tenant_but_not_their_own(
    make_stack, faulty, tmp_path
):
    stack = approval_stack(make_stack, faulty, tmp_path)
    faulty.reset(rows=30, estimate=5000)
    alice = stack.client("alice", perms=[CREATE])
    task_no = flaky(alice).json()["taskId"]
    admin = stack.client("root", perms=[ADMIN, CREATE])
    own = flaky(admin, columns=["id"]).json()["taskId"]
    queue = admin.get("/api/v1/admin/approvals").json()
    assert [i["taskId"] for i in queue["items"]] == [task_no, own]
    assert admin.post(f"/api/v1/admin/approvals/{own}/approve", json={}).json()["code"] == (
        "SELF_APPROVAL"
    )
    other = stack.client("eve", tenant="t2", perms=[ADMIN])
    assert other.get("/api/v1/admin/approvals").json()["items"] == []
    assert other.post(f"/api/v1/admin/approvals/{task_no}/approve", json={}).status_code == 404
    user = stack.client("bob", perms=[APPROVE])
    assert user.get("/api/v1/admin/approvals").status_code == 403
    done = admin.post(f"/api/v1/admin/approvals/{task_no}/approve", json={"reason": "fine"})
    assert done.status_code == 200, done.text
    assert wait_state(alice, task_no, timeout=60)["state"] == "succeeded"
    assert ("approval_decision", "approved", "user:t1/root") in audit_of(stack, task_no)


def test_the_operator_cli_lists_approves_and_rejects(make_stack, faulty, tmp_path):
    stack = approval_stack(make_stack, faulty, tmp_path)
    faulty.reset(rows=30, estimate=5000)
    alice = stack.client("alice", perms=[CREATE])
    first = flaky(alice, columns=["id"]).json()["taskId"]
    second = flaky(alice, columns=["amount"]).json()["taskId"]
    env = cli_env(stack.settings)
    listed = run_cli(["approvals", "list", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["taskId"] for r in rows] == [first, second]
    assert rows[0]["approverPermission"] == APPROVE and rows[0]["requestedBy"] == "alice"
    table = run_cli(["approvals", "list"], env)
    assert table.returncode == 0 and first in table.stdout and "5,000 rows" in table.stdout
    assert run_cli(["approvals", "reject", first], env).returncode == 2  # --reason needed
    rejected = run_cli(["approvals", "reject", first, "--reason", "not now"], env)
    assert rejected.returncode == 0, rejected.stderr
    assert "rejected" in rejected.stdout
    detail = alice.get(f"/api/v1/exports/{first}").json()
    assert detail["state"] == "rejected"
    login = getpass.getuser()
    assert detail["error"]["message"] == f"rejected by {login}: not now"
    again = run_cli(["approvals", "approve", first], env)
    assert again.returncode == 1 and last_line(again).startswith("NOT_AWAITING_APPROVAL: ")
    approved = run_cli(["approvals", "approve", second, "--reason", "ok"], env)
    assert approved.returncode == 0, approved.stderr
    assert wait_state(alice, second, timeout=60)["state"] == "succeeded"
    assert ("approval_decision", "rejected", f"operator:{login}") in audit_of(stack, first)
    with stack.runtime.engine.connect() as conn:
        task = repository.read_task_by_no(conn, second)
    assert task is not None and task.status == "SUCCEEDED"
