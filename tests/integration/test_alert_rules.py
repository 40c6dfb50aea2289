"""The alert rules pass promtool: ``check rules`` and the unit tests of
deploy/prometheus/alerts.test.yml, which must hold a firing and a quiet case for every
alert. Every alert links its runbook section of docs/operations.md. promtool also
parses every expression of the Grafana dashboard."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.prometheus import ALERTS, ROOT, require_binary
from tests.support.promql import substitute_grafana_variables

pytestmark = pytest.mark.prometheus

ALERT_TESTS = ALERTS.with_name("alerts.test.yml")


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_binary("promtool"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ALERTS.parent,
    )


def alert_rules() -> list[dict]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_check_rules_accepts_every_rule():
    result = promtool("check", "rules", ALERTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout, result.stdout


def test_promtool_unit_tests_of_the_alerts_pass():
    result = promtool("test", "rules", ALERT_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path):
    """The check above can fail: a quiet series expected to fire makes promtool exit 1."""
    (tmp_path / "alerts.yml").write_text(ALERTS.read_text())
    wrong = {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": 'export_outbox_oldest_age_seconds{job="export-center"}',
                        "values": "0 0 0 0 0",
                    }
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "4m",
                        "alertname": "ExportOutboxBacklog",
                        "exp_alerts": [{"exp_labels": {"severity": "page"}}],
                    }
                ],
            }
        ],
    }
    (tmp_path / "wrong.test.yml").write_text(yaml.safe_dump(wrong))
    result = subprocess.run(
        [require_binary("promtool"), "test", "rules", "wrong.test.yml"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED" in result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_case():
    tests = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in tests:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names == {
        "ExportOutboxBacklog",
        "ExportOutboxRetrying",
        "ExportQueueAge",
        "ExportDeadLetter",
        "ExportLeaseRecoveries",
        "ExportStorageLowSpace",
        "ExportFailureRate",
        "ExportMetricsDown",
        "ExportNotificationDead",
    }
    assert sorted(names - firing) == [], "alerts without a firing case"
    assert sorted(names - quiet) == [], "alerts without a quiet case"


def test_every_alert_has_a_severity_a_summary_and_its_runbook_section():
    for rule in alert_rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in ("page", "warning"), name
        assert len(rule["annotations"]["summary"]) > 40, name
        assert rule["annotations"]["runbook_url"] == f"docs/operations.md#{name.lower()}", name


def test_promtool_parses_every_dashboard_expression(tmp_path):
    """Each panel's expression, Grafana variables filled in, as a recording rule that
    ``promtool check rules`` must accept (a PromQL syntax error fails it)."""
    board = json.loads((ROOT / "deploy" / "grafana" / "export-center.json").read_text())
    rules = [
        {"record": f"dashboard:panel_{panel['id']}_{target['refId']}", "expr": expr}
        for panel in board["panels"]
        for target in panel["targets"]
        if (expr := substitute_grafana_variables(target["expr"]))
    ]
    assert len(rules) >= 16
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "sum(("}]}]})
    )
    assert promtool("check", "rules", path).returncode == 1  # the check above can fail
