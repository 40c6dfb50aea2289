"""Alembic environment: runs the package's migrations on the configured engine."""

from __future__ import annotations

from alembic import context

from export_center.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run migrations on the connection given in ``config.attributes`` or the URL."""
    connectable = config.attributes.get("connection")
    if connectable is not None:
        context.configure(connection=connectable, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    from export_center.db import make_engine

    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("alembic: no sqlalchemy.url and no connection given")
    engine = make_engine(url, immediate=False)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
