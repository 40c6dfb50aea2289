"""The approval gauge, read from the database when a scrape collects (as the other
database gauges of :mod:`export_center.metrics`): how many exports wait for approval."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine

__all__ = ["ApprovalGauges"]


class ApprovalGauges(Collector):
    """``export_approval_awaiting``: tasks in AWAITING_APPROVAL now (every tenant), by
    export type; one bounded aggregate query per scrape.

    Args:
        engine: the process's database engine.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "export_approval_awaiting",
                "Exports waiting for an approver's decision now, by type",
                labels=["type"],
            ),
        )

    def describe(self) -> Iterable[Metric]:
        """The gauge family without values (no query)."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        """The gauge, from one query.

        Raises:
            sqlalchemy.exc.SQLAlchemyError: the database did not answer.
        """
        from export_center.db import reading
        from export_center.repository import approvals

        with reading(self.engine) as conn:
            counts = approvals.awaiting_by_type(conn)
        (awaiting,) = self._families()
        for export_type, count in sorted(counts.items()):
            awaiting.add_metric([export_type], count)
        return (awaiting,)
