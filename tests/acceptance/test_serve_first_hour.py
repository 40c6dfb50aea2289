"""A newcomer's first hour with ``export-center serve`` in a subprocess: one installation
whatever the working directory, every command saying where its state is, one log format,
a 401 that says what to check, Swagger UI that works offline, and the README's curl tour,
run as written, twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from export_center.embedded import free_port
from export_center.healthz import wait_healthy
from tests.conftest import sample_url
from tests.support.helpers import read_xlsx

ROOT = Path(__file__).resolve().parents[2]


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


def _readme_tour() -> str:
    """The README's curl tour ("Use it as a service"), as written."""
    text = (ROOT / "README.md").read_text()
    start = text.index("TOKEN=$(export-center token --user alice --tenant acme)")
    return text[start : text.index("```", start)]


def test_the_readme_tour_runs_as_written_and_again_with_other_dates(tmp_path, sample_dir):
    """A newcomer runs the tour, then again with October's dates: a fresh requestId each
    time (a fixed one answered 409 IDEMPOTENCY_KEY_REUSED the second time)."""
    home = tmp_path / "home"
    home.mkdir()
    tools = tmp_path / "bin"
    tools.mkdir()
    # `export-center` as the README calls it, with this interpreter and checkout.
    wrapper = tools / "export-center"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m export_center.cli "$@"\n')
    wrapper.chmod(0o755)
    env = {
        **_env(home),
        "PATH": f"{tools}:{os.environ['PATH']}",
        "EXPORT_CENTER_SAMPLE_DATABASE_URL": sample_url("sqlite", sample_dir),
    }
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "export_center.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    tour = _readme_tour().replace("API=http://127.0.0.1:8000", f"API=http://127.0.0.1:{port}")
    october = tour.replace("1995-09-01", "1995-10-01").replace("1995-09-30", "1995-10-31")
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        for month, script in (("1995-09", tour), ("1995-10", october)):
            folder = tmp_path / month
            folder.mkdir()
            run = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert run.returncode == 0, (month, run.stdout, run.stderr)
            assert "IDEMPOTENCY_KEY_REUSED" not in run.stdout, month
            assert '"state":"succeeded"' in run.stdout, run.stdout
            rows = read_xlsx((folder / "September orders.xlsx").read_bytes())
            dates = [row[rows[0].index("Order date")] for row in rows[1:]]
            assert dates and {d.isoformat()[:7] for d in dates} == {month}, month
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
