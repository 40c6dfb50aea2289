"""Settings rules: production must name its prefix and secrets; loops start off there."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from export_center.settings import Settings, settings_problems


def test_production_needs_an_explicit_prefix_and_starts_with_loops_off(tmp_path):
    s = Settings(environment="production", data_dir=tmp_path)
    with pytest.raises(ValueError, match="EXPORT_CENTER_TOPIC_PREFIX must be set explicitly"):
        _ = s.command_topic
    assert not s.loop_enabled(s.reconciler) and not s.loop_enabled(s.publisher)
    assert not s.loop_enabled(s.consumer) and not s.dlq_enabled
    explicit = Settings(
        environment="production", data_dir=tmp_path, topic_prefix="", consumer={"enabled": True}
    )
    assert explicit.command_topic == "export-center-command-v1"
    assert explicit.dlq_topic == "%DLQ%export-center-worker-v1"
    assert explicit.loop_enabled(explicit.consumer) and explicit.dlq_enabled


def test_embedded_and_test_defaults(tmp_path):
    embedded = Settings(data_dir=tmp_path)
    assert (
        embedded.loop_enabled(embedded.publisher)
        and embedded.command_topic == "export-center-command-v1"
    )
    test = Settings(environment="test", data_dir=tmp_path)
    assert test.worker_group == "test-export-center-worker-v1"
    assert test.dlq_group == "test-export-center-dlq-handler-v1"


def test_production_refuses_generated_or_weak_secrets(tmp_path):
    with pytest.raises(ValueError, match="must be set explicitly in production"):
        _ = Settings(environment="production", data_dir=tmp_path).jwt_secret
    with pytest.raises(ValueError, match="at least 32 characters"):
        _ = Settings(
            environment="production", data_dir=tmp_path, api={"jwt_secret": "changeme"}
        ).jwt_secret
    strong = "s" * 40
    assert (
        Settings(environment="production", data_dir=tmp_path, api={"jwt_secret": strong}).jwt_secret
        == strong
    )
    assert not (tmp_path / "jwt-secret.txt").exists()


def test_the_data_directory_never_depends_on_the_working_directory(tmp_path, monkeypatch):
    from pathlib import Path

    from export_center.settings import default_data_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    default = tmp_path / "home" / ".local" / "share" / "export-center"
    assert default_data_dir() == default
    for given, expected in (
        (None, default),
        ("", default),
        ("   ", default),
        ("~/x", tmp_path / "home" / "x"),
        ("rel/dir", tmp_path / "rel" / "dir"),
        (str(tmp_path / "abs"), tmp_path / "abs"),
    ):
        monkeypatch.delenv("EXPORT_CENTER_DATA_DIR", raising=False)
        if given is not None:
            monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", given)
        settings = Settings()
        assert settings.data_dir == expected, given
        assert settings.data_dir.is_absolute()
    monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", "rel/dir")
    settings = Settings()
    monkeypatch.chdir(tmp_path / "home" if (tmp_path / "home").exists() else Path("/"))
    assert (
        settings.resolved_database_url == f"sqlite:///{tmp_path / 'rel' / 'dir'}/export-center.db"
    )


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "Factory", "Mars/Olympus", "utc"])
def test_the_default_time_zone_must_be_a_place(tmp_path, zone):
    with pytest.raises(ValueError, match="not an IANA time zone name"):
        Settings(data_dir=tmp_path, task={"time_zone": zone})


def test_production_refuses_to_start_without_its_secrets(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from export_center.cli import app

    settings = Settings(environment="production", data_dir=tmp_path, topic_prefix="")
    with pytest.raises(ValueError, match="EXPORT_CENTER_API__JWT_SECRET"):
        settings.check_startup()
    strong = "s" * 40
    ready = Settings(
        environment="production",
        data_dir=tmp_path,
        topic_prefix="",
        api={"jwt_secret": strong, "download_secret": strong, "manifest_secret": strong},
        provider={"internal_token": strong},
    )
    ready.check_startup()  # nothing missing
    for env in ({"EXPORT_CENTER_TOPIC_PREFIX": ""}, {}):
        monkeypatch.setenv("EXPORT_CENTER_ENVIRONMENT", "production")
        monkeypatch.setenv("EXPORT_CENTER_DATA_DIR", str(tmp_path))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for command in (["serve", "--port", "1"], ["worker"]):
            result = CliRunner().invoke(app, command)
            assert result.exit_code == 2, result.output
            assert "cannot start:" in result.output
            assert "Traceback" not in result.output


def test_the_sample_providers_are_mounted_by_the_embedded_default_only(tmp_path, monkeypatch):
    assert Settings(data_dir=tmp_path).mount_sample_providers is True
    assert Settings(environment="test", data_dir=tmp_path).mount_sample_providers is False
    production = Settings(environment="production", data_dir=tmp_path)
    assert production.mount_sample_providers is False
    monkeypatch.setenv("EXPORT_CENTER_ENVIRONMENT", "production")
    monkeypatch.setenv("EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS", "true")
    assert Settings(data_dir=tmp_path).mount_sample_providers is True
    monkeypatch.setenv("EXPORT_CENTER_ENVIRONMENT", "embedded")
    monkeypatch.setenv("EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS", "false")
    assert Settings(data_dir=tmp_path).mount_sample_providers is False


def test_host_and_audience_lists_come_from_json(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPORT_CENTER_API__ALLOWED_HOSTS", '["exports.example.com", "*.corp"]')
    monkeypatch.setenv("EXPORT_CENTER_API__JWT_AUDIENCE", '["export-center"]')
    settings = Settings(data_dir=tmp_path)
    assert settings.api.allowed_hosts == ["exports.example.com", "*.corp"]
    assert settings.api.jwt_audience == ["export-center"]
    monkeypatch.setenv("EXPORT_CENTER_API__ALLOWED_HOSTS", '["https://exports.example.com"]')
    with pytest.raises(ValidationError) as error:
        Settings(data_dir=tmp_path)
    assert "EXPORT_CENTER_API__ALLOWED_HOSTS" in settings_problems(error.value)


@pytest.mark.parametrize(("tag", "language"), [("zh-CN", "zh"), ("zh_Hans", "zh"), ("en-US", "en")])
def test_a_robot_language_may_be_a_bcp47_tag(
    monkeypatch: pytest.MonkeyPatch, tag: str, language: str
) -> None:
    robots = {
        "ops": {"kind": "dingtalk", "url": "https://oapi.dingtalk.com/robot/send", "language": tag}
    }
    monkeypatch.setenv("EXPORT_CENTER_NOTIFY__ROBOTS", json.dumps(robots))
    assert Settings().notify.robots["ops"].language == language


def test_a_robot_language_of_another_tongue_stops_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    robots = {"ops": {"kind": "wecom", "url": "https://qyapi.weixin.qq.com/x", "language": "fr"}}
    monkeypatch.setenv("EXPORT_CENTER_NOTIFY__ROBOTS", json.dumps(robots))
    with pytest.raises(ValueError, match="'en' or 'zh'"):
        Settings()
