"""The settings group of approvals: ``EXPORT_CENTER_APPROVALS__*``.

:mod:`export_center.settings` assembles it into :class:`~export_center.settings.Settings`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["ApprovalSettings"]


class ApprovalSettings(BaseModel):
    """How long an approval request waits for a decision."""

    expire_hours: float = Field(
        72.0,
        gt=0,
        description=("Hours an export waits for approval before it ends rejected (database clock)"),
    )
