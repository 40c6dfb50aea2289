"""SQLAlchemy models of the export center's own tables.

Columns follow DESIGN.md "Tables". The reference MySQL
DDL is ``sql/mysql/schema.sql``; a migration test keeps it equal to the Alembic head.
Times are ``DATETIME(3)`` on MySQL (UTC, written by the database clock). Identity and
key columns are :class:`~export_center.db.ExactString`: compared byte for byte on every
database (binary, no-pad collation on MySQL/MariaDB).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from export_center.auth import APP_CODE_MAX_LENGTH, TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH
from export_center.db import ExactString
from export_center.model_base import Base, BigId, LongText, Ts

__all__ = [
    "Base",
    "ExportAudit",
    "ExportOutbox",
    "ExportRequestKey",
    "ExportShard",
    "ExportTask",
    "ExportTaskGuard",
    "GUARD_ROW_ID",
]

#: Primary key of the row of ``export_task_guard`` the first migration writes.
GUARD_ROW_ID = "GLOBAL_CREATE"


class ExportTask(Base):
    """One export a user asked for; the download center's source of truth."""

    __tablename__ = "export_task"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    task_no: Mapped[str] = mapped_column(ExactString(32), nullable=False, unique=True)
    export_type: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    format: Mapped[str] = mapped_column(String(8), nullable=False)
    task_name: Mapped[str] = mapped_column(String(200), nullable=False)
    parameters_json: Mapped[str] = mapped_column(Text, nullable=False)
    parameters_hash: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    request_id: Mapped[str | None] = mapped_column(ExactString(128))
    # The identity columns: their widths are the token's claim limits (auth.py).
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    app_code: Mapped[str] = mapped_column(ExactString(APP_CODE_MAX_LENGTH), nullable=False)
    requested_by: Mapped[str] = mapped_column(ExactString(USER_ID_MAX_LENGTH), nullable=False)
    status: Mapped[str] = mapped_column(String(32), nullable=False)
    phase: Mapped[str] = mapped_column(String(16), nullable=False)
    processed_rows: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    total_rows: Mapped[int | None] = mapped_column(BigInteger)
    shards_done: Mapped[int | None] = mapped_column(Integer)
    shards_total: Mapped[int | None] = mapped_column(Integer)
    dispatch_version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    attempt_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=3)
    lease_recoveries: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    next_retry_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    lease_owner: Mapped[str | None] = mapped_column(ExactString(128))
    lease_until: Mapped[datetime | None] = mapped_column(Ts)
    last_heartbeat_at: Mapped[datetime | None] = mapped_column(Ts)
    execution_deadline_at: Mapped[datetime | None] = mapped_column(Ts)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    failure_code: Mapped[str | None] = mapped_column(String(64))
    failure_message: Mapped[str | None] = mapped_column(String(1000))
    warning_message: Mapped[str | None] = mapped_column(String(1000))
    object_key: Mapped[str | None] = mapped_column(ExactString(512))
    file_name: Mapped[str | None] = mapped_column(String(255))
    content_type: Mapped[str | None] = mapped_column(String(128))
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)
    row_count: Mapped[int | None] = mapped_column(BigInteger)
    trace_id: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    time_zone: Mapped[str] = mapped_column(String(64), nullable=False, server_default=text("'UTC'"))
    requested_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    started_at: Mapped[datetime | None] = mapped_column(Ts)
    completed_at: Mapped[datetime | None] = mapped_column(Ts)
    expires_at: Mapped[datetime | None] = mapped_column(Ts)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    # The chosen columns and file options (filespec.FileSpec.to_json), NULL: the defaults.
    file_spec_json: Mapped[str | None] = mapped_column(Text)
    # The signed manifest of a succeeded export (files, hashes, control totals).
    manifest_json: Mapped[str | None] = mapped_column(LongText)
    # The schedule whose run made this task, NULL: a person or a service asked.
    schedule_id: Mapped[int | None] = mapped_column(BigInteger)
    # The create's notify list (JSON), NULL: the owner's defaults.
    notify_json: Mapped[str | None] = mapped_column(Text)
    # When the expiring-soon notification was written (once per task).
    expiry_notified_at: Mapped[datetime | None] = mapped_column(Ts)
    # The requester's row ceiling (registry row_ceilings), copied at creation.
    row_ceiling: Mapped[int | None] = mapped_column(BigInteger)

    __table_args__ = (
        UniqueConstraint("tenant_id", "requested_by", "request_id"),
        Index("ix_export_task_dispatch", "status", "next_retry_at", "id"),
        Index("ix_export_task_lease", "status", "lease_until"),
        Index("ix_export_task_owner", "tenant_id", "requested_by", "id"),
        Index("ix_export_task_owner_status", "tenant_id", "requested_by", "status"),
        Index("ix_export_task_type_status", "export_type", "status"),
        Index("ix_export_task_expiry", "status", "expires_at"),
        # The daily quota counts (migration 0013, export_center.quotas).
        Index("ix_export_task_quota_created", "tenant_id", "requested_at"),
        Index("ix_export_task_quota_finished", "tenant_id", "completed_at"),
    )


