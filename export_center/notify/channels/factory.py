"""The channels the settings configure (the composition root wires them into the
notifier)."""

from __future__ import annotations

import httpx

from export_center.notify.channels.base import Channel
from export_center.notify.channels.email import EmailChannel
from export_center.notify.channels.robots import RobotChannel
from export_center.notify.targets import ROBOT_CHANNELS
from export_center.settings import Settings

__all__ = ["channels_from_settings"]


def channels_from_settings(settings: Settings, http_client: httpx.Client) -> dict[str, Channel]:
    """The e-mail and robot channels by name.

    Args:
        settings: the service settings (``settings.notify``).
        http_client: the client the robot channels post with (the caller closes it).

    Returns:
        ``{"email": ...}`` when ``notify.smtp_host`` is set, and ``feishu``,
        ``dingtalk``, ``wecom`` always (a robot target is checked at every send).
        ``page`` and ``webhook`` are not here: the notifier owns them.
    """
    notify = settings.notify
    out: dict[str, Channel] = {}
    if notify.smtp_host:
        out["email"] = EmailChannel(notify)
    for kind in ROBOT_CHANNELS:
        out[kind] = RobotChannel(kind, notify, http_client)
    return out
