"""Every download is recorded; links carry an id and can be revoked (issue 25, items 1-2),
on SQLite and on MariaDB, through a real API on loopback.

A bearer download (307 to a signed link) and the signed link's answer each write one
``export_download`` row with the right user and address before the answer leaves; the
owner and admins read them at ``GET /api/v1/exports/{taskId}/downloads``; a spoofed
``X-Forwarded-For`` from a peer that is not a trusted proxy is not believed, one from a
trusted proxy is. A revoked link answers 410 ``LINK_REVOKED``; revoking every link
reaches links signed before links had ids; per-type limits cap uses and minutes.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from export_center import repository
from export_center.auth import ADMIN, DOWNLOAD_ALL
from export_center.db import reading
from export_center.registry_source import default_registry_path
from tests.support.helpers import ORDERS_PERMISSION, create, wait_state

pytestmark = pytest.mark.timeout(300)

SMALL = {"from": "1995-09-01", "to": "1995-09-03"}


def succeeded(stack: Any, client: httpx.Client) -> str:
    task_id = create(client, "csv", parameters=SMALL).json()["taskId"]
    assert wait_state(client, task_id)["state"] == "succeeded"
    return task_id


def link_of(client: httpx.Client, task_id: str, **headers: str) -> str:
    """A bearer download: the 307's signed link."""
    answer = client.get(f"/api/v1/exports/{task_id}/download", headers=headers)
    assert answer.status_code == 307, answer.text
    return answer.headers["location"]


def downloads(client: httpx.Client, task_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/api/v1/exports/{task_id}/downloads")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def link_id(url: str) -> str:
    return parse_qs(urlsplit(url).query)["link"][0]


def test_bearer_and_link_downloads_are_recorded_with_user_address_and_link(make_stack):
    stack = make_stack()
    alice = stack.client()
    task_id = succeeded(stack, alice)
    url = link_of(alice, task_id, **{"user-agent": "audit-test/1"})
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    served = anonymous.get(url, headers={"user-agent": "curl/8", "range": "bytes=0-9"})
    assert served.status_code == 206 and len(served.content) == 10
    started = time.monotonic()
    rows = downloads(alice, task_id)
    assert time.monotonic() - started < 1.0  # in the audit before the answer left
    assert [(r["type"], r["status"]) for r in rows] == [("link", 206), ("bearer", 307)]
    link, bearer = rows
    assert link["user"] == bearer["user"] == "alice"
    assert link["clientAddress"] == bearer["clientAddress"] == "127.0.0.1"
    assert link["linkId"] == bearer["linkId"] == link_id(url)
    assert (bearer["userAgent"], link["userAgent"]) == ("audit-test/1", "curl/8")
    assert link["range"] == "bytes=0-9" and bearer["range"] is None
    assert set(link) >= {"at", "user", "clientAddress", "userAgent", "linkId", "status"}
    # Another user of the tenant does not see the task; an admin (download-all) does.
    bob = stack.client("bob")
    assert bob.get(f"/api/v1/exports/{task_id}/downloads").status_code == 404
    admin = stack.client("carol", perms=[ORDERS_PERMISSION, DOWNLOAD_ALL])
    assert len(downloads(admin, task_id)) == 2
    # A link with a bad signature names no one and is not recorded; HEAD is no download.
    forged = url.replace("signature=", "signature=0")
    assert anonymous.get(forged).status_code == 403
    assert anonymous.head(url).status_code == 200
    assert len(downloads(alice, task_id)) == 2
    # The metric counts downloads by type.
    metrics = httpx.get(f"{stack.url}/metrics").text
    assert 'export_downloads_total{status="206",type="link"}' in metrics
    anonymous.close()


def test_a_spoofed_forwarded_for_is_believed_only_from_a_trusted_proxy(make_stack):
    untrusted = make_stack(api={"trusted_proxies": ["10.9.9.9"]})
    alice = untrusted.client()
    task_id = succeeded(untrusted, alice)
    link_of(alice, task_id, **{"x-forwarded-for": "203.0.113.9"})
    assert downloads(alice, task_id)[0]["clientAddress"] == "127.0.0.1"

    trusted = make_stack(api={"trusted_proxies": ["127.0.0.1/32", "10.0.0.0/8"]})
    alice = trusted.client()
    task_id = succeeded(trusted, alice)
    # Read right to left: the proxies (10.x) are skipped, the first other hop is the
    # client; what the client itself put further left is not believed.
    link_of(alice, task_id, **{"x-forwarded-for": "198.51.100.1, 203.0.113.9, 10.1.2.3"})
    assert downloads(alice, task_id)[0]["clientAddress"] == "203.0.113.9"
    link_of(alice, task_id)  # no header: the peer
    assert downloads(alice, task_id)[0]["clientAddress"] == "127.0.0.1"


def test_a_revoked_link_answers_410_and_revoking_all_reaches_every_older_link(make_stack):
    stack = make_stack()
    alice = stack.client()
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    task_id = succeeded(stack, alice)
    first, second = link_of(alice, task_id), link_of(alice, task_id)
    assert link_id(first) != link_id(second)
    revoke = f"/api/v1/exports/{task_id}/links/revoke"
    answer = alice.post(revoke, json={"linkId": link_id(first)})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"taskId": task_id, "linkId": link_id(first), "scope": "link"}
    gone = anonymous.get(first)
    assert gone.status_code == 410 and gone.json()["code"] == "LINK_REVOKED"
    assert anonymous.get(second).status_code == 200  # only that link
    refused = downloads(alice, task_id)[1]
    assert (refused["status"], refused["code"], refused["user"]) == (410, "LINK_REVOKED", "alice")
    # A link signed before links had ids still works, until every link is revoked.
    old = old_style_link(stack, task_id, "alice")
    assert anonymous.get(old).status_code == 200
    # Others cannot revoke; an admin of the tenant can.
    assert stack.client("bob").post(revoke).status_code == 404
    admin = stack.client("carol", perms=[ORDERS_PERMISSION, DOWNLOAD_ALL])
    assert admin.post(revoke, json={"reason": "sent to the wrong chat"}).status_code == 200
    for url in (second, old):
        assert anonymous.get(url).json()["code"] == "LINK_REVOKED"
    assert anonymous.get(link_of(alice, task_id)).status_code == 200  # a new link works
    bad = alice.post(revoke, json={"linkId": "not-a-link"})
    assert (bad.status_code, bad.json()["code"]) == (422, "INVALID_VALUE")
    # A link id of another task, or one made up, is no link of this task: 404, nothing
    # recorded, and the other task's link keeps working.
    other = link_of(alice, succeeded(stack, alice))
    root = stack.client("root", perms=[ADMIN])
    for foreign in (link_id(other), "0123456789abcdef"):
        for who, path in ((alice, revoke), (root, f"/api/v1/admin{revoke[7:]}")):
            body = {"linkId": foreign, "reason": "wrong task"}
            answer = who.post(path, json=body)
            assert (answer.status_code, answer.json()["code"]) == (404, "LINK_NOT_FOUND")
            assert foreign in answer.json()["message"]
    assert anonymous.get(other).status_code == 200
    # Both revocations are in the audit trail, with who and why.
    with reading(stack.runtime.engine) as conn:
        task = repository.read_task_by_no(conn, task_id)
        assert task is not None
        entries = repository.audit_entries(conn, task_id=task.id)
    revokes = [e for e in entries if e.action == "link_revoke"]
    assert [(e.actor, e.reason, (e.details or {})["scope"]) for e in revokes] == [
        ("user:t1/carol", "sent to the wrong chat", "all"),
        ("user:t1/alice", None, "link"),
    ]
    anonymous.close()


