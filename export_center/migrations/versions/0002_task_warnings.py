"""export_task.warning_message: what a successful export had to change (cut cells, ...)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "export_task", sa.Column("warning_message", sa.String(length=1000), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("export_task", "warning_message")
