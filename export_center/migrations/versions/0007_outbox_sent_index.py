"""export_outbox: index (status, sent_at) for the reconciler's outbox purge

The purge asks for SENT rows sent before the retention (``status = 'SENT' AND sent_at
<= now - 7 days``, ``purge_sent_outbox``); without this index it walked every SENT
row through ``ix_export_outbox_publish`` (status only) on every reconciler pass:
100,000 rows examined on a 100,000-row outbox (``python -m bench.load --explain``).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_export_outbox_sent", "export_outbox", ["status", "sent_at"])


def downgrade() -> None:
    op.drop_index("ix_export_outbox_sent", table_name="export_outbox")
