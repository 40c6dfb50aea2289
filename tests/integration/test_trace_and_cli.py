"""Traceable files and the operator side of downloads (issue 25, items 1, 2 and 6), on
SQLite and on MariaDB.

``export-center trace FILE`` names the task, the requester and the downloads of a file
that was downloaded, from its bytes alone (exit 0), and calls an edited copy unknown
(exit 1); the admin API answers the same from a hash or an uploaded file, within the
admin's tenant. ``tasks show`` lists a task's downloads, ``downloads list`` filters them,
``links revoke`` revokes links (410 on the next use) and writes the audit trail.
"""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest

from export_center.auth import ADMIN
from tests.integration.test_downloads_audit import downloads, link_id, link_of
from tests.support.helpers import ORDERS_PERMISSION, create, wait_state
from tests.support.operator_seed import cli_env, last_line, run_cli

pytestmark = pytest.mark.timeout(300)

SMALL = {"from": "1995-09-01", "to": "1995-09-03"}


def test_trace_finds_the_task_of_a_downloaded_file_and_refuses_an_edited_one(make_stack, tmp_path):
    stack = make_stack()
    alice = stack.client()
    task_id = create(alice, "xlsx", parameters=SMALL).json()["taskId"]
    assert wait_state(alice, task_id)["state"] == "succeeded"
    other = create(alice, "csv", parameters=SMALL).json()["taskId"]
    assert wait_state(alice, other)["state"] == "succeeded"
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    data = anonymous.get(link_of(alice, task_id, **{"user-agent": "tracer/1"})).content
    assert data[:2] == b"PK"
    downloaded = tmp_path / "orders.xlsx"
    downloaded.write_bytes(data)
    env = cli_env(stack.settings)

    found = run_cli(["trace", str(downloaded)], env)
    assert found.returncode == 0, found.stderr
    assert task_id in found.stdout and other not in found.stdout
    assert "t1 / PLATFORM / alice" in found.stdout
    assert "downloads of" in found.stdout and "tracer/1" in found.stdout  # the bearer row
    assert "127.0.0.1" in found.stdout and " link " in found.stdout
    as_json = json.loads(run_cli(["trace", str(downloaded), "--json"], env).stdout)
    (match,) = as_json["matches"]
    assert (match["taskId"], match["requester"], match["kind"]) == (task_id, "alice", "file")
    assert [d["type"] for d in match["downloads"]] == ["link", "bearer"]

    edited = tmp_path / "edited.xlsx"
    edited.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    refused = run_cli(["trace", str(edited)], env)
    assert refused.returncode == 1
    assert "unknown" in last_line(refused) and task_id not in refused.stdout + refused.stderr

    admin = stack.client("root", perms=[ADMIN])
    sha = hashlib.sha256(data).hexdigest()
    by_hash = admin.post("/api/v1/admin/trace", json={"sha256": sha.upper()})
    assert by_hash.status_code == 200, by_hash.text
    assert [m["taskId"] for m in by_hash.json()["matches"]] == [task_id]
    upload = {"content-type": "application/octet-stream"}
    by_file = admin.post("/api/v1/admin/trace/file", content=data, headers=upload)
    assert by_file.status_code == 200, by_file.text
    assert by_file.json()["known"] is True and by_file.json()["sha256"] == sha
    edited_answer = admin.post(
        "/api/v1/admin/trace/file", content=edited.read_bytes(), headers=upload
    ).json()
    assert (edited_answer["known"], edited_answer["matches"]) == (False, [])
    stranger = stack.client("root", tenant="t2", perms=[ADMIN])
    assert stranger.post("/api/v1/admin/trace", json={"sha256": sha}).json()["known"] is False
    assert alice.post("/api/v1/admin/trace", json={"sha256": sha}).status_code == 403
    bad = admin.post("/api/v1/admin/trace", json={"sha256": "abc"})
    assert (bad.status_code, bad.json()["code"]) == (422, "INVALID_VALUE")
    anonymous.close()


