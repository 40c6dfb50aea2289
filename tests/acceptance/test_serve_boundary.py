"""``export-center serve`` as a newcomer starts it (the embedded default, in a
subprocess): slow-header connections are cut at its request deadline while /healthz
answers, a rebound name gets nothing, another site's form changes nothing, and the page
it serves may sign in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from export_center.embedded import free_port
from export_center.healthz import wait_healthy
from tests.support.slowloris import hold


def test_serve_cuts_slow_requests_and_answers_only_its_own_names_and_page(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.update(
        {
            "HOME": str(tmp_path),
            "EXPORT_CENTER_DATA_DIR": str(tmp_path / "data"),
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
            "EXPORT_CENTER_API__REQUEST_TIMEOUT_SECONDS": "3",
        }
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "export_center.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        clients = hold(port, 50, interval=1.0, lines=30)  # 30 s of headers each
        answered = 0
        while sum(c.is_alive() for c in clients) >= 40:
            assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
            answered += 1
            time.sleep(0.2)
        for client in clients:
            client.join(30)
            assert client.cut and client.sent < client.lines
            assert client.answer.startswith(b"HTTP/1.1 408 ")
        assert answered >= 3

        rebound = {"host": f"rebound.example:{port}"}
        for path in ("/ui/", "/healthz", "/docs", "/api/v1/dev/sign-in"):
            refused = httpx.get(base + path, headers=rebound)
            assert refused.status_code == 421 and refused.json()["code"] == "UNTRUSTED_HOST"
        body = {"user": "ops", "tenant": "acme", "role": "admin"}
        cross = httpx.post(
            f"{base}/api/v1/dev/sign-in",
            json=body,
            headers={"origin": "http://localhost:1", "sec-fetch-site": "cross-site"},
        )
        assert cross.status_code == 403 and cross.json()["code"] == "CROSS_SITE_REQUEST"
        own = httpx.post(f"{base}/api/v1/dev/sign-in", json=body, headers={"origin": base})
        assert own.status_code == 200 and own.headers["cache-control"] == "no-store"
        token = {"authorization": f"Bearer {own.json()['token']}"}
        reload = httpx.post(
            f"{base}/api/v1/admin/registry/reload",
            headers={**token, "origin": "http://evil.example"},
        )
        assert reload.status_code == 403 and reload.json()["code"] == "CROSS_SITE_REQUEST"
        assert httpx.post(f"{base}/api/v1/admin/registry/reload", headers=token).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode in (0, -signal.SIGTERM), stderr[-2000:]
    assert "its request did not arrive within 3 s" in stderr
