"""What every attempt of the process shares, and what an attempt reports at its end.

* :class:`RunContext`: settings, registry, storage, provider client, the command topic
  and the stopping flag, built once per process and handed to every attempt;
* :class:`AttemptOutcome`: how an attempt ended (a metric label and a log field);
* :func:`change_warning`: the sentence a succeeded export carries when the writer had to
  change what the provider sent.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from export_center.provider_client import ProviderClient
from export_center.registry import Registry
from export_center.settings import Settings
from export_center.storage.base import Storage

__all__ = ["AttemptOutcome", "RunContext", "change_warning"]


class AttemptOutcome(StrEnum):
    """How one attempt ended (a metric label and a log field)."""

    SUCCEEDED = "succeeded"
    RETRY = "retry"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RELEASED = "released"
    LEASE_LOST = "lease_lost"


@dataclass(slots=True)
class RunContext:
    """What every attempt needs; built once per process.

    Attributes:
        settings: process settings.
        registry: export types (provider address, batch size, max rows read now).
        storage: where files go.
        provider: HTTP client for providers.
        topic: command topic for retry outbox rows.
        self_url: the API's own base URL (for ``provider_url: self``).
        stopping: set when the process shuts down (attempts hand their task back).
    """

    settings: Settings
    registry: Registry
    storage: Storage
    provider: ProviderClient
    topic: str
    self_url: str | None = None
    stopping: threading.Event = field(default_factory=threading.Event)


def change_warning(stats: Any, notes: Sequence[str] = ()) -> str | None:
    """A sentence on what the writer had to change, or None (CASES E08, E10, E15).

    Replaced characters are named by kind, e.g. "3 control character(s),
    1 non-character(s) (U+FFFE/U+FFFF) and 2 lone surrogate(s) replaced with U+FFFD";
    kinds with a zero count are left out. Stats without the split (only
    ``replaced_chars``) give "N character(s) replaced with U+FFFD".

    Args:
        stats: the writer's ``WriterStats``.
        notes: further parts (the undeclared keys the rows carried).

    Returns:
        The parts joined with "; ", or None when nothing was changed.
    """
    parts = []
    if stats.truncated_cells:
        parts.append(f"{stats.truncated_cells:,} cell(s) cut to Excel's 32,767-character limit")
    if stats.replaced_chars:
        kinds = [
            (getattr(stats, "replaced_control_chars", 0), "control character(s)"),
            (getattr(stats, "replaced_noncharacters", 0), "non-character(s) (U+FFFE/U+FFFF)"),
            (getattr(stats, "replaced_surrogates", 0), "lone surrogate(s)"),
        ]
        named = [f"{count:,} {kind}" for count, kind in kinds if count]
        if not named:
            named = [f"{stats.replaced_chars:,} character(s)"]
        listed = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]
        parts.append(f"{listed} replaced with U+FFFD")
    if getattr(stats, "invalid_numbers", 0):
        parts.append(f"{stats.invalid_numbers:,} NaN/Infinity value(s) written as empty cells")
    if stats.sheets > 1:
        parts.append(f"rows split over {stats.sheets} sheets (1,048,575 rows per sheet)")
    parts.extend(notes)
    return "; ".join(parts) or None