def test_the_cli_and_admin_api_show_downloads_and_revoke_links(make_stack):
    stack = make_stack()
    alice = stack.client()
    task_id = create(alice, "csv", parameters=SMALL).json()["taskId"]
    assert wait_state(alice, task_id)["state"] == "succeeded"
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    url = link_of(alice, task_id)
    assert anonymous.get(url).status_code == 200
    env = cli_env(stack.settings)

    shown = run_cli(["tasks", "show", task_id], env)
    assert shown.returncode == 0, shown.stderr
    assert "downloads (newest first)" in shown.stdout and link_id(url) in shown.stdout
    listed = json.loads(run_cli(["downloads", "list", "--type", "link", "--json"], env).stdout)
    assert [(d["taskId"], d["type"], d["user"]) for d in listed] == [(task_id, "link", "alice")]
    nobody = json.loads(run_cli(["downloads", "list", "--user", "bob", "--json"], env).stdout)
    assert nobody == []

    admin = stack.client("root", perms=[ADMIN])
    page = admin.get("/api/v1/admin/downloads", params={"user": "alice", "type": "bearer"})
    assert page.status_code == 200, page.text
    assert [d["type"] for d in page.json()["items"]] == ["bearer"]
    since = admin.get("/api/v1/admin/downloads", params={"since": "2999-01-01T00:00:00Z"})
    assert since.json()["items"] == []
    assert alice.get("/api/v1/admin/downloads").status_code == 403
    # Newest first, a page at a time; an admin of another tenant sees none of them.
    first = admin.get("/api/v1/admin/downloads", params={"limit": 1}).json()
    assert [d["type"] for d in first["items"]] == ["link"] and first["nextBefore"]
    params = {"limit": 1, "before": first["nextBefore"]}
    second = admin.get("/api/v1/admin/downloads", params=params).json()
    assert [d["type"] for d in second["items"]] == ["bearer"]
    other_admin = stack.client("root", tenant="t2", perms=[ADMIN])
    assert other_admin.get("/api/v1/admin/downloads").json()["items"] == []
    other_task = other_admin.get("/api/v1/admin/downloads", params={"task": task_id}).json()
    assert other_task["items"] == []
    revoked = admin.post(
        f"/api/v1/admin/exports/{task_id}/links/revoke",
        json={"linkId": link_id(url), "reason": "left the company"},
    )
    assert revoked.status_code == 200, revoked.text
    assert anonymous.get(url).json()["code"] == "LINK_REVOKED"

    fresh = link_of(alice, task_id)
    done = run_cli(["links", "revoke", task_id, "--reason", "leaked in a ticket"], env)
    assert done.returncode == 0, done.stderr
    assert "every link revoked" in done.stdout
    assert anonymous.get(fresh).json()["code"] == "LINK_REVOKED"
    report = json.loads(run_cli(["tasks", "show", task_id, "--json"], env).stdout)
    reasons = [a["reason"] for a in report["audit"] if a["action"] == "link_revoke"]
    assert reasons == ["leaked in a ticket", "left the company"]
    assert [d["type"] for d in report["downloads"]][-2:] == ["link", "bearer"]
    assert downloads(alice, task_id)[0]["code"] == "LINK_REVOKED"
    foreign = run_cli(
        ["links", "revoke", task_id, "--link", "0123456789abcdef", "--reason", "wrong"], env
    )
    assert foreign.returncode == 1 and last_line(foreign).startswith("LINK_NOT_FOUND: ")
    missing = run_cli(["links", "revoke", "exp_01M8QZKN3RQRYV1AQSV6Q4X3RZ", "--reason", "xyz"], env)
    assert missing.returncode == 1 and last_line(missing).startswith("TASK_NOT_FOUND: ")
    anonymous.close()


def test_hashes_are_stored_for_every_succeeded_file(make_stack):
    stack = make_stack()
    alice = stack.client()
    task_id = create(alice, "csv", parameters=SMALL).json()["taskId"]
    assert wait_state(alice, task_id)["state"] == "succeeded"
    manifest = alice.get(f"/api/v1/exports/{task_id}/manifest").json()
    admin = stack.client("root", perms=[ORDERS_PERMISSION, ADMIN])
    for entry in manifest["files"]:
        answer = admin.post("/api/v1/admin/trace", json={"sha256": entry["sha256"]}).json()
        assert [m["taskId"] for m in answer["matches"]] == [task_id]
