"""The CI rule of the Prometheus tests: without promtool or prometheus on PATH they
skip locally and FAIL when CI is set (tests/support/prometheus.py)."""

from __future__ import annotations

import pytest

from tests.support.prometheus import require_binary


def test_a_missing_promtool_fails_in_ci(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        require_binary("promtool")


def test_a_missing_promtool_skips_outside_ci(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="Debian package prometheus"):
        require_binary("promtool")


def test_an_installed_binary_is_found(monkeypatch, tmp_path):
    fake = tmp_path / "promtool"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "true")
    assert require_binary("promtool") == str(fake)
