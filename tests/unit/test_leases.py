"""The shared lease statuses are the statuses both outboxes store."""

from __future__ import annotations

from export_center.repository import leases
from export_center.repository.notifications import NotificationStatus
from export_center.states import OutboxStatus


def test_both_outboxes_use_the_lease_statuses() -> None:
    assert leases.PENDING == OutboxStatus.PENDING.value == NotificationStatus.PENDING.value
    assert leases.CLAIMED == OutboxStatus.CLAIMED.value == NotificationStatus.CLAIMED.value
