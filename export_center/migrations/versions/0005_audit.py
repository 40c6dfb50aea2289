"""export_audit: every disposal, automatic or by a person (append-only)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "export_audit",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("occurred_at", TS, nullable=False),
        sa.Column("actor", ExactString(160), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=True),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.Column("task_no", ExactString(32), nullable=True),
        sa.Column("event_id", ExactString(64), nullable=True),
        sa.Column("dispatch_version", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(length=1000), nullable=True),
        sa.Column("details_json", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_audit")),
    )
    op.create_index("ix_export_audit_occurred", "export_audit", ["occurred_at", "id"])
    op.create_index("ix_export_audit_task", "export_audit", ["task_id", "id"])
    op.create_index("ix_export_audit_tenant", "export_audit", ["tenant_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_export_audit_tenant", table_name="export_audit")
    op.drop_index("ix_export_audit_task", table_name="export_audit")
    op.drop_index("ix_export_audit_occurred", table_name="export_audit")
    op.drop_table("export_audit")
