"""A newcomer's first hour with ``export-center serve`` in a subprocess: one installation
whatever the working directory, every command saying where its state is, one log format,
a 401 that says what to check, and Swagger UI that works offline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from export_center.embedded import free_port
from tests.helpers import wait_healthy


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.pop("XDG_DATA_HOME", None)
    return {**env, "HOME": str(home), "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false"}


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "export_center.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_one_installation_whatever_the_working_directory(tmp_path):
    home = tmp_path / "home"
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (home, first, second):
        folder.mkdir()
    env = _env(home)
    data = home / ".local" / "share" / "export-center"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "export_center.cli", "serve", "--port", str(port)],
        cwd=first,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        # A token made from another directory is accepted: same data directory, same key.
        made = _cli(["token", "--user", "alice", "--tenant", "acme"], second, env)
        assert made.returncode == 0, made.stderr
        assert f"data directory  {data}" in made.stderr and "database" in made.stderr
        token = made.stdout.strip()
        listed = httpx.get(f"{base}/api/v1/exports", headers={"authorization": f"Bearer {token}"})
        assert listed.status_code == 200, listed.text
        assert not (first / ".export-center").exists() and not (second / ".export-center").exists()
        # A token of another installation: the 401 says what to check.
        other_env = {**env, "EXPORT_CENTER_DATA_DIR": str(tmp_path / "elsewhere")}
        stranger = _cli(["token", "--user", "alice", "--tenant", "acme"], second, other_env)
        refused = httpx.get(
            f"{base}/api/v1/exports", headers={"authorization": f"Bearer {stranger.stdout.strip()}"}
        )
        assert refused.status_code == 401 and refused.json()["code"] == "TOKEN_WRONG_KEY"
        assert "EXPORT_CENTER_DATA_DIR" in refused.json()["message"]
        # Swagger UI works offline: the page and every asset it names come from here.
        page = httpx.get(f"{base}/docs")
        assert page.status_code == 200
        assets = [a for a in page.text.split('"') if a.startswith("/docs-assets/")]
        assert len(assets) >= 2 and "cdn" not in page.text.lower()
        for asset in assets:
            assert httpx.get(base + asset).status_code == 200, asset
    finally:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode in (0, -signal.SIGTERM), stderr[-2000:]  # uvicorn re-raises it
    lines = stderr.splitlines()
    # The last line of the header says where the download center is (a newcomer's next step).
    header = lines[: lines.index(f"  download center {base}/ui/") + 1]
    assert header[1] == (f"  data directory  {data} (default; EXPORT_CENTER_DATA_DIR changes it)")
    assert header[-2] == "  files           " + str(data / "files")
    logged = [json.loads(line) for line in lines[len(header) :]]  # every other line is JSON
    messages = [entry["message"] for entry in logged]
    assert any(m.startswith("Uvicorn running on") for m in messages), messages
    assert any(entry["logger"].startswith("uvicorn") for entry in logged)
    assert stdout == ""
