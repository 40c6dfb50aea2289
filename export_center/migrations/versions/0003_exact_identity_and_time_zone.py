"""Identity and key columns compare byte for byte; export_task.time_zone

On MySQL and MariaDB every identity and key column (tenant, app, owner, idempotency
key, task id, event id, object key, lease owner, ...) gets the binary no-pad collation
(``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on MySQL 8), whatever the
server's or database's default: under a case-insensitive default collation ``acme``
and ``ACME`` were one tenant. SQLite compares text bytewise already, so only the new
column is added there.

``export_task.time_zone``: the IANA zone an export writes its date-times in (existing
tasks: UTC, the only zone before this revision).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from export_center.db import ExactString

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

#: (table, column, length, nullable) of every column made exact.
EXACT_COLUMNS = (
    ("export_task", "task_no", 32, False),
    ("export_task", "export_type", 64, False),
    ("export_task", "parameters_hash", 64, False),
    ("export_task", "request_id", 128, True),
    ("export_task", "tenant_id", 64, False),
    ("export_task", "app_code", 32, False),
    ("export_task", "requested_by", 128, False),
    ("export_task", "lease_owner", 128, True),
    ("export_task", "object_key", 512, True),
    ("export_task", "trace_id", 64, False),
    ("export_outbox", "event_id", 64, False),
    ("export_outbox", "message_key", 64, False),
    ("export_outbox", "lease_owner", 128, True),
    ("export_task_guard", "id", 32, False),
)


def _mysql() -> bool:
    return op.get_bind().dialect.name in ("mysql", "mariadb")


def upgrade() -> None:
    if _mysql():
        for table, column, length, nullable in EXACT_COLUMNS:
            op.alter_column(
                table,
                column,
                type_=ExactString(length),
                existing_type=sa.String(length),
                existing_nullable=nullable,
            )
    op.add_column(
        "export_task",
        sa.Column("time_zone", sa.String(length=64), nullable=False, server_default="UTC"),
    )


def downgrade() -> None:
    op.drop_column("export_task", "time_zone")
    if _mysql():
        for table, column, length, nullable in EXACT_COLUMNS:
            op.alter_column(
                table,
                column,
                type_=sa.String(length),
                existing_type=ExactString(length),
                existing_nullable=nullable,
            )
