"""A notifier in a child process (``python -m tests.support.notifier_child DB_URL``):
one pass with the real webhook channel, for the kill -9 test. Prints READY first."""

from __future__ import annotations

import sys

from export_center.db import make_engine
from export_center.notify.notifier import Notifier
from export_center.notify.webhooks import WebhookChannel
from tests.support.helpers import stack_settings


def main() -> None:
    settings = stack_settings(
        notify={"webhook_allowed_hosts": ["127.0.0.1"], "lease_seconds": 1},
        instance_id="child-notifier",
    )
    engine = make_engine(sys.argv[1])
    notifier = Notifier(
        engine,
        settings,
        {"webhook": WebhookChannel(engine, settings.notify)},
        owner="child-notifier",
    )
    print("READY", flush=True)
    notifier.run_once()
    notifier.drain()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
