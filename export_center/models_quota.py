"""SQLAlchemy model of quota overrides (migration 0013; it also adds the two
``export_task`` indexes the quota counts read, declared in :mod:`export_center.models`).

* ``export_quota``: one row per tenant (``user_id`` empty) or per user of a tenant that
  a platform operator gave its own per-day quota. A NULL limit keeps the setting's
  default (``EXPORT_CENTER_QUOTAS__*``). The tenant row holds the tenant's totals
  (``TENANT_*``), a user row that user's limits (``USER_*``). Usage is not stored: it is
  counted from ``export_task`` inside the create transaction (see
  :mod:`export_center.quotas`).

Same rules as :mod:`export_center.models`: times are ``DATETIME(3)`` UTC written by
the database clock, identity columns compare byte for byte.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from export_center.auth import TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH
from export_center.db import ExactString
from export_center.model_base import Base, BigId, Ts

__all__ = ["ExportQuota"]


class ExportQuota(Base):
    """A per-day quota override of a tenant (``user_id == ''``) or of one user."""

    __tablename__ = "export_quota"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    # '' for the tenant as a whole.
    user_id: Mapped[str] = mapped_column(
        ExactString(USER_ID_MAX_LENGTH), nullable=False, server_default=text("''")
    )
    tasks_per_day: Mapped[int | None] = mapped_column(BigInteger)
    rows_per_day: Mapped[int | None] = mapped_column(BigInteger)
    updated_by: Mapped[str] = mapped_column(ExactString(160), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)

    __table_args__ = (UniqueConstraint("tenant_id", "user_id"),)
