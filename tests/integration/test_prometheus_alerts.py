"""A real Prometheus (tests/support/prometheus.py) scraping a running stack evaluates the alert
rules of deploy/prometheus/alerts.yml: a stuck outbox fires ExportOutboxBacklog, an
automatic retry scheduled for later does not.

The rules' ``for:`` durations are shortened to 2 s in the copy Prometheus loads; the
expressions and thresholds are the production ones.
"""

from __future__ import annotations

import pytest
from sqlalchemy import update

from export_center.db import db_now_plus
from export_center.models import ExportOutbox
from tests.support.helpers import create
from tests.support.prometheus import Prometheus

pytestmark = pytest.mark.prometheus

O = ExportOutbox.__table__  # noqa: E741


def test_a_stuck_outbox_fires_export_outbox_backlog(make_stack, tmp_path):
    # No publisher: the command of a new export stays in the outbox.
    stack = make_stack(
        publisher={"enabled": False}, consumer={"enabled": False}, reconciler={"enabled": False}
    )
    answer = create(stack.client(), "csv")
    assert answer.status_code == 202, answer.text
    with Prometheus(tmp_path / "prometheus", [stack.url.removeprefix("http://")]) as prom:
        prom.wait_for_targets()
        prom.wait_until(
            "the unsent command scraped", lambda: prom.value("max(export_outbox_pending)") == 1
        )
        # A command seconds old is no backlog: the rule stays inactive.
        prom.wait_for_evaluations("ExportOutboxBacklog")
        assert prom.rule("ExportOutboxBacklog")["state"] == "inactive"
        assert prom.value("max(export_outbox_oldest_age_seconds)") < 120

        # The same command, written and due 10 minutes ago, and still not sent.
        with stack.runtime.engine.begin() as conn:
            moved = update(O).values(created_at=db_now_plus(-600), next_retry_at=db_now_plus(-600))
            assert conn.execute(moved).rowcount == 1
        firing = prom.wait_for_alert("ExportOutboxBacklog", timeout=30)

        assert len(firing) == 1  # one alert for the service, not one per target
        alert = firing[0]
        assert alert["labels"] == {"alertname": "ExportOutboxBacklog", "severity": "page"}
        assert 600 <= float(alert["value"]) < 700
        assert alert["annotations"]["runbook_url"] == "docs/operations.md#exportoutboxbacklog"
        assert "oldest due command has waited 10m" in alert["annotations"]["summary"]
        # The tasks themselves are young: the queue-age alert stays quiet.
        assert prom.firing("ExportQueueAge") == []


def test_a_scheduled_retry_never_fires_export_outbox_backlog(make_stack, tmp_path):
    """The false page: an automatic retry waits in the outbox for its backoff (15 min by
    default after a second failure). Written 10 minutes ago and due in 5, it is no
    backlog; once due and still unsent, it pages with its age since it became due."""
    stack = make_stack(
        publisher={"enabled": False}, consumer={"enabled": False}, reconciler={"enabled": False}
    )
    answer = create(stack.client(), "csv")
    assert answer.status_code == 202, answer.text
    with stack.runtime.engine.begin() as conn:  # what an attempt's failure writes
        scheduled = update(O).values(created_at=db_now_plus(-600), next_retry_at=db_now_plus(300))
        assert conn.execute(scheduled).rowcount == 1
    with Prometheus(tmp_path / "prometheus", [stack.url.removeprefix("http://")]) as prom:
        prom.wait_for_targets()
        prom.wait_until(
            "the scheduled retry scraped", lambda: prom.value("max(export_outbox_scheduled)") == 1
        )
        prom.wait_for_evaluations("ExportOutboxBacklog", count=4)
        assert prom.rule("ExportOutboxBacklog")["state"] == "inactive"
        assert prom.value("max(export_outbox_oldest_age_seconds)") == 0
        assert prom.value("max(export_outbox_pending)") == 0

        # Its time came 3 minutes ago and no publisher sent it: a real backlog.
        with stack.runtime.engine.begin() as conn:
            assert conn.execute(update(O).values(next_retry_at=db_now_plus(-180))).rowcount == 1
        (alert,) = prom.wait_for_alert("ExportOutboxBacklog", timeout=30)
        assert 180 <= float(alert["value"]) < 300  # from its due time, not its writing
        assert prom.value("max(export_outbox_scheduled)") == 0
