"""One result of ``export-center doctor`` (:mod:`export_center.doctor`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Check"]


@dataclass(frozen=True, slots=True)
class Check:
    """One check: its name, whether it passed, and a sentence (the fix when it failed)."""

    name: str
    ok: bool
    message: str
