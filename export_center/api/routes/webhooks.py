"""``/api/v1/webhook-endpoints``: a tenant's signed webhook endpoints (permission
``platform:webhooks:manage``; every route acts in the caller's tenant only, another
tenant's endpoint is 404).

The secret is in the answer of the create and of ``rotate-secret`` only. Rotation keeps
the old secret signing (a second ``v1=``) for ``notify.webhook_rotation_hours``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.notify_schemas import (
    DeliveriesPublic,
    DeliveryAttemptPublic,
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
    WebhookPublic,
    WebhooksPublic,
    WebhookUpdate,
)
from export_center.api.openapi import AUTH, BODY, GUARD, errors
from export_center.api.present import utc
from export_center.auth import WEBHOOKS_MANAGE, Identity
from export_center.errors import Conflict, Forbidden, NotFound, ValidationFailed
from export_center.ids import new_event_id
from export_center.notify.targets import EVENT_TYPES
from export_center.notify.webhooks import check_webhook_url, webhook_url_key
from export_center.repository import notification_reads as reads
from export_center.repository import notifications as notes
from export_center.repository import webhooks as hooks

__all__ = ["TEST_EVENT", "WEBHOOKS_MANAGE", "router"]

#: The event type of ``POST .../test`` (never one of the real events).
TEST_EVENT = "webhook.test"

router = APIRouter(
    prefix="/api/v1/webhook-endpoints", tags=["webhooks"], dependencies=[Depends(strict_query)]
)

_DENIED = {403: ["PERMISSION_DENIED"]}
_MISSING = {404: ["WEBHOOK_NOT_FOUND"]}
_TWICE = {409: ["WEBHOOK_ALREADY_REGISTERED"]}
_INVALID = {
    422: [
        "INVALID_WEBHOOK_URL",
        "WEBHOOK_HTTPS_REQUIRED",
        "WEBHOOK_URL_NOT_ALLOWED",
        "INVALID_EVENTS",
        "MISSING_FIELD",
        "UNKNOWN_FIELD",
        "INVALID_TYPE",
        "TOO_LONG",
        "INVALID_VALUE",
    ]
}


def _enabled(endpoint: hooks.WebhookEndpoint) -> None:
    """Refuse to send to a switched-off endpoint.

    Raises:
        Conflict: ``WEBHOOK_DISABLED``.
    """
    if not endpoint.enabled:
        raise Conflict(
            f"{endpoint.public_id} is switched off, so nothing is sent to it; switch it on "
            'first (PATCH {"enabled": true}, or "Switch on" in the page)',
            code="WEBHOOK_DISABLED",
        )


def _not_registered(conn: Any, tenant: str, url: str, but: str | None = None) -> None:
    """Refuse a URL another live endpoint of the tenant has: each would get every event.

    Raises:
        Conflict: ``WEBHOOK_ALREADY_REGISTERED`` naming that endpoint.
    """
    key = webhook_url_key(url)
    for other in hooks.list_endpoints(conn, tenant):
        if webhook_url_key(other.url) == key and other.public_id != but:
            raise Conflict(
                f"{other.public_id} already sends to {url}; change its events instead of "
                "registering the URL twice (each endpoint would get every event)",
                code="WEBHOOK_ALREADY_REGISTERED",
                field="url",
            )


_STATUS = {
    "PENDING": "pending",
    "CLAIMED": "sending",
    "SENT": "delivered",
    "DEAD": "dead",
    "DROPPED": "dropped",
}


def _tenant(user: Identity) -> str:
    if not user.can(WEBHOOKS_MANAGE):
        raise Forbidden(
            f"managing webhook endpoints needs the {WEBHOOKS_MANAGE} permission",
            code="PERMISSION_DENIED",
        )
    return user.tenant


def _events(value: list[str]) -> list[str]:
    unknown = [e for e in value if e not in EVENT_TYPES]
    if not value or unknown:
        raise ValidationFailed(
            (f"unknown event {unknown[0]!r}; " if unknown else "name at least one event; ")
            + f"the events are {', '.join(EVENT_TYPES)}",
            code="INVALID_EVENTS",
            field="events",
        )
    return [e for e in EVENT_TYPES if e in value]


def _missing(public_id: str) -> NotFound:
    return NotFound(f"no webhook endpoint {public_id!r} in your tenant", code="WEBHOOK_NOT_FOUND")


def _public(e: hooks.WebhookEndpoint) -> dict[str, Any]:
    return {
        "id": e.public_id,
        "url": e.url,
        "events": e.events,
        "description": e.description,
        "enabled": bool(e.enabled),
        "createdBy": e.created_by,
        "createdAt": utc(e.created_at),
        "updatedAt": utc(e.updated_at),
        "previousSecretValidUntil": utc(e.previous_secret_until) if e.previous_secret else None,
    }


def _endpoint(runtime: RuntimeDep, tenant: str, public_id: str) -> hooks.WebhookEndpoint:
    with runtime.engine.connect() as conn:
        found = hooks.endpoint_by_public_id(conn, tenant, public_id)
    if found is None:
        raise _missing(public_id)
    return found


@router.post(
    "",
    status_code=201,
    response_model=WebhookCreated,
    responses=errors(BODY, AUTH, _DENIED, _INVALID, _TWICE),
)
def create_endpoint(body: WebhookCreate, user: CurrentUser, runtime: RuntimeDep) -> WebhookCreated:
    """Register an endpoint; the answer holds its secret, shown only this once."""
    tenant = _tenant(user)
    url = check_webhook_url(body.url, runtime.settings.notify)
    events = _events(body.events)
    with runtime.engine.begin() as conn:
        _not_registered(conn, tenant, url)
        made = hooks.create_endpoint(
            conn,
            tenant_id=tenant,
            url=url,
            events=events,
            description=body.description,
            created_by=user.user,
        )
    return WebhookCreated(**_public(made), secret=made.secret)


@router.get("", response_model=WebhooksPublic, responses=errors(AUTH, _DENIED))
def list_endpoints(user: CurrentUser, runtime: RuntimeDep) -> WebhooksPublic:
    """The tenant's endpoints (no secrets)."""
    tenant = _tenant(user)
    with runtime.engine.connect() as conn:
        found = hooks.list_endpoints(conn, tenant)
    return WebhooksPublic(items=[WebhookPublic(**_public(e)) for e in found])


