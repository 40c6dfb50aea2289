"""``export-center serve`` in a subprocess: an invalid registry stops start-up; a live
reload (admin API or SIGHUP) with a bad file keeps serving with the old registry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from export_center.auth import ADMIN, issue_token
from export_center.embedded import free_port
from export_center.healthz import wait_healthy
from export_center.registry_source import default_registry_path
from export_center.settings import load_or_create_secret


def _env(tmp_path: Path, registry: Path) -> dict[str, str]:
    return {
        **os.environ,
        "EXPORT_CENTER_DATA_DIR": str(tmp_path / "data"),
        "EXPORT_CENTER_EXPORT_TYPES_FILE": str(registry),
        "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
    }


def test_invalid_registry_stops_start_up(tmp_path):
    registry = tmp_path / "types.yaml"
    registry.write_text(
        default_registry_path().read_text().replace("batch_size: 5000", "batch_size: 9000", 1)
    )
    proc = subprocess.run(
        [sys.executable, "-m", "export_center.cli", "serve", "--port", str(free_port())],
        env=_env(tmp_path, registry),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert (
        "ORDERS.batch_size: must be an integer in 50..5,000, got 9000" in proc.stdout + proc.stderr
    )


def test_reload_keeps_the_old_registry_when_the_new_file_is_bad(tmp_path):
    registry = tmp_path / "types.yaml"
    good = default_registry_path().read_text()
    registry.write_text(good)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "export_center.cli", "serve", "--port", str(port)],
        env=_env(tmp_path, registry),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        secret = load_or_create_secret(tmp_path / "data" / "jwt-secret.txt")
        admin = issue_token(
            secret, user="ops", tenant="t", permissions=[ADMIN, "export:orders:create"]
        )
        user = issue_token(secret, user="u", tenant="t", permissions=["export:orders:create"])
        headers = {"authorization": f"Bearer {admin}"}
        registry.write_text(good.replace("app_scope: PLATFORM", "app_scope: EVERYONE", 1))
        refused = httpx.post(f"{base}/api/v1/admin/registry/reload", headers=headers)
        assert refused.status_code == 409 and refused.json()["code"] == "REGISTRY_INVALID"
        assert "ORDERS.app_scope: must be PLATFORM or MERCHANT" in refused.json()["message"]
        plain = httpx.post(
            f"{base}/api/v1/admin/registry/reload", headers={"authorization": f"Bearer {user}"}
        )
        assert plain.status_code == 403
        proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        types = httpx.get(
            f"{base}/api/v1/export-types", headers={"authorization": f"Bearer {user}"}
        ).json()
        assert [t["exportType"] for t in types] == ["ORDERS"]  # still served from the old registry
        registry.write_text(good.replace("title: Orders", "title: Orders (reloaded)", 1))
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        title = None
        while time.monotonic() < deadline:
            types = httpx.get(
                f"{base}/api/v1/export-types", headers={"authorization": f"Bearer {user}"}
            ).json()
            title = types[0]["title"]
            if title == "Orders (reloaded)":
                break
            time.sleep(0.2)
        assert title == "Orders (reloaded)"
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0]
    assert "registry reload refused, the previous registry stays" in output
