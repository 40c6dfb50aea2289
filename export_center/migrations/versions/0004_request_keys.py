"""export_request_key: every idempotency key and the task it answered

A create with a requestId that was answered with an active duplicate (the same export
asked again within the duplicate window) did not remember its key, so a retry with
the same key after that task ended made a second export. Keys now live in their own
table, one row per (tenant, requester, key), pointing at the task that answered them.
Existing keys (export_task.request_id) are copied over.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "export_request_key",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("requested_by", ExactString(128), nullable=False),
        sa.Column("request_key", ExactString(128), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_request_key")),
        sa.UniqueConstraint(
            "tenant_id",
            "requested_by",
            "request_key",
            name=op.f("uq_export_request_key_tenant_id_requested_by_request_key"),
        ),
    )
    op.execute(
        "INSERT INTO export_request_key (tenant_id, requested_by, request_key, task_id, "
        "created_at) SELECT tenant_id, requested_by, request_id, id, requested_at "
        "FROM export_task WHERE request_id IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_table("export_request_key")
