"""``GET /api/v1/me``: who the bearer token says the caller is; and
``/api/v1/me/notification-defaults``: the targets the caller's exports and schedules use
when they name no ``notify``."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends

from export_center.api.deps import CurrentUser, RuntimeDep, strict_query
from export_center.api.file_spec import checked_notify
from export_center.api.notify_schemas import (
    NotifyDefaultsBody,
    NotifyDefaultsPublic,
    RobotChoice,
)
from export_center.api.openapi import AUTH, GUARD, errors
from export_center.api.schemas import MePublic
from export_center.auth import ADMIN, DOWNLOAD_ALL, Identity
from export_center.notify.targets import (
    EVENT_TYPES,
    Target,
    targets_json,
)
from export_center.repository import inbox
from export_center.runtime import Runtime

__all__ = ["router"]

router = APIRouter(tags=["exports"], dependencies=[Depends(strict_query)])


@router.get("/api/v1/me", response_model=MePublic, responses=errors(AUTH))
def me(user: CurrentUser) -> MePublic:
    """Who the bearer token says the caller is, and what it may do."""
    return MePublic(
        user=user.user,
        tenant=user.tenant,
        app=user.app_code,
        permissions=sorted(user.permissions),
        seesAllOwners=user.can(DOWNLOAD_ALL),
        isAdmin=user.can(ADMIN),
        expiresAt=user.expires_at,
    )


def _defaults(runtime: Runtime, user: Identity) -> NotifyDefaultsPublic:
    with runtime.engine.connect() as conn:
        known = inbox.reachable(conn, user.tenant, user.user)
    saved = None if known.notify_defaults_json is None else json.loads(known.notify_defaults_json)
    notify = runtime.settings.notify
    return NotifyDefaultsPublic(
        notify=saved,
        effective=[Target("page", None).to_json()] if saved is None else saved,
        email=user.email or known.email,
        emailConfigured=bool(notify.smtp_host),
        emailDomains=sorted({d.strip().lower() for d in notify.email_allowed_domains}),
        robots=[RobotChoice(name=n, channel=r.kind) for n, r in sorted(notify.robots.items())],
        events=list(EVENT_TYPES),
    )


@router.get(
    "/api/v1/me/notification-defaults",
    response_model=NotifyDefaultsPublic,
    responses=errors(AUTH),
    tags=["notifications"],
)
def get_notification_defaults(user: CurrentUser, runtime: RuntimeDep) -> NotifyDefaultsPublic:
    """The caller's saved notification defaults, what applies now, and the choices
    (e-mail, robots, events)."""
    return _defaults(runtime, user)


@router.put(
    "/api/v1/me/notification-defaults",
    response_model=NotifyDefaultsPublic,
    responses=errors(
        GUARD,
        AUTH,
        {
            422: [
                "INVALID_NOTIFY",
                "RECIPIENT_NOT_ALLOWED",
                "EMAIL_NOT_CONFIGURED",
                "UNKNOWN_ROBOT",
                "RECIPIENT_UNKNOWN",
            ]
        },
    ),
    tags=["notifications"],
)
def put_notification_defaults(
    body: NotifyDefaultsBody, user: CurrentUser, runtime: RuntimeDep
) -> NotifyDefaultsPublic:
    """Save the caller's defaults: the targets of every later export and schedule of
    theirs that names no ``notify`` (checked as a create's ``notify``; ``[]`` tells
    nobody; null forgets them). An export that names no ``notify`` reads the defaults
    when it ends, so one running now follows the new ones."""
    targets = checked_notify(runtime, user, body.notify)
    with runtime.engine.begin() as conn:
        inbox.save_notify_defaults(conn, user, targets_json(targets))
    return _defaults(runtime, user)
