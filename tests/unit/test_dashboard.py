"""The Grafana dashboard (deploy/grafana/export-center.json) and the alert rules use
only metrics the export center defines, and the dashboard is importable: a Prometheus
datasource variable, every panel on it, panels on a 24-column grid without overlap."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from export_center.metrics import series_names
from tests.support.promql import metric_names

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "export-center.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
# Series Prometheus itself writes for every scrape target.
PROMETHEUS_SERIES = {"up"}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panel_exprs() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard()["panels"] for t in p["targets"]]


def test_the_metric_name_reader():
    assert metric_names(
        'histogram_quantile(0.95, sum by (le, type) (rate(a_bucket{job="$job",x=~"y"}'
        "[$__rate_interval]))) / clamp_min(sum(b_total offset 5m), 1e-9) > 0.2"
    ) == {"a_bucket", "b_total"}
    assert metric_names('count(up{job="x"} == 0) or vector(0) and on (job) c') == {"up", "c"}


def test_series_names_carry_the_suffixes_prometheus_adds():
    names = series_names()
    assert {
        "export_task_completed_total",
        "export_storage_bytes_total",
        "export_provider_request_seconds_bucket",
        "export_provider_request_seconds_count",
        "export_task_duration_seconds_sum",
        "export_outbox_pending",
        "export_task_queue_age_seconds",
    } <= names
    assert "export_storage_bytes" not in names and "export_provider_request_seconds" not in names
    assert metric_names("rate(export_rows_procesed_total[1m])") - names  # a typo is caught


def test_every_dashboard_expression_uses_defined_metrics():
    known = series_names() | PROMETHEUS_SERIES
    exprs = panel_exprs()
    assert len(exprs) >= 16
    for title, expr in exprs:
        used = metric_names(expr)
        assert used, (title, expr)
        assert used <= known, (title, sorted(used - known))
    variables = [v["definition"] for v in dashboard()["templating"]["list"] if "definition" in v]
    for definition in variables:
        name = re.fullmatch(r"label_values\((\w+), *\w+\)", definition)
        assert name and name.group(1) in known, definition


def test_every_alert_expression_uses_defined_metrics():
    known = series_names() | PROMETHEUS_SERIES
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    assert len(rules) == 9
    for rule in rules:
        used = metric_names(rule["expr"])
        assert used and used <= known, (rule["alert"], sorted(used - known))


def test_the_dashboard_shows_what_on_call_looks_at_first():
    exprs = " ".join(expr for _, expr in panel_exprs())
    used = set().union(*(metric_names(e) for _, e in panel_exprs()))
    assert {
        "export_rows_processed_total",  # rows/s
        "export_task_completed_total",  # exports/min, failures, failure rate
        "export_task_queue_age_seconds",
        "export_outbox_pending",
        "export_outbox_oldest_age_seconds",
        "export_outbox_max_attempt",
        "export_dlq_messages_total",
        "export_reconciler_action_total",  # lease recoveries
        "export_provider_request_seconds_bucket",
        "export_provider_failure_total",
    } <= used
    assert "histogram_quantile(0.95" in exprs and "sum by (type, reason)" in exprs
    # Database gauges are the same in every process: max(), never sum().
    for _, expr in panel_exprs():
        for gauge in ("export_task_queue_age_seconds", "export_outbox_"):
            assert not re.search(r"sum[^(]*\(\s*" + gauge, expr), expr


def test_the_dashboard_is_importable():
    board = dashboard()
    assert board["uid"] == "export-center" and board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    source = {"type": "prometheus", "uid": "${datasource}"}
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        assert panel["datasource"] == source, panel["title"]
        assert panel["type"] in ("timeseries", "stat"), panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        assert all(t["datasource"] == source for t in panel["targets"]), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
