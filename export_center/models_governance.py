"""SQLAlchemy model of approvals (migration 0014); ``export_task`` gains ``row_ceiling``.

Same rules as :mod:`export_center.models`: times are ``DATETIME(3)`` UTC written by the
database clock, identity columns compare byte for byte.

* ``export_approval``: one row per task that had to wait for approval (the task's
  status ``AWAITING_APPROVAL`` is the truth of "waiting"; this row says why, who may
  decide, until when, and who decided what). ``outcome`` is ``awaiting`` until a
  decision: ``approved``, ``rejected``, ``expired`` or ``cancelled``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from export_center.auth import APP_CODE_MAX_LENGTH, TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH
from export_center.db import ExactString
from export_center.model_base import Base, Ts

__all__ = ["ExportApproval"]


class ExportApproval(Base):
    """The approval request of one task."""

    __tablename__ = "export_approval"

    task_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    app_code: Mapped[str] = mapped_column(ExactString(APP_CODE_MAX_LENGTH), nullable=False)
    requested_by: Mapped[str] = mapped_column(ExactString(USER_ID_MAX_LENGTH), nullable=False)
    # The registry's approver_permission when the task was created.
    approver_permission: Mapped[str] = mapped_column(String(128), nullable=False)
    # Why it waits ("about 120,000 rows, more than 100,000; ...").
    reasons: Mapped[str] = mapped_column(String(1000), nullable=False)
    # The same as facts the page words in its language (ApprovalRule.matches, JSON).
    rules_json: Mapped[str | None] = mapped_column(Text)
    estimated_rows: Mapped[int | None] = mapped_column(BigInteger)
    # awaiting | approved | rejected | expired | cancelled
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    requested_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    decided_by: Mapped[str | None] = mapped_column(ExactString(USER_ID_MAX_LENGTH))
    decided_at: Mapped[datetime | None] = mapped_column(Ts)
    decision_reason: Mapped[str | None] = mapped_column(String(1000))

    __table_args__ = (
        Index("ix_export_approval_queue", "tenant_id", "outcome", "task_id"),
        Index("ix_export_approval_expiry", "outcome", "expires_at"),
    )
