"""The declarative base and column types shared by every model module.

:class:`Base` carries the constraint naming convention; ``BigId``, ``Ts`` and
``LongText`` are the dialect-aware column types (BIGINT ids, ``DATETIME(3)`` times and
``MEDIUMTEXT`` long texts on MySQL/MariaDB; INTEGER ids, so that the rowid
autoincrement applies, and text times on SQLite).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, DateTime, Integer, MetaData, Text
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase

__all__ = ["Base", "BigId", "LongText", "Ts"]

# BIGINT on MySQL, INTEGER on SQLite (so SQLite's rowid autoincrement applies).
BigId = BigInteger().with_variant(Integer(), "sqlite")
# DATETIME(3) on MySQL; SQLAlchemy's text format on SQLite.
Ts = DateTime().with_variant(mysql.DATETIME(fsp=3), "mysql", "mariadb")
LongText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


naming = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base with a stable constraint naming convention."""

    metadata = MetaData(naming_convention=naming)