def old_style_link(stack: Any, task_id: str, user: str) -> str:
    """A link as signed before links had ids (``download-v2``)."""
    expires = int(time.time()) + 3600
    message = "\n".join(["download-v2", task_id, user, "t1", "PLATFORM", "own", str(expires)])
    secret = stack.settings.download_secret
    signature = hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()
    query = {"expires": expires, "user": user, "tenant": "t1", "app": "PLATFORM"}
    query |= {"scope": "own", "signature": signature}
    return f"/api/v1/exports/{task_id}/download?{urlencode(query)}"


def limited_registry(directory: Path) -> Path:
    text = default_registry_path().read_text(encoding="utf-8")
    head = "ORDERS:\n"
    assert text.count(head) == 1
    text = text.replace(head, head + "  links: {max_uses: 2, minutes: 1}\n")
    path = directory / "export_types.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_type_limits_how_often_and_how_long_a_link_works(make_stack, tmp_path):
    stack = make_stack(export_types_file=str(limited_registry(tmp_path)))
    alice = stack.client()
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    task_id = succeeded(stack, alice)
    url = link_of(alice, task_id)
    expires = int(parse_qs(urlsplit(url).query)["expires"][0])
    assert expires - time.time() <= 60  # minutes: 1
    detail = alice.get(f"/api/v1/exports/{task_id}").json()
    assert int(parse_qs(urlsplit(detail["downloadUrl"]).query)["expires"][0]) - time.time() <= 60
    # Each GET is a use, a range included (a ranged GET is how the rest of a file comes).
    ranged = anonymous.get(url, headers={"range": "bytes=10-"})
    assert ranged.status_code == 206
    assert anonymous.head(url).status_code == 200  # HEAD is free
    assert anonymous.get(url).status_code == 200
    third = anonymous.get(url, headers={"range": "bytes=20-"})
    assert (third.status_code, third.json()["code"]) == (410, "LINK_USED_UP")
    assert anonymous.get(link_of(alice, task_id)).status_code == 200  # a new link
    anonymous.close()


def test_download_rows_are_kept_as_long_as_the_audit_trail(make_stack):
    from sqlalchemy import update

    from export_center.db import db_now_plus
    from export_center.repository.downloads import DOWNLOADS, purge_downloads

    stack = make_stack()
    alice = stack.client()
    task_id = succeeded(stack, alice)
    for _ in range(3):
        link_of(alice, task_id)
    assert len(downloads(alice, task_id)) == 3
    engine = stack.runtime.engine
    with engine.begin() as conn:  # the oldest row is 401 days old
        first_id = min(
            r[0] for r in conn.execute(DOWNLOADS.select().with_only_columns(DOWNLOADS.c.id))
        )
        conn.execute(
            update(DOWNLOADS).where(DOWNLOADS.c.id == first_id).values(at=db_now_plus(-401 * 86400))
        )
        assert purge_downloads(conn, 400, 5000) == 1
        assert purge_downloads(conn, 400, 5000) == 0
    assert len(downloads(alice, task_id)) == 2
