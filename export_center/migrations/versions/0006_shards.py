"""export_shard: the shards of sharded exports and their checkpoints; shards done and
in all on export_task

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("export_task") as batch:
        batch.add_column(sa.Column("shards_done", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("shards_total", sa.Integer(), nullable=True))
    op.create_table(
        "export_shard",
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("shard_no", sa.Integer(), nullable=False),
        sa.Column("shard_key", ExactString(64), nullable=False),
        sa.Column("window_from", sa.String(length=40), nullable=False),
        sa.Column("window_to", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cursor", LONG_TEXT, nullable=True),
        sa.Column("snapshot_token", LONG_TEXT, nullable=True),
        sa.Column("rows_written", sa.BigInteger(), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("checksum", sa.String(length=8), nullable=False),
        sa.Column("segments_json", LONG_TEXT, nullable=False),
        sa.Column("stats_json", sa.Text(), nullable=True),
        sa.Column("dispatch_version", sa.Integer(), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("task_id", "shard_no", name=op.f("pk_export_shard")),
    )


def downgrade() -> None:
    op.drop_table("export_shard")
    with op.batch_alter_table("export_task") as batch:
        batch.drop_column("shards_total")
        batch.drop_column("shards_done")
