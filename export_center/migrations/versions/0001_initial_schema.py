"""Initial schema: export_task, export_outbox, export_task_guard

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "export_outbox",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("dispatch_version", sa.Integer(), nullable=False),
        sa.Column("topic", sa.String(length=128), nullable=False),
        sa.Column("tag", sa.String(length=64), nullable=False),
        sa.Column("message_key", sa.String(length=64), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("next_retry_at", TS, nullable=False),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("sent_at", TS, nullable=True),
        sa.Column("last_error", sa.String(length=1000), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_outbox")),
        sa.UniqueConstraint("event_id", name=op.f("uq_export_outbox_event_id")),
        sa.UniqueConstraint(
            "task_id", "dispatch_version", name=op.f("uq_export_outbox_task_id_dispatch_version")
        ),
    )
    op.create_index(
        "ix_export_outbox_publish", "export_outbox", ["status", "next_retry_at", "id"], unique=False
    )
    op.create_index(
        "ix_export_outbox_task",
        "export_outbox",
        ["task_id", "dispatch_version", "status", "sent_at"],
        unique=False,
    )
    op.create_table(
        "export_task",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("task_no", sa.String(length=32), nullable=False),
        sa.Column("export_type", sa.String(length=64), nullable=False),
        sa.Column("format", sa.String(length=8), nullable=False),
        sa.Column("task_name", sa.String(length=200), nullable=False),
        sa.Column("parameters_json", sa.Text(), nullable=False),
        sa.Column("parameters_hash", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=128), nullable=True),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("app_code", sa.String(length=32), nullable=False),
        sa.Column("requested_by", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("processed_rows", sa.BigInteger(), nullable=False),
        sa.Column("total_rows", sa.BigInteger(), nullable=True),
        sa.Column("dispatch_version", sa.Integer(), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("next_retry_at", TS, nullable=False),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("last_heartbeat_at", TS, nullable=True),
        sa.Column("execution_deadline_at", TS, nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("failure_code", sa.String(length=64), nullable=True),
        sa.Column("failure_message", sa.String(length=1000), nullable=True),
        sa.Column("object_key", sa.String(length=512), nullable=True),
        sa.Column("file_name", sa.String(length=255), nullable=True),
        sa.Column("content_type", sa.String(length=128), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("row_count", sa.BigInteger(), nullable=True),
        sa.Column("trace_id", sa.String(length=64), nullable=False),
        sa.Column("requested_at", TS, nullable=False),
        sa.Column("started_at", TS, nullable=True),
        sa.Column("completed_at", TS, nullable=True),
        sa.Column("expires_at", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_task")),
        sa.UniqueConstraint("task_no", name=op.f("uq_export_task_task_no")),
        sa.UniqueConstraint(
            "tenant_id",
            "requested_by",
            "request_id",
            name=op.f("uq_export_task_tenant_id_requested_by_request_id"),
        ),
    )
    op.create_index(
        "ix_export_task_dispatch", "export_task", ["status", "next_retry_at", "id"], unique=False
    )
    op.create_index("ix_export_task_expiry", "export_task", ["status", "expires_at"], unique=False)
    op.create_index("ix_export_task_lease", "export_task", ["status", "lease_until"], unique=False)
    op.create_index(
        "ix_export_task_owner", "export_task", ["tenant_id", "requested_by", "id"], unique=False
    )
    op.create_index(
        "ix_export_task_type_status", "export_task", ["export_type", "status"], unique=False
    )
    op.create_table(
        "export_task_guard",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_task_guard")),
    )
    # The single row that task creation locks.
    guard = sa.table("export_task_guard", sa.column("id", sa.String), sa.column("updated_at", TS))
    op.execute(guard.insert().values(id="GLOBAL_CREATE", updated_at=sa.func.now()))


def downgrade() -> None:
    op.drop_table("export_task_guard")
    op.drop_index("ix_export_task_type_status", table_name="export_task")
    op.drop_index("ix_export_task_owner", table_name="export_task")
    op.drop_index("ix_export_task_lease", table_name="export_task")
    op.drop_index("ix_export_task_expiry", table_name="export_task")
    op.drop_index("ix_export_task_dispatch", table_name="export_task")
    op.drop_table("export_task")
    op.drop_index("ix_export_outbox_task", table_name="export_outbox")
    op.drop_index("ix_export_outbox_publish", table_name="export_outbox")
    op.drop_table("export_outbox")
