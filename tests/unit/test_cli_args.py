"""Command-line arguments that are wrong end with a one-line usage error (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from export_center.cli import app


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["demo", "--scale", "0"], "above 0"),
        (["demo", "--scale", "-1"], "above 0"),
        (["demo", "--scale", "11"], "at most 10"),
        (["demo", "--output-dir", "/proc/no-such-dir/out"], "cannot create"),
    ],
)
def test_demo_refuses_bad_options_before_any_work(
    args: list[str], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", str(tmp_path / "data"))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not (tmp_path / "data").exists()  # nothing generated, nothing started
