"""export_task: file_spec_json (the file a user asked for) and manifest_json

``file_spec_json`` holds the create request's chosen columns and file options
(``filespec.FileSpec.to_json``, canonical JSON), NULL for the defaults (every column,
English header, the format's default options, one file). ``manifest_json`` holds the
signed manifest of a succeeded export: its files with rows, bytes and SHA-256 and its
control totals; NULL until the task succeeds (and for tasks of earlier releases).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("export_task") as batch:
        batch.add_column(sa.Column("file_spec_json", sa.Text(), nullable=True))
        batch.add_column(sa.Column("manifest_json", _LONG_TEXT, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("export_task") as batch:
        batch.drop_column("manifest_json")
        batch.drop_column("file_spec_json")
