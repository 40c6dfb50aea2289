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


@pytest.mark.parametrize("user", ["alice ", " alice", "", "  "])
def test_token_refuses_ids_with_spaces_at_either_end(user, tmp_path, monkeypatch):
    monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", str(tmp_path / "data"))
    result = CliRunner().invoke(app, ["token", "--user", user, "--tenant", "acme"])
    assert result.exit_code == 2 and "--user" in result.output


def test_token_names_its_permissions_and_unknown_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", str(tmp_path / "data"))
    result = CliRunner().invoke(
        app, ["token", "--user", "a", "--tenant", "t", "--perm", "bogus:x:y"]
    )
    assert result.exit_code == 0
    assert "note: bogus:x:y is not a permission of the registry above" in result.output
    assert "permissions: bogus:x:y" in result.output


def test_serve_refuses_a_taken_port_before_starting_anything(tmp_path, monkeypatch):
    import socket

    monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", str(tmp_path / "data"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--port", str(port)])
    assert result.exit_code == 2
    assert f"cannot start: 127.0.0.1:{port} is not free" in " ".join(result.output.split())
    assert not (tmp_path / "data" / "export-center.db").exists()
