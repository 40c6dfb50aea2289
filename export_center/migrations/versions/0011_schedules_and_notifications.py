"""Schedules and notifications: export_schedule, export_schedule_run,
export_principal, export_notification (the notification outbox),
export_delivery_attempt, export_webhook_endpoint; export_task gains schedule_id,
notify_json and expiry_notified_at

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("export_task") as batch:
        batch.add_column(sa.Column("schedule_id", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("notify_json", sa.Text(), nullable=True))
        batch.add_column(sa.Column("expiry_notified_at", TS, nullable=True))
    op.create_table(
        "export_schedule",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("app_code", ExactString(32), nullable=False),
        sa.Column("owner", ExactString(128), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("export_type", ExactString(64), nullable=False),
        sa.Column("export_json", sa.Text(), nullable=False),
        sa.Column("cron", sa.String(length=120), nullable=False),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("window_json", sa.String(length=200), nullable=True),
        sa.Column("start_at", TS, nullable=True),
        sa.Column("end_at", TS, nullable=True),
        sa.Column("notify_json", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("pause_reason", sa.String(length=1000), nullable=True),
        sa.Column("next_fire_at", TS, nullable=True),
        sa.Column("lease_owner", ExactString(128), nullable=True),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("deleted_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_schedule")),
    )
    op.create_index("ix_export_schedule_due", "export_schedule", ["status", "next_fire_at", "id"])
    op.create_index("ix_export_schedule_owner", "export_schedule", ["tenant_id", "owner", "id"])
    op.create_table(
        "export_schedule_run",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("schedule_id", sa.BigInteger(), nullable=False),
        sa.Column("fire_time", TS, nullable=False),
        sa.Column("fired_at", TS, nullable=False),
        sa.Column("fires", sa.Integer(), nullable=False),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("window_from", sa.String(length=40), nullable=True),
        sa.Column("window_to", sa.String(length=40), nullable=True),
        sa.Column("failure_code", sa.String(length=64), nullable=True),
        sa.Column("message", sa.String(length=1000), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_schedule_run")),
        sa.UniqueConstraint(
            "schedule_id", "fire_time", name=op.f("uq_export_schedule_run_schedule_id_fire_time")
        ),
    )
    op.create_index("ix_export_schedule_run_schedule", "export_schedule_run", ["schedule_id", "id"])
    op.create_table(
        "export_principal",
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("user_id", ExactString(128), nullable=False),
        sa.Column("app_code", ExactString(32), nullable=False),
        sa.Column("permissions_json", sa.Text(), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("language", sa.String(length=16), nullable=True),
        sa.Column("notify_defaults_json", sa.Text(), nullable=True),
        sa.Column("seen_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "user_id", name=op.f("pk_export_principal")),
    )
    op.create_table(
        "export_notification",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("event_id", ExactString(64), nullable=False),
        sa.Column("event_type", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("user_id", ExactString(128), nullable=True),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.Column("schedule_id", sa.BigInteger(), nullable=True),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("target", ExactString(512), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("next_retry_at", TS, nullable=False),
        sa.Column("lease_owner", ExactString(128), nullable=True),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("sent_at", TS, nullable=True),
        sa.Column("dead_at", TS, nullable=True),
        sa.Column("read_at", TS, nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(length=1000), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_notification")),
        sa.UniqueConstraint(
            "event_id",
            "channel",
            "target",
            name=op.f("uq_export_notification_event_id_channel_target"),
        ),
    )
    op.create_index(
        "ix_export_notification_deliver", "export_notification", ["status", "next_retry_at", "id"]
    )
    op.create_index(
        "ix_export_notification_inbox",
        "export_notification",
        ["tenant_id", "user_id", "channel", "id"],
    )
    op.create_index(
        "ix_export_notification_target", "export_notification", ["channel", "target", "id"]
    )
    op.create_table(
        "export_delivery_attempt",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt_no", sa.Integer(), nullable=False),
        sa.Column("attempted_at", TS, nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(length=1000), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_delivery_attempt")),
    )
    op.create_index(
        "ix_export_delivery_attempt_notification",
        "export_delivery_attempt",
        ["notification_id", "id"],
    )
    op.create_table(
        "export_webhook_endpoint",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("public_id", ExactString(40), nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("events_json", sa.Text(), nullable=False),
        sa.Column("description", sa.String(length=500), nullable=True),
        sa.Column("secret", ExactString(128), nullable=False),
        sa.Column("previous_secret", ExactString(128), nullable=True),
        sa.Column("previous_secret_until", TS, nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_by", ExactString(128), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("deleted_at", TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_webhook_endpoint")),
        sa.UniqueConstraint("public_id", name=op.f("uq_export_webhook_endpoint_public_id")),
    )
    op.create_index(
        "ix_export_webhook_endpoint_tenant", "export_webhook_endpoint", ["tenant_id", "id"]
    )


def downgrade() -> None:
    op.drop_table("export_webhook_endpoint")
    op.drop_table("export_delivery_attempt")
    op.drop_table("export_notification")
    op.drop_table("export_principal")
    op.drop_table("export_schedule_run")
    op.drop_table("export_schedule")
    with op.batch_alter_table("export_task") as batch:
        batch.drop_column("expiry_notified_at")
        batch.drop_column("notify_json")
        batch.drop_column("schedule_id")
