"""SQLAlchemy models of downloads, link revocations and file hashes (migration 0012).

Same rules as :mod:`export_center.models` (whose :class:`~export_center.models.Base`
they share): times are ``DATETIME(3)`` UTC written by the database clock, identity and
key columns compare byte for byte (:class:`~export_center.db.ExactString`).

* ``export_download``: append-only, one row per download answer: a bearer download (the
  307 to a signed link), a signed-link download (the file, a range of it, or a refusal
  once the link was verified) and each presigned S3 hop (the 307 to the bucket). Who (the
  link's bound user, or the caller), when, the client address (trusted proxies only),
  the user agent, the link id, the ``Range`` asked and the answer code.
* ``export_link_revocation``: append-only, one row per revocation: of one link id, or
  (``link_id`` NULL) of every link of the task issued up to ``revoked_at``.
* ``export_link_use``: how many times a link id served its file (per-type use limits;
  incremented by a fenced UPDATE, so the count is exact under concurrency).
* ``export_file_hash``: the SHA-256 of every file a task produced (the downloaded file,
  each part inside its ZIP and the ZIP itself), for ``export-center trace``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from export_center.auth import TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH
from export_center.db import ExactString
from export_center.model_base import Base, BigId, Ts

__all__ = ["ExportDownload", "ExportFileHash", "ExportLinkRevocation", "ExportLinkUse"]

#: Length of a link id (hex).
LINK_ID_LENGTH = 16


class ExportDownload(Base):
    """One download answer (append-only)."""

    __tablename__ = "export_download"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    task_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    task_no: Mapped[str] = mapped_column(ExactString(32), nullable=False)
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    user_id: Mapped[str] = mapped_column(ExactString(USER_ID_MAX_LENGTH), nullable=False)
    # bearer | link | presigned
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    client_address: Mapped[str] = mapped_column(String(64), nullable=False)
    user_agent: Mapped[str | None] = mapped_column(String(500))
    link_id: Mapped[str | None] = mapped_column(ExactString(LINK_ID_LENGTH))
    byte_range: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[int] = mapped_column(Integer, nullable=False)
    code: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        Index("ix_export_download_task", "task_id", "id"),
        Index("ix_export_download_tenant_at", "tenant_id", "at", "id"),
        Index("ix_export_download_link", "link_id"),
    )


class ExportLinkRevocation(Base):
    """One revocation of a link (or of every link of a task): append-only."""

    __tablename__ = "export_link_revocation"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    task_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    link_id: Mapped[str | None] = mapped_column(ExactString(LINK_ID_LENGTH))
    revoked_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    actor: Mapped[str] = mapped_column(ExactString(160), nullable=False)
    reason: Mapped[str | None] = mapped_column(String(1000))

    __table_args__ = (Index("ix_export_link_revocation_task", "task_id", "link_id"),)


class ExportLinkUse(Base):
    """How many times a link served its file."""

    __tablename__ = "export_link_use"

    link_id: Mapped[str] = mapped_column(ExactString(LINK_ID_LENGTH), primary_key=True)
    task_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    uses: Mapped[int] = mapped_column(Integer, nullable=False)


class ExportFileHash(Base):
    """The SHA-256 of one file a task produced."""

    __tablename__ = "export_file_hash"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    sha256: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    task_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    file_name: Mapped[str] = mapped_column(String(255), nullable=False)
    # file (the downloaded file or a part in the ZIP) | archive (the ZIP)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)

    __table_args__ = (Index("ix_export_file_hash_sha256", "sha256"),)
