"""The CUSTOMERS sample provider: TPC-H ``customer``, written only against the SDK.

It exists to prove that a new export type needs no change in ``export_center/``: this
file, one router line in ``providers/catalog.py`` and one entry in the registry file.
Keyset pagination on ``c_custkey``; the snapshot is the max key at the first batch.
Parameters: optional ``segment`` (market segment).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, text

from providers.sdk import BatchRequest, Column, ExportProvider, Page

__all__ = ["CUSTOMERS_COLUMNS", "customers_provider"]

CUSTOMERS_COLUMNS = [
    Column("c_custkey", "Customer key", "INTEGER", 12, "客户编号"),
    Column("c_name", "Name", "STRING", 20, "客户名称"),
    Column("c_address", "Address", "STRING", 40, "地址"),
    Column("c_nationkey", "Nation", "INTEGER", 8, "国家编号"),
    Column("c_phone", "Phone", "STRING", 16, "电话"),
    Column("c_acctbal", "Account balance", "DECIMAL", 14, "账户余额", precision=15, scale=2),
    Column("c_mktsegment", "Market segment", "STRING", 12, "市场细分"),
    Column("c_comment", "Comment", "STRING", 60, "备注"),
]
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")


def _segment(req: BatchRequest) -> tuple[str, dict[str, Any]]:
    """The SQL condition (`` AND ...``) of the optional ``segment`` and its binds."""
    segment = req.parameters.get("segment")
    if not segment:
        return "", {}
    return " AND c_mktsegment = :segment", {"segment": segment}


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

    def snapshot_and_count(conn: Connection, where: str, binds: dict[str, Any]) -> tuple[int, int]:
        """``(max customer key, customers of the filter up to it)``."""
        max_key = int(conn.execute(text("SELECT MAX(c_custkey) FROM customer")).scalar() or 0)
        count = conn.execute(
            text(f"SELECT COUNT(*) FROM customer WHERE c_custkey <= :max_key{where}"),
            {"max_key": max_key, **binds},
        ).scalar()
        return max_key, int(count or 0)

    @provider.estimator
    def estimate(req: BatchRequest) -> int:
        where, binds = _segment(req)
        with engine.connect() as conn:
            return snapshot_and_count(conn, where, binds)[1]

    @provider.fetcher
    def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
        where, binds = _segment(req)
        total = None
        with engine.connect() as conn:
            if snapshot is None:
                max_key, total = snapshot_and_count(conn, where, binds)
                snapshot = {"maxKey": max_key}
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
