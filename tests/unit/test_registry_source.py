"""One rule decides which export-type registry a process uses, and every command follows
it: for each environment (embedded, production) x sample providers (default, on, off) x
``EXPORT_CENTER_EXPORT_TYPES_FILE`` (unset, a file, a path that does not exist), the
decision, the ``registry`` line every command prints, ``doctor``'s registry check,
``token`` (which reads the registry with serve's start-up check) and ``serve``'s
start-up refusal agree, and the sentence when there is no registry says to set
``EXPORT_CENTER_EXPORT_TYPES_FILE`` (never to edit the shipped sample file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from export_center.cli import app
from export_center.embedded import free_port
from export_center.registry import RegistryError
from export_center.registry_source import (
    NoRegistry,
    default_registry_path,
    open_registry,
    registry_source,
)
from export_center.settings import Settings

SECRET = "s" * 40
#: A registry of one type at an HTTP provider: valid with or without the samples.
OWN_REGISTRY = """\
FLAKY:
  title: Flaky
  provider_url: http://127.0.0.1:9
  provider_path: /internal/exports/v1/FLAKY/batches
  required_permission: export:flaky:create
  app_scope: PLATFORM
"""
SET_IT = "set it to your registry file (export-center registry check FILE validates it)"
UNSET_OFF = (
    "no export-type registry: the sample providers are off, so set "
    "EXPORT_CENTER_EXPORT_TYPES_FILE to your registry file (export-center registry check "
    "FILE validates it)"
)

ENVIRONMENTS = ["embedded", "production"]
SAMPLES = ["default", "on", "off"]
FILES = ["unset", "file", "missing"]


def _mounted(environment: str, samples: str) -> bool:
    return samples == "on" or (samples == "default" and environment == "embedded")


def _env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, environment: str, samples: str, file: str
) -> Path | None:
    """Set the process environment of one combination; returns the file it names."""
    for name in ("EXPORT_CENTER_EXPORT_TYPES_FILE", "EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EXPORT_CENTER_ENVIRONMENT", environment)
    monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EXPORT_CENTER_API__PORT", str(free_port()))
    monkeypatch.setenv("EXPORT_CENTER_LOAD_SAMPLE_DATA", "false")
    if environment == "production":
        monkeypatch.setenv("EXPORT_CENTER_API__JWT_SECRET", SECRET)
        monkeypatch.setenv("EXPORT_CENTER_API__DOWNLOAD_SECRET", SECRET)
        monkeypatch.setenv("EXPORT_CENTER_API__MANIFEST_SECRET", SECRET)
        monkeypatch.setenv("EXPORT_CENTER_PROVIDER__INTERNAL_TOKEN", SECRET)
        monkeypatch.setenv("EXPORT_CENTER_TOPIC_PREFIX", "prod-")
    if samples != "default":
        monkeypatch.setenv(
            "EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS", "true" if samples == "on" else "false"
        )
    path = None
    if file == "file":
        path = tmp_path / "types.yaml"
        path.write_text(OWN_REGISTRY)
    elif file == "missing":
        path = tmp_path / "no-such-dir" / "types.yaml"
    if path is not None:
        monkeypatch.setenv("EXPORT_CENTER_EXPORT_TYPES_FILE", str(path))
    return path


def _expected(environment: str, samples: str, file: str, named: Path | None):
    """(path, samples mounted, sentence or None, the types) the rule gives."""
    mounted = _mounted(environment, samples)
    if file == "missing":
        assert named is not None
        sentence = (
            f"no export-type registry: EXPORT_CENTER_EXPORT_TYPES_FILE names {named}, "
            f"which does not exist; {SET_IT}"
        )
        return named, mounted, sentence, None
    if file == "file":
        return named, mounted, None, ["FLAKY"]
    if mounted:
        return default_registry_path(), True, None, ["CUSTOMERS", "ORDERS"]
    return None, False, UNSET_OFF, None


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("samples", SAMPLES)
@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_every_command_follows_the_one_rule(environment, samples, file, tmp_path, monkeypatch):
    named = _env(monkeypatch, tmp_path, environment, samples, file)
    path, mounted, sentence, types = _expected(environment, samples, file, named)

    source = registry_source(Settings())
    assert (source.path, source.samples_mounted, source.missing) == (path, mounted, sentence)
    if sentence is None:
        assert sorted(open_registry(Settings()).types) == types
    else:
        with pytest.raises(NoRegistry) as refused:
            open_registry(Settings())
        assert str(refused.value) == sentence

    runner = CliRunner()
    doctor = runner.invoke(app, ["doctor", "--json"])
    check = {c["name"]: c for c in json.loads(doctor.stdout)}["registry"]
    shown = _flat(doctor.stderr)
    if path is None:
        none = "none (the sample providers are off: set EXPORT_CENTER_EXPORT_TYPES_FILE)"
        assert f"registry {none}" in shown
    else:
        assert f"registry {path.resolve()}" in shown
    token = runner.invoke(app, ["token", "--user", "a", "--tenant", "t"])
    if sentence is None:
        assert check == {"name": "registry", "ok": True, "message": f"{path}: {', '.join(types)}"}
        assert token.exit_code == 0, token.output
        assert "permissions: " in token.stderr
    else:
        assert check == {"name": "registry", "ok": False, "message": sentence}
        # Never "edit the shipped sample file": the advice is the setting.
        assert str(default_registry_path()) not in sentence and "fix the file" not in sentence
        assert "EXPORT_CENTER_EXPORT_TYPES_FILE" in sentence
        assert token.exit_code == 2
        assert _flat(token.stderr).endswith(f"cannot issue a token: {sentence}")
        serve = runner.invoke(app, ["serve", "--port", str(free_port())])
        assert serve.exit_code == 2, serve.output
        assert _flat(serve.stderr).endswith(f"cannot start: {sentence}")
        assert "Traceback" not in serve.output + token.output + doctor.output


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_the_sample_file_named_with_the_samples_off_is_invalid_everywhere(
    environment, tmp_path, monkeypatch
):
    """The neighbour of "no file": the operator names the shipped sample file while the
    sample providers are off. Its ``self`` types are refused with the same rule by every
    command (this is the one case where the sample file is the file to change)."""
    _env(monkeypatch, tmp_path, environment, "off", "unset")
    monkeypatch.setenv("EXPORT_CENTER_EXPORT_TYPES_FILE", str(default_registry_path()))
    rule = "ORDERS.provider_url: 'self' is only for the embedded default"
    with pytest.raises(RegistryError, match=rule):
        open_registry(Settings())
    runner = CliRunner()
    doctor = runner.invoke(app, ["doctor", "--json"])
    check = {c["name"]: c for c in json.loads(doctor.stdout)}["registry"]
    assert check["message"] == (
        f"{default_registry_path()}: {rule}; fix the file and run the check again"
    )
    serve = runner.invoke(app, ["serve", "--port", str(free_port())])
    assert serve.exit_code == 2
    assert _flat(serve.stderr).endswith(f"cannot start: invalid export-type registry: {rule}")
    token = runner.invoke(app, ["token", "--user", "a", "--tenant", "t"])
    assert token.exit_code == 2
    assert _flat(token.stderr).endswith(f"invalid export-type registry: {rule}")


def test_registry_check_allows_self_exactly_when_the_samples_are_mounted(tmp_path, monkeypatch):
    runner = CliRunner()
    for samples, code in (("on", 0), ("off", 1)):
        _env(monkeypatch, tmp_path, "production", samples, "unset")
        result = runner.invoke(app, ["registry", "check", str(default_registry_path())])
        assert result.exit_code == code, result.output
