"""export_task: index on (tenant_id, requested_by, status) for the create checks

A create holds the guard row while it looks for an active duplicate of the request and
counts the requester's active tasks (``repository.create_task``). Both filter on the
requester and on ``status IN (PENDING, RUNNING)``; through ``ix_export_task_owner``
they read every task the requester ever had (1,114 rows, 4.8 ms on MariaDB for the
heaviest of 2,000 users with 100,000 tasks: ``python -m bench.load --explain``), with
this index only the active ones, while the guard is held.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_export_task_owner_status", "export_task", ["tenant_id", "requested_by", "status"]
    )


def downgrade() -> None:
    op.drop_index("ix_export_task_owner_status", table_name="export_task")
