"""A database seeded with one task in each situation an operator meets, and the
operator CLI run against it in a subprocess (the same settings as the service).

The situations: a succeeded export; a FAILED one (its provider answered 503); one whose
command was a poison message, quarantined by the dead-letter handler; one whose command
has waited ten minutes in the outbox (the publisher is not running).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import update

from export_center import repository
from export_center.db import db_now_plus
from export_center.models import ExportOutbox
from export_center.publisher import message_for_row
from export_center.transport import OutgoingMessage
from tests.support.fault_provider import FLAKY, FaultProviderServer, flaky
from tests.support.helpers import Stack, create, wait_state

ROOT = Path(__file__).resolve().parents[2]
O = ExportOutbox.__table__  # noqa: E741
SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}


def cli_env(settings: Any, **extra: str) -> dict[str, str]:
    """The environment of an operator shell on the machine of ``settings``'s service."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_CENTER_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "COLUMNS": "200",
            "EXPORT_CENTER_ENVIRONMENT": "test",
            "EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS": "true",
            "EXPORT_CENTER_DATA_DIR": str(settings.data_dir),
            "EXPORT_CENTER_DATABASE_URL": settings.resolved_database_url,
            "EXPORT_CENTER_LOAD_SAMPLE_DATA": "false",
        }
    )
    if settings.export_types_file:
        env["EXPORT_CENTER_EXPORT_TYPES_FILE"] = str(settings.export_types_file)
    env.update(extra)
    return env


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    """The last line a command wrote on stderr (its error; the first lines say where it
    reads)."""
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``export-center <args>`` in a subprocess; never raises on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-m", "export_center.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


@dataclass
class Seeded:
    """The seeded stack and the ids of its tasks."""

    stack: Stack
    faulty: FaultProviderServer
    succeeded: str
    failed: str
    quarantined: str
    quarantined_event: str
    stuck: str
    stuck_event: str

    @property
    def env(self) -> dict[str, str]:
        return cli_env(self.stack.settings)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(list(args), self.env)

    def publish(self) -> int:
        """One pass of the outbox publisher (its loop is off in the seeded stack)."""
        return self.stack.runtime.publisher.run_once()

    def placeholders(self) -> dict[str, str]:
        """What the runbook's placeholders stand for in this database."""
        return {
            "<task-id>": self.failed,
            "<failed-task-id>": self.failed,
            "<quarantined-task-id>": self.quarantined,
            "<event-id>": self.quarantined_event,
            "<queued-task-id>": self.stuck,
            "<export-type>": "FLAKY",
        }


def seed(flaky_stack: Any, faulty: FaultProviderServer) -> Seeded:
    """Build the four situations on a fresh stack (FLAKY fails its first version)."""
    stack = flaky_stack(max_attempts=1, publisher={"enabled": False})
    runtime = stack.runtime
    faulty.reset(rows=2500, fail_versions={1}, fail_at_batch=1)

    alice = stack.client("alice", perms=FLAKY)
    succeeded = create(alice, "csv", taskName="September orders", parameters=SEPTEMBER)
    succeeded = succeeded.json()["taskId"]
    bob = stack.client("bob", perms=FLAKY)
    failed = flaky(bob, taskName="September for bob").json()["taskId"]
    # The poison: carol's command is "sent" by hand and a corrupted body goes instead.
    carol = stack.client("carol", perms=FLAKY)
    quarantined = create(carol, "xlsx", taskName="Carol 九月", parameters=SEPTEMBER)
    quarantined = quarantined.json()["taskId"]
    with runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, quarantined)
        poison_row = repository.outbox_rows(conn, task.id)[0]
        conn.execute(
            update(O).where(O.c.id == poison_row.id).values(status="SENT", sent_at=db_now_plus(0))
        )
    assert runtime.publisher.run_once() == 2  # alice's and bob's commands
    good = message_for_row(poison_row)
    runtime.transport.send(
        OutgoingMessage(good.topic, good.tag, good.key, b"\x00 not json", good.properties)
    )
    assert wait_state(alice, succeeded)["state"] == "succeeded"
    assert wait_state(bob, failed)["state"] == "failed"
    assert wait_state(carol, quarantined)["state"] == "failed"
    # The stuck one: dave's command was written, and due, ten minutes ago, and no
    # publisher has sent it.
    dave = stack.client("dave", perms=FLAKY)
    stuck = create(dave, "csv", taskName="Dave waits").json()["taskId"]
    with runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, stuck)
        stuck_row = repository.outbox_rows(conn, task.id)[0]
        conn.execute(
            update(O)
            .where(O.c.id == stuck_row.id)
            .values(created_at=db_now_plus(-600), next_retry_at=db_now_plus(-600))
        )
    deadline = time.monotonic() + 30  # the dead letter's audit row commits after the task
    while time.monotonic() < deadline:
        with runtime.engine.connect() as conn:
            if repository.audit_entries(conn, event_id=poison_row.event_id):
                break
        time.sleep(0.1)
    return Seeded(
        stack=stack,
        faulty=faulty,
        succeeded=succeeded,
        failed=failed,
        quarantined=quarantined,
        quarantined_event=poison_row.event_id,
        stuck=stuck,
        stuck_event=stuck_row.event_id,
    )
