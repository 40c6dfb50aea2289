"""Quotas over time: export_quota (per-day overrides of a tenant or a user), and the
export_task indexes the daily counts read

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "export_quota",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("user_id", ExactString(128), server_default=sa.text("''"), nullable=False),
        sa.Column("tasks_per_day", sa.BigInteger(), nullable=True),
        sa.Column("rows_per_day", sa.BigInteger(), nullable=True),
        sa.Column("updated_by", ExactString(160), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_quota")),
        sa.UniqueConstraint("tenant_id", "user_id", name=op.f("uq_export_quota_tenant_id_user_id")),
    )
    op.create_index("ix_export_task_quota_created", "export_task", ["tenant_id", "requested_at"])
    op.create_index("ix_export_task_quota_finished", "export_task", ["tenant_id", "completed_at"])


def downgrade() -> None:
    op.drop_index("ix_export_task_quota_finished", table_name="export_task")
    op.drop_index("ix_export_task_quota_created", table_name="export_task")
    op.drop_table("export_quota")
