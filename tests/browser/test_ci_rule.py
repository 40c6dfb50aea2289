"""Without Chromium a browser test skips on a developer's machine and fails in CI."""

from __future__ import annotations

import pytest

from tests.browser.conftest import _missing, chromium_path, in_ci


def test_without_chromium_a_browser_test_fails_in_ci_and_skips_elsewhere(monkeypatch, tmp_path):
    monkeypatch.delenv("EXPORT_CENTER_TEST_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no chromium on it
    assert chromium_path() is None
    monkeypatch.setenv("CI", "true")
    assert in_ci()
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        _missing("Chromium is not installed")
    for value in ("", "false", "0"):
        monkeypatch.setenv("CI", value)
        assert not in_ci()
        with pytest.raises(pytest.skip.Exception):
            _missing("Chromium is not installed")
