"""What every notification channel must do (the Channel protocol of
export_center/notify/channels/base.py), checked against a real receiver."""

from __future__ import annotations

from collections.abc import Callable

from export_center.notify.channels.base import Channel, Outcome
from export_center.notify.targets import CHANNELS
from tests.support.notify_messages import failed, succeeded


def check_channel(
    channel: Channel, target: str, unknown_target: str, received: Callable[[], int]
) -> None:
    """Run the conformance checks.

    Args:
        channel: the channel under test, configured for a live receiver.
        target: a target the receiver accepts.
        unknown_target: a target the channel must refuse for good (not configured).
        received: how many messages the receiver has accepted so far.
    """
    assert channel.name in CHANNELS or channel.name == "webhook"
    before = received()
    first = channel.send(target, succeeded("zh"))
    assert isinstance(first, Outcome) and first.delivered and first.error is None
    assert received() == before + 1
    # The channel neither deduplicates nor retries: a second send is a second delivery
    # (the notifier's at-least-once redelivery), a failed event is delivered as well.
    assert channel.send(target, succeeded("zh")).delivered
    assert channel.send(target, failed("en")).delivered
    assert received() == before + 3
    refused = channel.send(unknown_target, succeeded())
    assert isinstance(refused, Outcome) and not refused.delivered
    assert refused.retry is False and refused.error
    assert received() == before + 3
