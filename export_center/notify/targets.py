"""The notification targets a create (``notify``), a schedule or a user's defaults name.

Shape (JSON, the API's ``notify`` list)::

    [{"channel": "page"},
     {"channel": "email", "to": "ops@example.com", "events": ["export.failed"]},
     {"channel": "dingtalk", "robot": "ops-group"}]

Rules:

* ``channel`` is one of :data:`CHANNELS`. Webhook endpoints are not targets: a tenant's
  endpoints receive the events they subscribe to (``/api/v1/webhook-endpoints``).
* ``page`` goes to the task's owner (no address). ``email`` goes to ``to``, or to the
  owner's address when ``to`` is omitted; the recipient's domain must be listed in
  ``notify.email_allowed_domains`` (case-insensitive, exact domain: ``example.com``
  does not admit ``mail.example.com``), and the e-mail channel must be configured
  (``notify.smtp_host``). ``feishu``, ``dingtalk`` and ``wecom`` name a robot an
  operator registered in ``notify.robots`` (``robot``), of that platform: a user never
  gives a robot URL, so a create cannot make the service call an address of its choice.
* ``events`` (optional) is a non-empty subset of :data:`EVENT_TYPES`; omitted:
  :data:`DEFAULT_EVENTS`.
* At most :data:`MAX_TARGETS` targets; the same (channel, address) twice is refused.
* An empty list means "tell nobody"; an absent list (None) means "the defaults": the
  owner's saved defaults (``PUT /api/v1/me/notification-defaults``), else one ``page``
  target.

Errors are :class:`~export_center.errors.ValidationFailed` (422) with ``field`` naming
the item (``notify[1].to``) and one of the codes ``INVALID_NOTIFY`` (shape, unknown
channel or event, duplicate), ``RECIPIENT_NOT_ALLOWED``, ``EMAIL_NOT_CONFIGURED`` and
``UNKNOWN_ROBOT``; :func:`check_owner_address` adds ``RECIPIENT_UNKNOWN``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from export_center.errors import ValidationFailed
from export_center.settings_notify import NotifySettings

__all__ = [
    "CHANNELS",
    "DEFAULT_EVENTS",
    "EVENT_TYPES",
    "MAX_TARGETS",
    "ROBOT_CHANNELS",
    "Target",
    "check_owner_address",
    "parse_targets",
    "targets_from_json",
    "targets_json",
]

#: Every event type a notification can carry.
EVENT_TYPES = (
    "export.succeeded",
    "export.failed",
    "export.cancelled",
    "export.expiring",
    "schedule.paused",
    "export.approved",  # approvals: the requester's page is always told (approval_events)
    "export.rejected",
)
#: The events a target gets when it names none.
DEFAULT_EVENTS = ("export.succeeded", "export.failed", "schedule.paused")
#: The chat robot channels (a robot of ``notify.robots`` of that kind).
ROBOT_CHANNELS = ("feishu", "dingtalk", "wecom")
#: The channels a target may name.
CHANNELS = ("page", "email", *ROBOT_CHANNELS)
#: Targets one create or schedule may name.
MAX_TARGETS = 10

# One address: a local part without spaces or a second "@", a domain of labels.
_EMAIL = re.compile(
    r"^[^@\s]{1,64}@([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)$"
)


@dataclass(frozen=True, slots=True)
class Target:
    """One notification target.

    Attributes:
        channel: one of :data:`CHANNELS`.
        to: the address: an e-mail address, a robot name; None for ``page`` (the
            owner) and for ``email`` to the owner's address.
        events: the event types it gets, in :data:`EVENT_TYPES` order.
    """

    channel: str
    to: str | None
    events: tuple[str, ...] = DEFAULT_EVENTS

    def to_json(self) -> dict[str, Any]:
        """The API shape of this target (``to`` or ``robot`` by channel)."""
        out: dict[str, Any] = {"channel": self.channel}
        if self.to is not None:
            out["robot" if self.channel in ROBOT_CHANNELS else "to"] = self.to
        out["events"] = list(self.events)
        return out


def _fail(message: str, code: str, field: str) -> ValidationFailed:
    return ValidationFailed(message, code=code, field=field)


def _events(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_EVENTS
    if not isinstance(value, list) or not value or not all(isinstance(e, str) for e in value):
        raise _fail("events must be a non-empty list of event types", "INVALID_NOTIFY", field)
    unknown = [e for e in value if e not in EVENT_TYPES]
    if unknown:
        raise _fail(
            f"unknown event {unknown[0]!r}; the events are {', '.join(EVENT_TYPES)}",
            "INVALID_NOTIFY",
            field,
        )
    return tuple(e for e in EVENT_TYPES if e in value)


def _email(value: Any, settings: NotifySettings, field: str) -> str | None:
    if not settings.smtp_host:
        raise _fail(
            "e-mail notifications are not configured on this export center",
            "EMAIL_NOT_CONFIGURED",
            field,
        )
    if value is None:
        return None
    match = _EMAIL.match(value) if isinstance(value, str) and len(value) <= 254 else None
    if match is None:
        raise _fail(f"{value!r} is not an e-mail address", "INVALID_NOTIFY", field)
    domain = match.group(1).lower()
    allowed = {d.strip().lower() for d in settings.email_allowed_domains}
    if domain not in allowed:
        raise _fail(
            f"e-mail may not go to {domain}: the allowed domains are "
            f"{', '.join(sorted(allowed)) or '(none)'}",
            "RECIPIENT_NOT_ALLOWED",
            field,
        )
    return str(value)


def _robot(channel: str, value: Any, settings: NotifySettings, field: str) -> str:
    robot = settings.robots.get(value) if isinstance(value, str) else None
    if robot is None or robot.kind != channel:
        names = sorted(n for n, r in settings.robots.items() if r.kind == channel)
        raise _fail(
            f"no {channel} robot named {value!r}; the {channel} robots are "
            f"{', '.join(names) or '(none)'}",
            "UNKNOWN_ROBOT",
            field,
        )
    return str(value)


def parse_targets(
    value: Any, settings: NotifySettings, *, field: str = "notify"
) -> tuple[Target, ...] | None:
    """Check a ``notify`` list (rules in the module docstring).

    Args:
        value: the JSON value (None: the defaults).
        settings: the ``notify`` settings (allowed domains, robots, SMTP).
        field: the field name errors start with.

    Returns:
        The targets, in the given order; None for None (the defaults).

    Raises:
        ValidationFailed: the first item at fault (codes in the module docstring).
    """
    if value is None:
        return None
    if not isinstance(value, list):
        raise _fail("notify must be a list of targets", "INVALID_NOTIFY", field)
    if len(value) > MAX_TARGETS:
        raise _fail(f"at most {MAX_TARGETS} notify targets", "INVALID_NOTIFY", field)
    out: list[Target] = []
    seen: set[tuple[str, str | None]] = set()
    for i, item in enumerate(value):
        at = f"{field}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("channel"), str):
            raise _fail("a notify target is an object with a channel", "INVALID_NOTIFY", at)
        channel = item["channel"]
        if channel not in CHANNELS:
            raise _fail(
                f"unknown channel {channel!r}; the channels are {', '.join(CHANNELS)}",
                "INVALID_NOTIFY",
                f"{at}.channel",
            )
        allowed = {"channel", "events", "robot" if channel in ROBOT_CHANNELS else "to"}
        extra = sorted(set(item) - allowed)
        if channel == "page":
            extra = sorted(set(item) - {"channel", "events"})
        if extra:
            raise _fail(f"unknown field {extra[0]!r} for a {channel} target", "INVALID_NOTIFY", at)
        if channel == "page":
            to = None
        elif channel == "email":
            to = _email(item.get("to"), settings, f"{at}.to")
        else:
            to = _robot(channel, item.get("robot"), settings, f"{at}.robot")
        key = (channel, to.lower() if to and channel == "email" else to)
        if key in seen:
            raise _fail("this target is named twice", "INVALID_NOTIFY", at)
        seen.add(key)
        out.append(Target(channel, to, _events(item.get("events"), f"{at}.events")))
    return tuple(out)


def check_owner_address(
    targets: Sequence[Target] | None,
    address: Callable[[], str | None],
    *,
    field: str = "notify",
) -> None:
    """Refuse an ``email`` target without ``to`` when the owner's address is unknown
    (``address()`` is asked only then): it would reach nobody.

    Raises:
        ValidationFailed: ``RECIPIENT_UNKNOWN`` on ``notify[i].to``.
    """
    for i, target in enumerate(targets or ()):
        if target.channel == "email" and target.to is None and not address():
            raise _fail(
                "an e-mail target without 'to' goes to your own address, which this "
                "export center does not know (your token carries no email claim); name "
                "the address in 'to'",
                "RECIPIENT_UNKNOWN",
                f"{field}[{i}].to",
            )


def targets_json(targets: Sequence[Target] | None) -> str | None:
    """The stored form of ``targets`` (canonical JSON; ``[]`` for nobody), None for the
    defaults."""
    if targets is None:
        return None
    return json.dumps([t.to_json() for t in targets], sort_keys=True, separators=(",", ":"))


def targets_from_json(text: str | None) -> tuple[Target, ...] | None:
    """The targets :func:`targets_json` stored, None for the defaults (no check: they
    were checked when stored; a robot removed from the settings since is the
    notifier's problem)."""
    if text is None:
        return None
    out = []
    for item in json.loads(text):
        channel = item["channel"]
        to = item.get("robot") if channel in ROBOT_CHANNELS else item.get("to")
        out.append(Target(channel, to, tuple(item.get("events") or DEFAULT_EVENTS)))
    return tuple(out)