class ExportOutbox(Base):
    """A command to send, written in the transaction that changed the task."""

    __tablename__ = "export_outbox"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(ExactString(64), nullable=False, unique=True)
    task_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    dispatch_version: Mapped[int] = mapped_column(Integer, nullable=False)
    topic: Mapped[str] = mapped_column(String(128), nullable=False)
    tag: Mapped[str] = mapped_column(String(64), nullable=False)
    message_key: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    payload_json: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    attempt_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_retry_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    lease_owner: Mapped[str | None] = mapped_column(ExactString(128))
    lease_until: Mapped[datetime | None] = mapped_column(Ts)
    sent_at: Mapped[datetime | None] = mapped_column(Ts)
    last_error: Mapped[str | None] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    #: What the row wakes: ``task`` (the command of one dispatch version), or
    #: ``shard-<no>.<attempt>`` (one shard of a distributed export, migration 0015).
    unit: Mapped[str] = mapped_column(
        String(32), nullable=False, default="task", server_default="task"
    )

    __table_args__ = (
        UniqueConstraint("task_id", "dispatch_version", "unit"),
        Index("ix_export_outbox_publish", "status", "next_retry_at", "id"),
        Index("ix_export_outbox_task", "task_id", "dispatch_version", "status", "sent_at"),
        # The reconciler's purge of SENT rows past the retention (migration 0007).
        Index("ix_export_outbox_sent", "sent_at"),
    )


class ExportTaskGuard(Base):
    """Create-guard rows that task creation locks (``SELECT ... FOR UPDATE``): one per
    requester, tenant or export type, made on first use (``repository/guards.py``), and
    ``GLOBAL_CREATE``, which the first migration writes (start-up and ``doctor`` check
    it to tell a migrated schema)."""

    __tablename__ = "export_task_guard"

    id: Mapped[str] = mapped_column(ExactString(32), primary_key=True)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)


class ExportRequestKey(Base):
    """An idempotency key and the task it answered, whatever the answer was.

    A create with a ``requestId`` (or ``Idempotency-Key``) that made a task, or that was
    answered with an active duplicate of the same export, records the key here, so that
    a retry with the same key gets the same task even after that task ended, and the
    key can never name another export.
    """

    __tablename__ = "export_request_key"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH), nullable=False)
    requested_by: Mapped[str] = mapped_column(ExactString(USER_ID_MAX_LENGTH), nullable=False)
    request_key: Mapped[str] = mapped_column(ExactString(128), nullable=False)
    task_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    created_at: Mapped[datetime] = mapped_column(Ts, nullable=False)

    __table_args__ = (UniqueConstraint("tenant_id", "requested_by", "request_key"),)


class ExportAudit(Base):
    """One disposal, automatic or by a person: append-only.

    Written in the transaction of the change it records (quarantine, manual retry or
    cancel, lease recovery, registry reload). The product never updates or deletes a
    row, except the retention purge of rows older than the audit retention.
    """

    __tablename__ = "export_audit"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    occurred_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    actor: Mapped[str] = mapped_column(ExactString(160), nullable=False)
    action: Mapped[str] = mapped_column(String(32), nullable=False)
    outcome: Mapped[str] = mapped_column(String(32), nullable=False)
    tenant_id: Mapped[str | None] = mapped_column(ExactString(TENANT_ID_MAX_LENGTH))
    task_id: Mapped[int | None] = mapped_column(BigInteger)
    task_no: Mapped[str | None] = mapped_column(ExactString(32))
    event_id: Mapped[str | None] = mapped_column(ExactString(64))
    dispatch_version: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(String(1000))
    details_json: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_export_audit_occurred", "occurred_at", "id"),
        Index("ix_export_audit_task", "task_id", "id"),
        Index("ix_export_audit_tenant", "tenant_id", "id"),
    )


class ExportShard(Base):
    """One shard of a sharded export and its checkpoint.

    A sharded export type splits a task into windows (for example days of the date
    range); each shard pages with its own keyset cursor and snapshot token and writes
    its part as numbered segments in storage. The row is written in the same
    transaction as the task's progress and only while the writing attempt holds the
    task's lease (owner and dispatch version), so a checkpoint always names segments
    that are stored: ``segments_json`` holds ``{"runs": [[dispatch_version, count]]}``
    (consecutive segments of one attempt folded; rows written before the runs list
    ``[dispatch_version, bytes]`` per segment and are read alike),
    ``bytes`` and ``checksum`` (CRC-32 of the part so far, as 8 hex digits) cover
    exactly those segments, and ``cursor`` is where the next page starts. A shard in
    status ``DONE`` is reused by every later attempt; the others resume from here.
    """

    __tablename__ = "export_shard"

    task_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    shard_no: Mapped[int] = mapped_column(Integer, primary_key=True)
    shard_key: Mapped[str] = mapped_column(ExactString(64), nullable=False)
    window_from: Mapped[str] = mapped_column(String(40), nullable=False)
    window_to: Mapped[str] = mapped_column(String(40), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    cursor: Mapped[str | None] = mapped_column(LongText)
    snapshot_token: Mapped[str | None] = mapped_column(LongText)
    rows_written: Mapped[int] = mapped_column(BigInteger, nullable=False)
    pages: Mapped[int] = mapped_column(Integer, nullable=False)
    bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    checksum: Mapped[str] = mapped_column(String(8), nullable=False)
    segments_json: Mapped[str] = mapped_column(LongText, nullable=False)
    stats_json: Mapped[str | None] = mapped_column(Text)
    dispatch_version: Mapped[int] = mapped_column(Integer, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Ts, nullable=False)
    # A distributed shard's own lease and attempts (migration 0015): the worker that
    # claimed it (any worker of the cluster), until when, how many claims it had, and
    # why it failed for good.
    lease_owner: Mapped[str | None] = mapped_column(ExactString(128))
    lease_until: Mapped[datetime | None] = mapped_column(Ts)
    attempt_count: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0"
    )
    failure_code: Mapped[str | None] = mapped_column(String(64))
    failure_message: Mapped[str | None] = mapped_column(String(1000))


# The schedule, notification, download, quota and governance tables share Base.metadata
# (migrations, schema checks).
import export_center.models_downloads  # noqa: E402, F401
import export_center.models_governance  # noqa: E402, F401
import export_center.models_notify  # noqa: E402, F401
import export_center.models_quota  # noqa: E402, F401