@router.get(
    "/{endpoint_id}", response_model=WebhookPublic, responses=errors(AUTH, _DENIED, _MISSING)
)
def get_endpoint(endpoint_id: str, user: CurrentUser, runtime: RuntimeDep) -> WebhookPublic:
    """One endpoint (no secret)."""
    return WebhookPublic(**_public(_endpoint(runtime, _tenant(user), endpoint_id)))


@router.patch(
    "/{endpoint_id}",
    response_model=WebhookPublic,
    responses=errors(BODY, AUTH, _DENIED, _MISSING, _INVALID, _TWICE),
)
def update_endpoint(
    endpoint_id: str, body: WebhookUpdate, user: CurrentUser, runtime: RuntimeDep
) -> WebhookPublic:
    """Change the URL, events, description or enabled switch (``url``, ``events`` and
    ``enabled`` cannot be null: leave them out to keep them)."""
    tenant = _tenant(user)
    for name in ("url", "events", "enabled"):
        if name in body.model_fields_set and getattr(body, name) is None:
            raise ValidationFailed(
                f"{name} cannot be null; leave it out to keep it",
                code="INVALID_VALUE",
                field=name,
            )
    changes: dict[str, Any] = {}
    if body.url is not None:
        changes["url"] = check_webhook_url(body.url, runtime.settings.notify)
    if body.events is not None:
        changes["events"] = _events(body.events)
    if "description" in body.model_fields_set:
        changes["description"] = body.description
    if body.enabled is not None:
        changes["enabled"] = body.enabled
    with runtime.engine.begin() as conn:
        if "url" in changes:
            _not_registered(conn, tenant, changes["url"], but=endpoint_id)
        changed = hooks.update_endpoint(conn, tenant, endpoint_id, **changes)
    if changed is None:
        raise _missing(endpoint_id)
    return WebhookPublic(**_public(changed))


@router.delete("/{endpoint_id}", status_code=204, responses=errors(GUARD, AUTH, _DENIED, _MISSING))
def delete_endpoint(endpoint_id: str, user: CurrentUser, runtime: RuntimeDep) -> Response:
    """Delete the endpoint: nothing more is sent to it (its history stays)."""
    tenant = _tenant(user)
    with runtime.engine.begin() as conn:
        if not hooks.delete_endpoint(conn, tenant, endpoint_id):
            raise _missing(endpoint_id)
    return Response(status_code=204)


