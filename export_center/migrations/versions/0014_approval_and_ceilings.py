"""Governance: export_task gains row_ceiling (the caller's row ceiling, copied at
creation) and a wider status (AWAITING_APPROVAL); export_approval holds approval
requests and decisions

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("export_task") as batch:
        batch.add_column(sa.Column("row_ceiling", sa.BigInteger(), nullable=True))
        batch.alter_column(
            "status",
            existing_type=sa.String(length=16),
            type_=sa.String(length=32),
            existing_nullable=False,
        )
    op.create_table(
        "export_approval",
        sa.Column("task_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("app_code", ExactString(32), nullable=False),
        sa.Column("requested_by", ExactString(128), nullable=False),
        sa.Column("approver_permission", sa.String(length=128), nullable=False),
        sa.Column("reasons", sa.String(length=1000), nullable=False),
        sa.Column("rules_json", sa.Text(), nullable=True),
        sa.Column("estimated_rows", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("requested_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("decided_by", ExactString(128), nullable=True),
        sa.Column("decided_at", TS, nullable=True),
        sa.Column("decision_reason", sa.String(length=1000), nullable=True),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_export_approval")),
    )
    op.create_index(
        "ix_export_approval_queue", "export_approval", ["tenant_id", "outcome", "task_id"]
    )
    op.create_index("ix_export_approval_expiry", "export_approval", ["outcome", "expires_at"])


def downgrade() -> None:
    op.drop_index("ix_export_approval_expiry", table_name="export_approval")
    op.drop_index("ix_export_approval_queue", table_name="export_approval")
    op.drop_table("export_approval")
    with op.batch_alter_table("export_task") as batch:
        batch.alter_column(
            "status",
            existing_type=sa.String(length=32),
            type_=sa.String(length=16),
            existing_nullable=False,
        )
        batch.drop_column("row_ceiling")
