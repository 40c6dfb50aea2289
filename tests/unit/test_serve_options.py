"""``serve``'s multi-process options refuse before anything binds: ``--metrics-port``
without ``--workers`` (one process serves its metrics on the API port), metrics ports
past 65535, and a taken metrics port; and the API process settings keep no loop but
the broker publisher."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from export_center.cli import app
from export_center.embedded import free_port
from export_center.serve_workers import child_settings
from export_center.settings import Settings


def _serve(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = {
        "EXPORT_CENTER_DATA_DIR": str(tmp_path / "data"),
        "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
    }
    result = CliRunner().invoke(app, ["serve", "--port", str(free_port()), *args], env=env)
    return result.exit_code, result.output


def test_metrics_port_needs_workers(tmp_path: Path) -> None:
    code, output = _serve(tmp_path, "--metrics-port", "9300")
    assert code == 2
    assert "--metrics-port needs --workers 2 or more" in output


def test_metrics_ports_past_65535_are_refused(tmp_path: Path) -> None:
    code, output = _serve(tmp_path, "--workers", "4", "--metrics-port", "65533")
    assert code == 2
    assert "metrics ports 65533..65537 exceed 65535" in output


def test_a_taken_metrics_port_is_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, output = _serve(tmp_path, "--workers", "2", "--metrics-port", str(port))
    assert code == 2
    assert f"127.0.0.1:{port} is not free" in output


@pytest.mark.parametrize("transport", ["memory", "rocketmq"])
def test_api_processes_run_no_loop_but_the_broker_publisher(transport: str) -> None:
    settings = Settings(environment="test", transport=transport)
    child = child_settings(settings)
    assert not any(
        child.loop_enabled(loop)
        for loop in (child.consumer, child.reconciler, child.notify, child.scheduler)
    )
    assert child.loop_enabled(child.publisher) is (transport == "rocketmq")
    assert child.rocketmq.dlq_enabled is False
    assert settings.loop_enabled(settings.consumer)  # the parent's settings are untouched
