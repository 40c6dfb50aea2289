"""The sample providers served by the embedded default, in one router.

Adding an export type: write its provider with the SDK, add one line here, add its
entry to the registry file. Nothing under ``export_center/`` changes
(docs/provider-guide.md).
"""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import Engine

from providers.customers import customers_provider
from providers.samples import orders_provider

__all__ = ["sample_router"]


def sample_router(
    engine: Engine, *, token: str, secret: str, snapshot_ttl_seconds: int = 86400
) -> APIRouter:
    """A router with every sample provider (ORDERS, CUSTOMERS) reading ``engine``."""
    router = APIRouter()
    for build in (orders_provider, customers_provider):
        provider = build(
            engine, token=token, secret=secret, snapshot_ttl_seconds=snapshot_ttl_seconds
        )
        router.include_router(provider.router())
    return router
