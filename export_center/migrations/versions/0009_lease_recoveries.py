"""export_task: lease_recoveries, counted apart from the attempts

A worker killed mid-export (kill -9, a lost machine) is an infrastructure fault, not a
failure of the export: the reconciler's lease recovery no longer spends one of the
task's ``max_attempts`` but counts here, with its own limit
(``task.max_lease_recoveries``), so that a task whose export kills its workers still
ends. Existing tasks start at 0.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("export_task") as batch:
        batch.add_column(
            sa.Column("lease_recoveries", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("export_task") as batch:
        batch.drop_column("lease_recoveries")
