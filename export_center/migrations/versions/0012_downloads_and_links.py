"""Downloads and links: export_download (every download answer), export_link_revocation,
export_link_use (per-link use counts) and export_file_hash (SHA-256 of every file)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "export_download",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("task_no", ExactString(32), nullable=False),
        sa.Column("tenant_id", ExactString(64), nullable=False),
        sa.Column("user_id", ExactString(128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("client_address", sa.String(length=64), nullable=False),
        sa.Column("user_agent", sa.String(length=500), nullable=True),
        sa.Column("link_id", ExactString(16), nullable=True),
        sa.Column("byte_range", sa.String(length=100), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_download")),
    )
    op.create_index("ix_export_download_task", "export_download", ["task_id", "id"])
    op.create_index("ix_export_download_tenant_at", "export_download", ["tenant_id", "at", "id"])
    op.create_index("ix_export_download_link", "export_download", ["link_id"])
    op.create_table(
        "export_link_revocation",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("link_id", ExactString(16), nullable=True),
        sa.Column("revoked_at", TS, nullable=False),
        sa.Column("actor", ExactString(160), nullable=False),
        sa.Column("reason", sa.String(length=1000), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_link_revocation")),
    )
    op.create_index(
        "ix_export_link_revocation_task", "export_link_revocation", ["task_id", "link_id"]
    )
    op.create_table(
        "export_link_use",
        sa.Column("link_id", ExactString(16), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("link_id", name=op.f("pk_export_link_use")),
    )
    op.create_table(
        "export_file_hash",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("sha256", ExactString(64), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("file_name", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_file_hash")),
    )
    op.create_index("ix_export_file_hash_sha256", "export_file_hash", ["sha256"])


def downgrade() -> None:
    op.drop_table("export_file_hash")
    op.drop_table("export_link_use")
    op.drop_index("ix_export_link_revocation_task", table_name="export_link_revocation")
    op.drop_table("export_link_revocation")
    op.drop_index("ix_export_download_link", table_name="export_download")
    op.drop_index("ix_export_download_tenant_at", table_name="export_download")
    op.drop_index("ix_export_download_task", table_name="export_download")
    op.drop_table("export_download")
