"""Rows the providers of this process answered, per export type.

Every 2xx batch page a provider of :mod:`providers.sdk` answers adds its rows here
(refetches included), so the process that serves providers can tell how many rows it
sent: the embedded service exports the count as
``export_sample_provider_rows_served_total{type}``.
"""

from __future__ import annotations

import threading

__all__ = ["count_served", "rows_served"]

_SERVED: dict[str, int] = {}
_LOCK = threading.Lock()


def count_served(export_type: str, rows: int) -> None:
    """Add ``rows`` answered rows to ``export_type``'s count."""
    with _LOCK:
        _SERVED[export_type] = _SERVED.get(export_type, 0) + rows


def rows_served() -> dict[str, int]:
    """Rows answered since this process started, per export type (a copy)."""
    with _LOCK:
        return dict(_SERVED)
