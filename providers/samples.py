"""Sample providers on TPC-H data, built on the provider SDK.

``ORDERS``: TPC-H ``orders`` joined with ``customer``. Keyset pagination on
``o_orderkey``; the snapshot is the signed max order key read at the first batch, so
orders inserted during the export are never included (seed 002 §10.2: "no rows added
after the export started"). Parameters: ``from``/``to`` order dates (both inclusive),
optional ``status`` and ``priority``.

The TPC-H sample is shared demo data: it has no tenant column, so every tenant sees
the same orders (a real provider filters by ``tenantId``/``appCode``, never by tenant
fields inside ``parameters``).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Date, Engine, Integer, Numeric, String, text

from providers.sdk import BatchRequest, Column, ExportProvider, Page, ProviderFault

__all__ = ["ORDERS_COLUMNS", "orders_provider", "sample_router"]

ORDERS_COLUMNS = [
    Column("o_orderkey", "Order key", "INTEGER", 12),
    Column("o_custkey", "Customer key", "INTEGER", 12),
    Column("c_name", "Customer name", "STRING", 20),
    Column("c_phone", "Phone", "STRING", 16),
    Column("c_mktsegment", "Market segment", "STRING", 12),
    Column("o_orderstatus", "Order status", "STRING", 6),
    Column("o_totalprice", "Total price", "DECIMAL", 14),
    Column("o_orderdate", "Order date", "DATE", 12),
    Column("o_orderpriority", "Priority", "STRING", 16),
    Column("o_clerk", "Clerk", "STRING", 16),
    Column("o_shippriority", "Ship priority", "INTEGER", 8),
    Column("o_comment", "Comment", "STRING", 60),
]

_SELECT = """
SELECT o.o_orderkey, o.o_custkey, c.c_name, c.c_phone, c.c_mktsegment, o.o_orderstatus,
       o.o_totalprice, o.o_orderdate, o.o_orderpriority, o.o_clerk, o.o_shippriority,
       o.o_comment
  FROM orders o JOIN customer c ON c.c_custkey = o.o_custkey
 WHERE o.o_orderkey > :after AND o.o_orderkey <= :max_key {filters}
 ORDER BY o.o_orderkey
 LIMIT :limit
"""


def _filters(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    clauses, binds = [], {}
    for name, column, op in (("from", "o_orderdate", ">="), ("to", "o_orderdate", "<=")):
        value = params.get(name)
        if value is not None:
            try:
                binds[name] = date.fromisoformat(value)
            except (TypeError, ValueError):
                raise ProviderFault(400, "INVALID_PARAMETER", f"{name} must be YYYY-MM-DD", f"parameters.{name}") from None
            clauses.append(f"AND o.{column} {op} :{name}")
    for name, column in (("status", "o_orderstatus"), ("priority", "o_orderpriority")):
        if params.get(name) is not None:
            binds[name] = str(params[name])
            clauses.append(f"AND o.{column} = :{name}")
    return " ".join(clauses), binds


def orders_provider(engine: Engine, *, token: str, secret: str, snapshot_ttl_seconds: int = 86400) -> ExportProvider:
    """The ORDERS provider reading ``orders`` and ``customer`` through ``engine``."""
    provider = ExportProvider(
        "ORDERS", ORDERS_COLUMNS, token=token, secret=secret, snapshot_ttl_seconds=snapshot_ttl_seconds
    )

    @provider.fetcher
    def fetch(req: BatchRequest, cursor: Any, snapshot: Any) -> Page:
        filters, binds = _filters(req.parameters)
        total = None
        with engine.connect() as conn:
            if snapshot is None:
                max_key = conn.execute(text("SELECT MAX(o_orderkey) FROM orders")).scalar() or 0
                snapshot = {"maxKey": int(max_key)}
                count_sql = "SELECT COUNT(*) FROM orders o WHERE o.o_orderkey <= :max_key " + filters
                total = int(conn.execute(text(count_sql), {"max_key": max_key, **binds}).scalar() or 0)
            stmt = text(_SELECT.format(filters=filters)).columns(
                o_orderkey=Integer, o_custkey=Integer, c_name=String, c_phone=String,
                c_mktsegment=String, o_orderstatus=String, o_totalprice=Numeric(15, 2),
                o_orderdate=Date, o_orderpriority=String, o_clerk=String,
                o_shippriority=Integer, o_comment=String,
            )
            after = int(cursor) if cursor is not None else 0
            rows = [
                dict(r)
                for r in conn.execute(
                    stmt, {"after": after, "max_key": snapshot["maxKey"], "limit": req.limit + 1, **binds}
                ).mappings()
            ]
        has_more = len(rows) > req.limit
        rows = rows[: req.limit]
        next_cursor = rows[-1]["o_orderkey"] if rows else after
        return Page(rows=rows, next_cursor=next_cursor, has_more=has_more, snapshot=snapshot, total_rows=total)

    return provider


def sample_router(engine: Engine, *, token: str, secret: str, snapshot_ttl_seconds: int = 86400) -> APIRouter:
    """A router serving every sample provider."""
    router = APIRouter()
    router.include_router(
        orders_provider(engine, token=token, secret=secret, snapshot_ttl_seconds=snapshot_ttl_seconds).router()
    )
    return router



