"""A real Prometheus for tests: Debian's ``prometheus`` binary on a free loopback port.

:class:`Prometheus` writes a temporary configuration that scrapes the given targets
every second under the job ``export-center`` (the job name the alert rules expect) and
evaluates ``deploy/prometheus/alerts.yml`` every second, then starts the binary as a
process. Tests wait for a named alert to fire (``/api/v1/alerts``) or query an
expression (``/api/v1/query``).

Test-only change to the rules: they are loaded from a copy whose ``for:`` durations are
all set to ``for_seconds`` (default 2 s), because the production durations (1 to 10
minutes) would make a test wait that long. Expressions, thresholds and labels are the
production ones; ``promtool test rules`` (deploy/prometheus/alerts.test.yml) checks the
real durations.

Without ``prometheus`` or ``promtool`` on PATH a test skips locally and FAILS when
``CI`` is set (scripts/test.sh installs Debian's ``prometheus`` package).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pytest
import yaml

from export_center.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
JOB = "export-center"

__all__ = ["ALERTS", "JOB", "Prometheus", "in_ci", "require_binary"]


def in_ci() -> bool:
    """``CI`` set to anything but an empty or false value (as scripts/test.sh reads it)."""
    return os.environ.get("CI", "") not in ("", "0", "false", "False", "FALSE", "no")


def require_binary(name: str) -> str:
    """The path of ``name`` (``prometheus`` or ``promtool``) on PATH.

    Skips the test when it is missing, or fails it when ``CI`` is set.
    """
    path = shutil.which(name)
    if path is None:
        message = (
            f"{name} is not installed (Debian package prometheus; scripts/test.sh installs it)"
        )
        if in_ci():
            pytest.fail(f"{message}: Prometheus tests must run in CI")
        pytest.skip(message)
    return path


def rules_with_for(source: Path, target: Path, for_seconds: float) -> Path:
    """Write a copy of the rule file ``source`` to ``target`` with every ``for:`` set to
    ``for_seconds`` seconds; returns ``target``."""
    document = yaml.safe_load(source.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = f"{for_seconds:g}s"
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


class Prometheus:
    """A Prometheus server process scraping ``targets`` (``host:port``, path /metrics)
    every second and evaluating the export center's alert rules every second.

    Args:
        work_dir: an empty directory for the configuration, rules, TSDB and log.
        targets: what to scrape, e.g. ``["127.0.0.1:8000"]``.
        for_seconds: every rule's ``for:`` in the loaded copy (None: the file's own).
        rules: the rule file (default: deploy/prometheus/alerts.yml).
    """

    def __init__(
        self,
        work_dir: Path,
        targets: Sequence[str],
        *,
        for_seconds: float | None = 2.0,
        rules: Path = ALERTS,
    ) -> None:
        self.work_dir = work_dir
        self.targets = list(targets)
        self.for_seconds = for_seconds
        self.rules = rules
        self.port = 0
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = work_dir / "prometheus.log"
        self.http = httpx.Client(timeout=10)

    def _write_config(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        rules = self.rules
        if self.for_seconds is not None:
            rules = rules_with_for(self.rules, self.work_dir / "alerts.yml", self.for_seconds)
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(rules)],
            "scrape_configs": [
                {
                    "job_name": JOB,
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": self.targets}],
                }
            ],
        }
        path = self.work_dir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def start(self, timeout: float = 30.0) -> Prometheus:
        """Start the process and wait until it reports ready.

        Raises:
            AssertionError: it exited or was not ready within ``timeout`` seconds.
        """
        binary = require_binary("prometheus")
        config = self._write_config()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.work_dir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited: {self.log()}")
            try:
                if self.http.get(f"{self.url}/-/ready").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"prometheus not ready in {timeout}s: {self.log()}")

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 10 s)."""
        self.http.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def log(self) -> str:
        """The last 4,000 characters of the server's log."""
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def _api(self, path: str, **params: str) -> Any:
        answer = self.http.get(f"{self.url}/api/v1/{path}", params=params)
        body = answer.json()
        assert body.get("status") == "success", f"{path} {params}: {answer.text}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now: ``[{"metric": {...}, "value": [t, "v"]}]``."""
        data = self._api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def value(self, expr: str) -> float | None:
        """The value of ``expr`` when it has exactly one series now, None when none.

        Raises:
            AssertionError: ``expr`` returned several series.
        """
        result = self.query(expr)
        assert len(result) <= 1, f"{expr}: {result}"
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (pending and firing): ``labels``, ``annotations``, ``state``."""
        return list(self._api("alerts")["alerts"])

    def rule(self, alertname: str) -> dict[str, Any]:
        """The alerting rule ``alertname`` as Prometheus evaluates it: ``state``
        (``inactive``, ``pending`` or ``firing``), ``lastEvaluation``, ``health``."""
        for group in self._api("rules", type="alert")["groups"]:
            for rule in group["rules"]:
                if rule["name"] == alertname:
                    return dict(rule)
        raise AssertionError(f"no alerting rule {alertname} loaded")

    def wait_for_evaluations(self, alertname: str, count: int = 2, timeout: float = 30.0) -> None:
        """Wait until the rule ``alertname`` has been evaluated ``count`` more times, so
        its state reflects every sample scraped before this call."""
        seen = [self.rule(alertname)["lastEvaluation"]]

        def evaluated() -> bool:
            last = self.rule(alertname)["lastEvaluation"]
            if last != seen[-1]:
                seen.append(last)
            return len(seen) > count

        self.wait_until(f"{count} evaluations of {alertname}", evaluated, timeout)

    def targets_up(self) -> dict[str, str]:
        """Each target's scrape health by ``instance``: ``up``, ``down`` or ``unknown``."""
        active = self._api("targets")["activeTargets"]
        return {t["labels"]["instance"]: t["health"] for t in active}

    def wait_until(
        self,
        what: str,
        probe: Callable[[], Any],
        timeout: float = 30.0,
    ) -> Any:
        """Call ``probe`` every 0.2 s until it returns something truthy; return that.

        Raises:
            AssertionError: still falsy after ``timeout`` seconds (names ``what``).
        """
        deadline = time.monotonic() + timeout
        while True:
            got = probe()
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not reached in {timeout}s; log: {self.log()}")
            time.sleep(0.2)

    def wait_for_targets(self, timeout: float = 30.0) -> None:
        """Wait until every target has been scraped successfully."""
        self.wait_until(
            f"targets {self.targets} up",
            lambda: (
                (up := self.targets_up())
                and len(up) == len(self.targets)
                and set(up.values()) == {"up"}
            ),
            timeout,
        )

    def firing(self, alertname: str) -> list[dict[str, Any]]:
        """The firing alerts named ``alertname`` now."""
        return [
            a
            for a in self.alerts()
            if a["labels"].get("alertname") == alertname and a["state"] == "firing"
        ]

    def wait_for_alert(self, alertname: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until ``alertname`` is firing; returns its firing alerts."""
        result: list[dict[str, Any]] = self.wait_until(
            f"alert {alertname} firing", lambda: self.firing(alertname), timeout
        )
        return result
