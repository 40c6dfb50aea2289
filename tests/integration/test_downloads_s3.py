"""Downloads from S3 (a real S3Proxy), on SQLite and on MariaDB: each presigned hop is a
recorded download with the right user and address, minted per click and valid 300 s; a
hop already minted lives out its 300 s after its link is revoked (``download =
redirect``), while with ``download = proxy`` a revoked link stops at once.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.integration.test_downloads_audit import downloads, link_id, link_of, succeeded
from tests.support.s3 import storage_settings

pytestmark = [pytest.mark.s3, pytest.mark.timeout(300)]


def test_each_presigned_hop_is_recorded_and_a_minted_hop_outlives_its_revoked_link(
    make_stack, s3_endpoint, bucket
):
    stack = make_stack(storage=storage_settings(s3_endpoint, bucket))
    alice = stack.client()
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    task_id = succeeded(stack, alice)
    url = link_of(alice, task_id)
    hops = [anonymous.get(url, headers={"user-agent": "browser/1"}) for _ in range(2)]
    assert [h.status_code for h in hops] == [307, 307]
    # Signed for each click (two clicks in one second sign the same URL: X-Amz-Date).
    first = httpx.URL(hops[0].headers["location"])
    assert str(first).startswith(s3_endpoint + "/")
    assert parse_qs(urlsplit(str(first)).query)["X-Amz-Expires"] == ["300"]
    rows = downloads(alice, task_id)
    assert [(r["type"], r["status"]) for r in rows] == [
        ("presigned", 307),
        ("presigned", 307),
        ("bearer", 307),
    ]
    assert {(r["user"], r["clientAddress"], r["linkId"]) for r in rows} == {
        ("alice", "127.0.0.1", link_id(url))
    }
    assert alice.post(f"/api/v1/exports/{task_id}/links/revoke").status_code == 200
    assert anonymous.get(url).json()["code"] == "LINK_REVOKED"
    # The hop minted before the revocation is the bucket's: it works for its 300 s.
    assert httpx.get(first).status_code == 200
    anonymous.close()


def test_with_proxy_downloads_a_revoked_link_stops_at_once(make_stack, s3_endpoint, bucket):
    stack = make_stack(storage=storage_settings(s3_endpoint, bucket, download="proxy"))
    alice = stack.client()
    anonymous = httpx.Client(base_url=stack.url, timeout=30)
    task_id = succeeded(stack, alice)
    url = link_of(alice, task_id)
    part = anonymous.get(url, headers={"range": "bytes=0-99"})
    assert part.status_code == 206
    assert alice.post(f"/api/v1/exports/{task_id}/links/revoke").status_code == 200
    rest = anonymous.get(url, headers={"range": "bytes=100-"})
    assert (rest.status_code, rest.json()["code"]) == (410, "LINK_REVOKED")
    rows = downloads(alice, task_id)
    assert [(r["type"], r["status"], r["range"]) for r in rows] == [
        ("link", 410, "bytes=100-"),
        ("link", 206, "bytes=0-99"),
        ("bearer", 307, None),
    ]
    anonymous.close()
