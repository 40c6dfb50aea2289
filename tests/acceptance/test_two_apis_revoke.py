"""Two ``export-center serve`` processes sharing one MariaDB database (the cluster's two
APIs, without the broker): a download through either API is in the other's audit at
once, and a link revoked on one answers 410 ``LINK_REVOKED`` on both, from the next
request on (revocations live in the database; no process keeps a copy)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from export_center.auth import issue_token
from export_center.embedded import free_port
from export_center.healthz import wait_healthy
from tests.conftest import _fresh_mariadb, sample_url
from tests.support.helpers import ORDERS_PERMISSION, create, wait_state

pytestmark = [pytest.mark.mariadb, pytest.mark.timeout(300)]

JWT = "two-apis-jwt-secret-0123456789abcdef"
SMALL = {"from": "1995-09-01", "to": "1995-09-03"}


@pytest.fixture
def two_apis(tmp_path: Path, sample_dir: Path) -> Iterator[list[str]]:
    url, drop = _fresh_mariadb("two_apis")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.update(
        {
            "HOME": str(tmp_path),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "EXPORT_CENTER_DATA_DIR": str(tmp_path / "data"),
            "EXPORT_CENTER_DATABASE_URL": url,
            "EXPORT_CENTER_SAMPLE_DATABASE_URL": sample_url("mariadb", sample_dir),
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
            "EXPORT_CENTER_API__JWT_SECRET": JWT,
            "EXPORT_CENTER_API__DOWNLOAD_SECRET": "two-apis-download-secret-0123456789",
        }
    )
    procs: list[subprocess.Popen[str]] = []
    bases: list[str] = []
    try:
        for index in range(2):
            port = free_port()
            log = (tmp_path / f"api{index}.log").open("w")
            proc = subprocess.Popen(
                [sys.executable, "-m", "export_center.cli", "serve", "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
            procs.append(proc)
            base = f"http://127.0.0.1:{port}"
            wait_healthy(base, timeout=120, alive=lambda p=proc: p.poll() is None)  # type: ignore[misc]
            bases.append(base)
        yield bases
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
        drop()


def client(base: str, user: str = "alice") -> httpx.Client:
    token = issue_token(JWT, user=user, tenant="t1", permissions=[ORDERS_PERMISSION])
    return httpx.Client(base_url=base, headers={"authorization": f"Bearer {token}"}, timeout=60)


def test_a_link_revoked_on_one_api_answers_410_on_both(two_apis: list[str]) -> None:
    first, second = (client(base) for base in two_apis)
    task_id = create(first, "csv", parameters=SMALL).json()["taskId"]
    assert wait_state(first, task_id, timeout=120)["state"] == "succeeded"
    link = first.get(f"/api/v1/exports/{task_id}/download").headers["location"]
    other = second.get(f"/api/v1/exports/{task_id}/download").headers["location"]
    anonymous = [httpx.Client(base_url=base, timeout=30) for base in two_apis]
    assert [a.get(link).status_code for a in anonymous] == [200, 200]
    # Each download is in the audit at once, whichever API answered it and is asked.
    items = second.get(f"/api/v1/exports/{task_id}/downloads").json()["items"]
    assert [(i["type"], i["status"]) for i in items][:2] == [("link", 200), ("link", 200)]
    link_id = link.split("link=")[1].split("&")[0]
    revoked = first.post(f"/api/v1/exports/{task_id}/links/revoke", json={"linkId": link_id})
    assert revoked.status_code == 200, revoked.text
    started = time.monotonic()
    answers = [a.get(link) for a in anonymous]
    assert time.monotonic() - started < 1.0
    assert [(r.status_code, r.json()["code"]) for r in answers] == [(410, "LINK_REVOKED")] * 2
    assert [a.get(other).status_code for a in anonymous] == [200, 200]  # only that link
    # Revoking every link on the second API reaches the other link on the first.
    assert second.post(f"/api/v1/exports/{task_id}/links/revoke").status_code == 200
    assert [a.get(other).status_code for a in anonymous] == [410, 410]
    for c in (first, second, *anonymous):
        c.close()
