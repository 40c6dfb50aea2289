"""The sample providers in their child process (``export_center.sample_process``), the
embedded default's second core: the same files as in-process providers, and no child
left behind when the parent stops or dies."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx

from tests.helpers import create, download, wait_state


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
