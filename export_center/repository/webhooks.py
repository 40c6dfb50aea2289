"""A tenant's webhook endpoints: their rows, secrets and delivery history.

Every read and write names the tenant: an endpoint of another tenant is not found.
Secrets are random (``whsec_`` + 32 bytes hex); rotation keeps the previous one valid
until ``previous_secret_until`` (database clock), and the webhook channel signs with
every valid secret, the new one first.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, case, insert, literal, select, update

from export_center.db import db_now, db_now_plus
from export_center.repository.rows import _Row
from export_center.repository.tables import DELIVERY_ATTEMPTS as D
from export_center.repository.tables import NOTIFICATIONS as N
from export_center.repository.tables import WEBHOOK_ENDPOINTS as W

__all__ = [
    "WebhookEndpoint",
    "create_endpoint",
    "delete_endpoint",
    "endpoint_by_public_id",
    "endpoint_deliveries",
    "endpoint_secrets",
    "list_endpoints",
    "new_secret",
    "rotate_secret",
    "update_endpoint",
]


@dataclass(frozen=True, slots=True, eq=False)
class WebhookEndpoint(_Row):
    """One ``export_webhook_endpoint`` row."""

    id: int
    public_id: str
    tenant_id: str
    url: str
    events_json: str
    description: str | None
    secret: str
    previous_secret: str | None
    previous_secret_until: datetime | None
    enabled: bool
    created_by: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None

    @property
    def events(self) -> list[str]:
        """The event types it subscribes to."""
        return list(json.loads(self.events_json))


def new_secret() -> str:
    """A new signing secret: ``whsec_`` + 64 hex characters (256 random bits)."""
    return "whsec_" + secrets.token_hex(32)


def _live(tenant_id: str, public_id: str) -> Any:
    return and_(W.c.tenant_id == tenant_id, W.c.public_id == public_id, W.c.deleted_at.is_(None))


def create_endpoint(
    conn: Connection,
    *,
    tenant_id: str,
    url: str,
    events: Sequence[str],
    description: str | None,
    created_by: str,
) -> WebhookEndpoint:
    """Insert an enabled endpoint with a new secret and return it (secret included)."""
    public_id = "we_" + secrets.token_hex(12)
    conn.execute(
        insert(W).values(
            public_id=public_id,
            tenant_id=tenant_id,
            url=url,
            events_json=json.dumps(list(events)),
            description=description,
            secret=new_secret(),
            enabled=True,
            created_by=created_by,
            created_at=db_now(),
            updated_at=db_now(),
        )
    )
    endpoint = endpoint_by_public_id(conn, tenant_id, public_id)
    assert endpoint is not None
    return endpoint


def endpoint_by_public_id(
    conn: Connection, tenant_id: str | None, public_id: str
) -> WebhookEndpoint | None:
    """The live endpoint ``public_id`` of ``tenant_id`` (None: any tenant), or None."""
    cond = and_(W.c.public_id == public_id, W.c.deleted_at.is_(None))
    if tenant_id is not None:
        cond = and_(cond, W.c.tenant_id == tenant_id)
    row = conn.execute(select(W).where(cond)).mappings().first()
    return None if row is None else WebhookEndpoint.from_row(row)


def list_endpoints(conn: Connection, tenant_id: str) -> list[WebhookEndpoint]:
    """The tenant's live endpoints, oldest first."""
    rows = conn.execute(
        select(W).where(W.c.tenant_id == tenant_id, W.c.deleted_at.is_(None)).order_by(W.c.id)
    ).mappings()
    return [WebhookEndpoint.from_row(r) for r in rows]


def update_endpoint(
    conn: Connection, tenant_id: str, public_id: str, **changes: Any
) -> WebhookEndpoint | None:
    """Change ``url``, ``events`` (list), ``description`` or ``enabled``; None when the
    endpoint is not the tenant's."""
    values: dict[str, Any] = {"updated_at": db_now()}
    for key, value in changes.items():
        values["events_json" if key == "events" else key] = (
            json.dumps(list(value)) if key == "events" else value
        )
    done = conn.execute(update(W).where(_live(tenant_id, public_id)).values(**values)).rowcount
    return endpoint_by_public_id(conn, tenant_id, public_id) if done else None


def delete_endpoint(conn: Connection, tenant_id: str, public_id: str) -> bool:
    """Soft-delete the endpoint (its history stays); False when not the tenant's."""
    return (
        conn.execute(
            update(W)
            .where(_live(tenant_id, public_id))
            .values(deleted_at=db_now(), enabled=False, updated_at=db_now())
        ).rowcount
        == 1
    )


def rotate_secret(
    conn: Connection, tenant_id: str, public_id: str, rotation_hours: float
) -> WebhookEndpoint | None:
    """A new secret; the current one stays valid ``rotation_hours`` (database clock).

    The current secret is read and named in the UPDATE (MySQL applies ``SET`` items in
    order, so ``previous_secret = secret`` beside ``secret = new`` may copy the new one);
    a concurrent rotation makes this one touch nothing (None).
    """
    current = endpoint_by_public_id(conn, tenant_id, public_id)
    if current is None:
        return None
    done = conn.execute(
        update(W)
        .where(_live(tenant_id, public_id), W.c.secret == current.secret)
        .values(
            previous_secret=current.secret,
            previous_secret_until=db_now_plus(rotation_hours * 3600),
            secret=new_secret(),
            updated_at=db_now(),
        )
    ).rowcount
    return endpoint_by_public_id(conn, tenant_id, public_id) if done else None


def endpoint_secrets(conn: Connection, public_id: str) -> tuple[WebhookEndpoint, list[str]] | None:
    """The live, enabled endpoint and its valid secrets, newest first (the previous one
    while ``previous_secret_until`` is ahead by the database clock); None when it was
    deleted or disabled."""
    still = case((W.c.previous_secret_until > db_now(), literal(True)), else_=literal(False))
    row = (
        conn.execute(
            select(W, still.label("previous_valid")).where(
                W.c.public_id == public_id, W.c.deleted_at.is_(None), W.c.enabled == literal(True)
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    endpoint = WebhookEndpoint.from_row(row)
    keys = [endpoint.secret]
    if endpoint.previous_secret and row["previous_valid"]:
        keys.append(endpoint.previous_secret)
    return endpoint, keys


def endpoint_deliveries(
    conn: Connection, public_id: str, *, limit: int
) -> list[tuple[Any, list[Any]]]:
    """The endpoint's notification rows, newest first, each with its attempts."""
    rows = list(
        conn.execute(
            select(N)
            .where(N.c.channel == "webhook", N.c.target == public_id)
            .order_by(N.c.id.desc())
            .limit(limit)
        ).mappings()
    )
    ids = [r["id"] for r in rows]
    attempts: dict[int, list[Any]] = {i: [] for i in ids}
    if ids:
        for a in conn.execute(
            select(D).where(D.c.notification_id.in_(ids)).order_by(D.c.id)
        ).mappings():
            attempts[a["notification_id"]].append(a)
    return [(r, attempts[r["id"]]) for r in rows]
