"""Metric series exist before their first event (increase() needs a sample at 0)."""

from __future__ import annotations


def test_every_attempt_outcome_has_its_metric_series_from_the_start():
    from prometheus_client import REGISTRY

    from export_center import metrics
    from export_center.attempt.context import AttemptOutcome

    assert tuple(o.value for o in AttemptOutcome) == metrics.ATTEMPT_OUTCOMES
    metrics.start_series(["NEVER_RUN"])
    for outcome in AttemptOutcome:
        value = REGISTRY.get_sample_value(
            "export_task_completed_total", {"type": "NEVER_RUN", "status": outcome.value}
        )
        assert value == 0.0, outcome
    assert REGISTRY.get_sample_value("export_task_created_total", {"type": "NEVER_RUN"}) == 0.0
