"""``export-center serve --workers 2`` as a real process tree, on SQLite and MariaDB:
two API processes answer one port, the loops run once (in the parent), every process is
its own metrics target (parent on P, API process k on P + k), a killed API process is
replaced on its slot, SIGHUP replaces both only when the registry file is valid, and
SIGTERM stops the whole tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from export_center.auth import issue_token
from export_center.embedded import free_port
from export_center.healthz import wait_healthy
from export_center.registry_source import default_registry_path
from tests.conftest import _fresh_mariadb, sample_url
from tests.support.helpers import (
    ORDERS_PERMISSION,
    create,
    free_port_block,
    idle_connection_reused,
    wait_state,
)

pytestmark = [pytest.mark.second_process, pytest.mark.timeout(600)]

JWT = "serve-workers-jwt-secret-0123456789abcdef"


@dataclass
class Tree:
    """The served process tree: the parent, its API port and its metrics ports."""

    proc: subprocess.Popen[str]
    base: str
    metrics_port: int
    registry: Path
    log: Path

    def api_pids(self) -> set[int]:
        """The parent's API processes (spawned interpreters), read from ``/proc``."""
        pids = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == self.proc.pid and b"spawn_main" in cmdline:
                pids.add(int(entry.name))
        return pids

    def metrics_answer(self, slot: int) -> bool:
        """Whether metrics port P+``slot`` answers."""
        return httpx.get(f"http://127.0.0.1:{self.metrics_port + slot}/metrics").is_success

    def counter(self, slot: int, name: str, **labels: str) -> float:
        """Sum of the samples of counter ``name`` (with ``labels``) on metrics port P+slot."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port + slot}/metrics", timeout=10).text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
        )


def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


@pytest.fixture(params=["sqlite", "mariadb"])
def tree(request: pytest.FixtureRequest, tmp_path: Path, sample_dir: Path) -> Iterator[Tree]:
    drop = None
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    registry = tmp_path / "types.yaml"
    registry.write_text(default_registry_path().read_text())
    env.update(
        {
            "HOME": str(tmp_path),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "EXPORT_CENTER_DATA_DIR": str(tmp_path / "data"),
            "EXPORT_CENTER_SAMPLE_DATABASE_URL": sample_url(request.param, sample_dir),
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
            "EXPORT_CENTER_EXPORT_TYPES_FILE": str(registry),
            "EXPORT_CENTER_API__JWT_SECRET": JWT,
            "EXPORT_CENTER_API__DOWNLOAD_SECRET": "serve-workers-download-secret-0123456789",
            "EXPORT_CENTER_LIMITS__MAX_ACTIVE_PER_TYPE": "50",
            "EXPORT_CENTER_LIMITS__MAX_ACTIVE_PER_USER": "10",
        }
    )
    if request.param == "mariadb":
        request.applymarker(pytest.mark.mariadb)
        url, drop = _fresh_mariadb("serve_workers")
        env["EXPORT_CENTER_DATABASE_URL"] = url
    port, metrics = free_port(), free_port_block(3)
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "export_center.cli", "serve", "--port", str(port)]
        + ["--workers", "2", "--metrics-port", str(metrics)],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = Tree(proc, f"http://127.0.0.1:{port}", metrics, registry, log)
    try:
        wait_healthy(served.base, timeout=180, alive=lambda: proc.poll() is None)
        _wait(lambda: len(served.api_pids()) == 2, 60, "two API processes")
        for slot in (0, 1, 2):  # every process serves its metrics once it took its slot
            _wait(
                lambda s=slot: served.metrics_answer(s),
                60,
                f"metrics on slot {slot}",
            )
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        if drop is not None:
            drop()


def _client(base: str, user: str, *, keep_alive: bool = True) -> httpx.Client:
    """A client of ``user``; without ``keep_alive`` every request opens its own
    connection (as a proxy's health check does), so none is sent on an idle connection
    that an API process closes as it is replaced (HTTP/1.1 has no way to warn of it)."""
    token = issue_token(JWT, user=user, tenant="t1", permissions=[ORDERS_PERMISSION])
    limits = httpx.Limits() if keep_alive else httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {token}"}, timeout=60, limits=limits
    )


def test_two_api_processes_share_the_port_and_the_loops_run_once(tree: Tree) -> None:
    users = [f"user{n}" for n in range(6)]

    def one(n: int) -> str:
        with _client(tree.base, users[n % 6]) as client:
            day = (date(1995, 9, 1) + timedelta(days=n)).isoformat()  # no duplicate window
            answer = create(client, parameters={"from": day, "to": day}, requestId=f"sw-{n}")
            assert answer.status_code == 202, answer.text
            return str(answer.json()["taskId"])

    with ThreadPoolExecutor(8) as pool:
        task_ids = list(pool.map(one, range(24)))
    assert len(set(task_ids)) == 24
    for n, task_id in enumerate(task_ids):
        with _client(tree.base, users[n % 6]) as client:
            assert wait_state(client, task_id, timeout=180)["state"] == "succeeded"
    created = "export_task_created_total"
    done = "export_task_completed_total"
    # Creates are counted by the API processes that took them, exports by the parent.
    assert tree.counter(1, created) + tree.counter(2, created) == 24
    assert tree.counter(0, created) == 0
    assert tree.counter(0, done, status="succeeded") == 24
    assert tree.counter(1, done) == tree.counter(2, done) == 0
    # An API process keeps an idle connection past httpx's 5 s pool expiry
    # (api.keep_alive_seconds, 20 s), so a client never reuses one it is closing.
    idle_connection_reused(int(tree.base.rsplit(":", 1)[1]), 5.5).close()


def test_a_killed_api_process_is_replaced_and_sighup_replaces_both_only_if_valid(
    tree: Tree,
) -> None:
    before = tree.api_pids()
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    _wait(
        lambda: len(tree.api_pids()) == 2 and victim not in tree.api_pids(),
        60,
        "a replacement API process",
    )
    for slot in (1, 2):  # the replacement took the freed slot: both ports answer again
        _wait(
            lambda s=slot: tree.metrics_answer(s),
            60,
            f"metrics on slot {slot} after the kill",
        )
    with _client(tree.base, "alice", keep_alive=False) as client:
        assert client.get("/api/v1/export-types").status_code == 200

        # An invalid file: the parent refuses it and no API process is replaced.
        good = tree.registry.read_text()
        tree.registry.write_text(good.replace("app_scope: PLATFORM", "app_scope: EVERYONE", 1))
        survivors = tree.api_pids()
        tree.proc.send_signal(signal.SIGHUP)
        _wait(lambda: "registry reload refused" in tree.log.read_text(), 30, "the refusal")
        time.sleep(2)
        assert tree.api_pids() == survivors

        # A valid file: both API processes are replaced and answer the new titles, and
        # the API answers throughout.
        tree.registry.write_text(good.replace("title_zh: 订单\n", "title_zh: 全部订单\n", 1))
        tree.proc.send_signal(signal.SIGHUP)
        answers: list[tuple[int, str]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and tree.api_pids() & survivors:
            ready = client.get("/readyz")
            answers.append((ready.status_code, ready.text))
            time.sleep(0.1)
        assert not tree.api_pids() & survivors, "the API processes were not replaced"
        assert {code for code, _ in answers} <= {200}, [a for a in answers if a[0] != 200]
        for _ in range(10):  # whichever process answers has the new registry
            types = {t["exportType"]: t for t in client.get("/api/v1/export-types").json()}
            assert types["ORDERS"]["titleZh"] == "全部订单"

    tree.proc.send_signal(signal.SIGTERM)
    code = tree.proc.wait(timeout=60)
    assert code == 0, (code, tree.log.read_text()[-3000:])
    assert tree.api_pids() == set()
