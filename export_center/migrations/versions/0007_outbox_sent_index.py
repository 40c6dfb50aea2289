"""export_outbox: index on sent_at for the reconciler's outbox purge

The purge asks for SENT rows sent before the retention (``status = 'SENT' AND sent_at
<= now - 7 days``, ``purge_sent_outbox``, ``ORDER BY id``); without this index MariaDB
walked the whole outbox on every reconciler pass: 100,700 rows examined (18.6 ms) on a
100,700-row outbox, 1 row (0.3 ms) with it (``python -m bench.load --explain``).

``sent_at`` alone rather than ``(status, sent_at)``: with the pair, SQLite (no
statistics) drives the redispatch's stale-command query from the outbox instead of
from the few PENDING tasks and reads every old SENT row there; with ``sent_at`` alone
SQLite's plans stay as they were (its purge still reads every SENT row: SQLite prefers
the equality on status; ``ORDER BY sent_at, id`` in the purge would let it use this
index too).

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
    op.create_index("ix_export_outbox_sent", "export_outbox", ["sent_at"])


def downgrade() -> None:
    op.drop_index("ix_export_outbox_sent", table_name="export_outbox")