@router.post(
    "/{endpoint_id}/rotate-secret",
    response_model=WebhookCreated,
    responses=errors(GUARD, AUTH, _DENIED, _MISSING),
)
def rotate_secret(endpoint_id: str, user: CurrentUser, runtime: RuntimeDep) -> WebhookCreated:
    """A new secret (shown only here); the old one signs too for the rotation window."""
    tenant = _tenant(user)
    with runtime.engine.begin() as conn:
        rotated = hooks.rotate_secret(
            conn, tenant, endpoint_id, runtime.settings.notify.webhook_rotation_hours
        )
    if rotated is None:
        raise _missing(endpoint_id)
    return WebhookCreated(**_public(rotated), secret=rotated.secret)


@router.get(
    "/{endpoint_id}/deliveries",
    response_model=DeliveriesPublic,
    responses=errors(AUTH, _DENIED, _MISSING),
)
def deliveries(endpoint_id: str, user: CurrentUser, runtime: RuntimeDep) -> DeliveriesPublic:
    """The endpoint's last 100 deliveries, newest first, with every attempt."""
    endpoint = _endpoint(runtime, _tenant(user), endpoint_id)
    with runtime.engine.connect() as conn:
        found = hooks.endpoint_deliveries(conn, endpoint.public_id, limit=100)
    items = []
    for row, attempts in found:
        waiting = row["status"] == "PENDING"
        items.append(
            DeliveryPublic(
                id=str(row["id"]),
                eventId=row["event_id"],
                type=row["event_type"],
                status=_STATUS.get(row["status"], row["status"].lower()),
                createdAt=utc(row["created_at"]),
                deliveredAt=utc(row["sent_at"]),
                lastStatusCode=row["last_status_code"],
                lastError=row["last_error"],
                nextTryAt=utc(row["next_retry_at"]) if waiting else None,
                attempts=[
                    DeliveryAttemptPublic(
                        attempt=a["attempt_no"],
                        at=utc(a["attempted_at"]),
                        statusCode=a["status_code"],
                        error=a["error"],
                        durationMs=a["duration_ms"],
                    )
                    for a in attempts
                ],
            )
        )
    return DeliveriesPublic(items=items)


@router.post(
    "/{endpoint_id}/test",
    status_code=202,
    responses=errors(GUARD, AUTH, _DENIED, _MISSING, {409: ["WEBHOOK_DISABLED"]}),
)
def send_test(endpoint_id: str, user: CurrentUser, runtime: RuntimeDep) -> dict[str, str]:
    """Send a ``webhook.test`` event to this endpoint through the notification outbox
    (409 ``WEBHOOK_DISABLED`` for a disabled endpoint: nothing is sent to it)."""
    endpoint = _endpoint(runtime, _tenant(user), endpoint_id)
    _enabled(endpoint)
    event_id = new_event_id()
    with runtime.engine.begin() as conn:
        notes.insert_notification(
            conn,
            event_id=event_id,
            event_type=TEST_EVENT,
            tenant_id=endpoint.tenant_id,
            user_id=user.user,
            channel="webhook",
            target=endpoint.public_id,
            data={"test": True, "endpointId": endpoint.public_id},
        )
        (row,) = reads.notifications_of_event(conn, event_id)
    return {"eventId": event_id, "deliveryId": str(row.id)}


@router.post(
    "/{endpoint_id}/deliveries/{delivery_id}/redeliver",
    status_code=202,
    responses=errors(
        GUARD, AUTH, _DENIED, _MISSING, {404: ["DELIVERY_NOT_FOUND"], 409: ["WEBHOOK_DISABLED"]}
    ),
)
def redeliver(
    endpoint_id: str, delivery_id: str, user: CurrentUser, runtime: RuntimeDep
) -> dict[str, str]:
    """Send a delivered, dead or dropped event again (same event id), now (409
    ``WEBHOOK_DISABLED`` while the endpoint is switched off)."""
    endpoint = _endpoint(runtime, _tenant(user), endpoint_id)
    _enabled(endpoint)
    missing = NotFound(f"no delivery {delivery_id!r} of this endpoint", code="DELIVERY_NOT_FOUND")
    if not delivery_id.isdigit() or len(delivery_id) > 18:
        raise missing
    with runtime.engine.begin() as conn:
        row = notes.read_notification(conn, int(delivery_id))
        if row is None or row.channel != "webhook" or row.target != endpoint.public_id:
            raise missing
        again = notes.redeliver_notification(conn, row.id)
    return {"deliveryId": delivery_id, "status": "pending" if again else _STATUS[row.status]}
