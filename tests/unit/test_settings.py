"""Settings rules: production must name its prefix and secrets; loops start off there."""

from __future__ import annotations

import pytest

from export_center.settings import Settings


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
