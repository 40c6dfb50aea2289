"""Notification messages for channel tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from export_center.notify.channels.base import Message

FILE_URL = "https://exports.example.com/api/v1/exports/T1/download?sig=abc&exp=1"
TASK_URL = "https://exports.example.com/download-center/#/tasks/T1"


def succeeded(language: str = "en", **data: Any) -> Message:
    """An ``export.succeeded`` event of task T1 (orders, 1234 rows) with both links."""
    values: dict[str, Any] = {
        "taskId": "T1",
        "state": "succeeded",
        "exportType": "ORDERS",
        "taskName": "Weekly orders",
        "rows": 1234,
        "fileName": "orders-2026-11.xlsx",
        "expiresAt": "2026-12-09T08:00:00+00:00",
    }
    values.update(data)
    return Message(
        event_id="evt_01JTEST",
        event_type="export.succeeded",
        created_at=datetime(2026, 12, 2, 8, 0, tzinfo=UTC),
        tenant_id="t1",
        user_id="u1",
        data=values,
        language=language,
        links={"task": TASK_URL, "file": FILE_URL},
    )


def failed(language: str = "en", **data: Any) -> Message:
    """An ``export.failed`` event of task T2 with a failure code and message."""
    values: dict[str, Any] = {
        "taskId": "T2",
        "state": "failed",
        "exportType": "ORDERS",
        "taskName": "Orders",
        "failureCode": "PROVIDER_TIMEOUT",
        "failureMessage": "the provider did not answer",
    }
    values.update(data)
    return Message(
        event_id="evt_01JFAIL",
        event_type="export.failed",
        created_at=datetime(2026, 12, 2, 8, 0, tzinfo=UTC),
        tenant_id="t1",
        user_id="u1",
        data=values,
        language=language,
        links={"task": TASK_URL},
    )
