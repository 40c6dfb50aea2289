"""The CUSTOMERS sample provider: TPC-H ``customer``, written only against the SDK.

It exists to prove that a new export type needs no change in ``export_center/``: this
file, one router line in ``providers/catalog.py`` and one entry in the registry file.
Keyset pagination on ``c_custkey``; the snapshot is the max key at the first batch.
Parameters: optional ``segment`` (market segment).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text

from providers.sdk import BatchRequest, Column, ExportProvider, Page

__all__ = ["CUSTOMERS_COLUMNS", "customers_provider"]

CUSTOMERS_COLUMNS = [
    Column("c_custkey", "Customer key", "INTEGER", 12),
    Column("c_name", "Name", "STRING", 20),
    Column("c_address", "Address", "STRING", 40),
    Column("c_nationkey", "Nation", "INTEGER", 8),
    Column("c_phone", "Phone", "STRING", 16),
    Column("c_acctbal", "Account balance", "DECIMAL", 14),
    Column("c_mktsegment", "Market segment", "STRING", 12),
    Column("c_comment", "Comment", "STRING", 60),
]
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")


def customers_provider(
    engine: Engine, *, token: str, secret: str, snapshot_ttl_seconds: int = 86400
) -> ExportProvider:
    """The CUSTOMERS provider reading ``customer`` through ``engine``."""
    provider = ExportProvider(
        "CUSTOMERS",
        CUSTOMERS_COLUMNS,
        token=token,
        secret=secret,
        snapshot_ttl_seconds=snapshot_ttl_seconds,
    )

    @provider.fetcher
    def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
        segment = req.parameters.get("segment")
        where = " AND c_mktsegment = :segment" if segment else ""
        binds: dict[str, Any] = {"segment": segment} if segment else {}
        total = None
        with engine.connect() as conn:
            if snapshot is None:
                max_key = int(
                    conn.execute(text("SELECT MAX(c_custkey) FROM customer")).scalar() or 0
                )
                snapshot = {"maxKey": max_key}
                total = int(
                    conn.execute(
                        text(f"SELECT COUNT(*) FROM customer WHERE c_custkey <= :max_key{where}"),
                        {"max_key": max_key, **binds},
                    ).scalar()
                    or 0
                )
            after = int(cursor or 0)
            rows = [
                dict(r)
                for r in conn.execute(
                    text(
                        "SELECT c_custkey, c_name, c_address, c_nationkey, c_phone, c_acctbal,"
                        " c_mktsegment, c_comment FROM customer"
                        " WHERE c_custkey > :after AND c_custkey <= :max_key"
                        f"{where} ORDER BY c_custkey LIMIT :limit"
                    ),
                    {
                        "after": after,
                        "max_key": snapshot["maxKey"],
                        "limit": req.limit + 1,
                        **binds,
                    },
                ).mappings()
            ]
        has_more = len(rows) > req.limit
        rows = rows[: req.limit]
        for row in rows:  # SQLite keeps DECIMAL(15,2) as REAL: send exact two-decimal text
            row["c_acctbal"] = f"{float(row['c_acctbal']):.2f}"
        return Page(
            rows=rows,
            next_cursor=rows[-1]["c_custkey"] if rows else after,
            has_more=has_more,
            snapshot=snapshot,
            total_rows=total,
        )

    return provider
