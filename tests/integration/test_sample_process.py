"""The sample providers in their child process (``export_center.sample_process``), the
embedded default's second core: the same files as in-process providers, and no child
left behind when the parent stops or dies."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from export_center.auth import issue_token
from tests.support.helpers import create, download, wait_state


def _sheets(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.startswith("xl/worksheets/")}


def _export(stack, fmt: str) -> bytes:
    client = stack.client()
    answer = create(client, fmt)
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"])
    assert detail["state"] == "succeeded", detail
    return download(client, detail)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:  # a zombie is not serving
        return fh.read().rpartition(")")[2].split()[0] != "Z"


def test_exports_through_the_child_equal_the_in_process_ones(make_stack):
    """One stack at a time: two stacks on one database would run each other's commands
    (a stack resends the commands it finds unfinished at start) into their own files."""
    child = make_stack(sample_providers_process=True)
    runtime = child.runtime
    assert runtime.self_url is not None and runtime.self_url != child.url
    assert httpx.get(f"{runtime.self_url}/healthz", timeout=5).status_code == 200
    # The child checks the internal token like any provider.
    refused = httpx.post(f"{runtime.self_url}/internal/exports/v1/ORDERS/batches", content=b"{}")
    assert refused.status_code == 401
    through_child = {"csv": _export(child, "csv"), "xlsx": _export(child, "xlsx")}
    child.stop()
    in_process = make_stack(sample_providers_process=False)
    assert in_process.runtime.self_url == in_process.url
    assert through_child["csv"] == _export(in_process, "csv")
    assert _sheets(through_child["xlsx"]) == _sheets(_export(in_process, "xlsx"))


def test_the_child_stops_with_the_stack(make_stack):
    stack = make_stack(sample_providers_process=True)
    url = stack.runtime.self_url
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    stack.stop()
    try:
        httpx.get(f"{url}/healthz", timeout=2)
    except httpx.ConnectError:
        return
    raise AssertionError("the sample provider process still answers after the stop")


PARENT = """
import os, sys
from export_center.sample_process import SampleProviderProcess
child = SampleProviderProcess(
    database_url=sys.argv[1], token="t", secret="s", snapshot_ttl_seconds=60
)
child.start()
print(child.pid, child.url, flush=True)
os._exit(0)  # dies without stopping its child
"""


def test_the_child_exits_when_its_parent_dies(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PARENT, f"sqlite:///{tmp_path / 'sample.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    pid_text, url = done.stdout.split()
    pid = int(pid_text)
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the sample provider process outlived its parent"
    try:
        httpx.get(f"{url}/healthz", timeout=2)
    except httpx.ConnectError:
        return
    raise AssertionError("the port still answers")


# --- supervision: a `serve` in a subprocess whose sample-provider child is killed


class _Serve:
    """``export-center serve`` in a subprocess (embedded default, sample providers in
    their child process) on a fresh SQLite database and the loaded test sample."""

    def __init__(self, tmp_path: Path, sample_database_url: str) -> None:
        from export_center.embedded import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = tmp_path / "data"
        self.log = tmp_path / "serve.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
        self.env.update(
            PYTHONPATH=str(Path(__file__).resolve().parents[2]),
            EXPORT_CENTER_ENVIRONMENT="embedded",  # what mounts the sample providers
            EXPORT_CENTER_DATA_DIR=str(self.data),
            EXPORT_CENTER_SAMPLE_DATABASE_URL=sample_database_url,
            EXPORT_CENTER_LOAD_SAMPLE_DATA="false",
            EXPORT_CENTER_API__PORT=str(self.port),
        )
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "export_center.cli", "serve"],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def ready(self) -> httpx.Response:
        return httpx.get(f"{self.url}/readyz", timeout=5)

    def wait(self, what: str, probe, timeout: float = 120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                got = probe()
            except httpx.HTTPError:
                got = None
            if got:
                return got
            time.sleep(0.02)
        raise AssertionError(f"{what}: not within {timeout} s; log:\n{self.log.read_text()}")

    def samples(self) -> dict:
        return self.ready().json()["sampleProviders"]

    def kill_child(self) -> tuple[int, list[int]]:
        """SIGKILL the running child; returns its pid and the /readyz codes seen until
        a new child serves."""
        pid = self.samples()["pid"]
        restarts = self.samples()["restarts"]
        os.kill(pid, signal.SIGKILL)
        codes: list[int] = []

        def back() -> bool:
            answer = self.ready()
            codes.append(answer.status_code)
            body = answer.json()["sampleProviders"]
            return answer.status_code == 200 and body["restarts"] == restarts + 1

        self.wait("the child restarted", back)
        return pid, codes

    def errors(self) -> list[dict]:
        lines = [json.loads(x) for x in self.log.read_text().splitlines() if x.startswith("{")]
        return [x for x in lines if x["level"] == "ERROR"]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.mark.second_process  # long: runs beside the rest (scripts/test.sh)
def test_serve_restarts_a_killed_sample_provider_child_and_exports_work_again(tmp_path, sample_dir):
    from export_center.settings import Settings
    from tests.conftest import sample_url
    from tests.support.helpers import ORDERS_PERMISSION
    from tests.support.operator_seed import run_cli

    serve = _Serve(tmp_path, sample_url("sqlite", sample_dir))
    try:
        serve.wait("ready", lambda: serve.ready().status_code == 200)
        first = serve.samples()
        assert (first["state"], first["restarts"], first["lastExit"]) == ("running", 0, None)
        child_url = first["url"]

        pid, codes = serve.kill_child()
        assert 503 in codes, codes  # not ready while it was down
        assert codes[-1] == 200
        after = serve.samples()
        assert after["state"] == "running" and after["pid"] not in (None, pid)
        assert (after["restarts"], after["lastExit"]) == (1, "killed by SIGKILL")
        assert after["url"] == child_url  # the same port: the workers' address holds
        assert not _alive(pid)
        deaths = [e for e in serve.errors() if "sample provider process" in e["message"]]
        assert len(deaths) == 1 and f"process {pid} killed by SIGKILL" in deaths[0]["message"]
        metrics = httpx.get(f"{serve.url}/metrics", timeout=10).text
        assert "export_sample_provider_exits_total 1.0" in metrics

        # An export afterwards reads the sample through the new child.
        secret = Settings(data_dir=serve.data).jwt_secret
        token = issue_token(secret, user="alice", tenant="t1", permissions=[ORDERS_PERMISSION])
        with httpx.Client(
            base_url=serve.url, headers={"authorization": f"Bearer {token}"}, timeout=60
        ) as client:
            answer = create(client, "csv", parameters={"from": "1995-09-01", "to": "1995-09-30"})
            assert answer.status_code == 202, answer.text
            detail = wait_state(client, answer.json()["taskId"])
            assert detail["state"] == "succeeded", detail
            rows = download(client, detail).decode("utf-8-sig").splitlines()
            assert len(rows) == 1 + detail["processed"] and detail["processed"] > 0

        # A child that keeps dying is restarted after longer and longer pauses (0.5, 1,
        # 2, 5, 10, then 30 s); while it is down, /readyz and doctor say so.
        for _ in range(4):
            serve.kill_child()
        os.kill(serve.samples()["pid"], signal.SIGKILL)  # the 6th death: a 30 s pause
        serve.wait("down", lambda: serve.ready().status_code == 503)
        down = serve.ready().json()
        assert down["status"] == "sample providers unavailable"
        assert down["sampleProviders"]["state"] == "restarting"
        assert down["sampleProviders"]["lastExit"] == "killed by SIGKILL"
        doctor = run_cli(["doctor", "--json"], {**serve.env, "COLUMNS": "200"})
        assert serve.ready().status_code == 503  # doctor ran within the pause
        checks = {c["name"]: c for c in json.loads(doctor.stdout)}
        sample = checks["sample providers"]
        assert doctor.returncode == 1 and not sample["ok"], sample
        assert "is down (killed by SIGKILL, restarted 5 times)" in sample["message"]
        serve.wait("back", lambda: serve.ready().status_code == 200, timeout=90)
        assert serve.samples()["restarts"] == 6
        doctor = run_cli(["doctor", "--json"], {**serve.env, "COLUMNS": "200"})
        checks = {c["name"]: c for c in json.loads(doctor.stdout)}
        assert checks["sample providers"]["ok"], checks["sample providers"]
        assert "answers, restarted 6 times" in checks["sample providers"]["message"]
        assert len([e for e in serve.errors() if "sample provider process" in e["message"]]) == 6
    finally:
        serve.stop()


def test_a_child_restarted_on_another_port_hands_its_new_address_on(tmp_path):
    """The port of the killed child is taken by then: the new child binds another one,
    and the parent passes it on (what the workers call), once."""
    import socket

    from export_center.sample_process import SampleProviderProcess

    handed: list[str] = []
    child = SampleProviderProcess(
        database_url=f"sqlite:///{tmp_path / 'sample.db'}",
        token="t",
        secret="s",
        snapshot_ttl_seconds=60,
        on_restart=handed.append,
    )
    first = child.start()
    port = int(first.rsplit(":", 1)[1])
    try:
        pid = child.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            deadline = time.monotonic() + 10
            while True:  # as soon as the dead child's port is free
                try:
                    squatter.bind(("127.0.0.1", port))
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the port never became free"
                    time.sleep(0.005)
            squatter.listen()
            deadline = time.monotonic() + 60
            while child.health()["restarts"] < 1:
                assert time.monotonic() < deadline, child.health()
                time.sleep(0.05)
        health = child.health()
        assert (health["state"], health["lastExit"]) == ("running", "killed by SIGKILL")
        assert health["pid"] not in (None, pid) and not _alive(pid)
        assert handed == [child.url] and child.url != first
        assert httpx.get(f"{child.url}/healthz", timeout=5).status_code == 200
    finally:
        child.stop()
    # Stopped: never restarted again, nothing left running.
    time.sleep(1.0)
    assert child.health()["state"] == "stopped" and child.pid is None
    assert child.health()["restarts"] == 1 and handed == [child.url]
