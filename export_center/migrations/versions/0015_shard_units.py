"""Distributed shards: export_shard gains its own lease (owner, until), attempt count
and failure; export_outbox gains ``unit`` (``task``, or ``shard-<no>.<attempt>`` for the
wake-up of one shard), unique with task and dispatch version

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from export_center.db import ExactString

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TS = sa.DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("export_shard") as batch:
        batch.add_column(sa.Column("lease_owner", ExactString(128), nullable=True))
        batch.add_column(sa.Column("lease_until", TS, nullable=True))
        batch.add_column(
            sa.Column("attempt_count", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("failure_code", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("failure_message", sa.String(length=1000), nullable=True))
    with op.batch_alter_table("export_outbox") as batch:
        batch.add_column(
            sa.Column("unit", sa.String(length=32), nullable=False, server_default="task")
        )
        batch.drop_constraint("uq_export_outbox_task_id_dispatch_version", type_="unique")
        batch.create_unique_constraint(
            "uq_export_outbox_task_id_dispatch_version_unit",
            ["task_id", "dispatch_version", "unit"],
        )


def downgrade() -> None:
    op.execute("DELETE FROM export_outbox WHERE unit <> 'task'")
    with op.batch_alter_table("export_outbox") as batch:
        batch.drop_constraint("uq_export_outbox_task_id_dispatch_version_unit", type_="unique")
        batch.create_unique_constraint(
            "uq_export_outbox_task_id_dispatch_version", ["task_id", "dispatch_version"]
        )
        batch.drop_column("unit")
    with op.batch_alter_table("export_shard") as batch:
        batch.drop_column("failure_message")
        batch.drop_column("failure_code")
        batch.drop_column("attempt_count")
        batch.drop_column("lease_until")
        batch.drop_column("lease_owner")
