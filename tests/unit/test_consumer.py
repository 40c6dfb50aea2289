"""The consumer without a server: SQLite, the in-process transport, deliveries settled
exactly once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import update

from export_center import commands, repository
from export_center.attempt.context import RunContext
from export_center.consumer import ClaimBranch, Consumer
from export_center.db import make_engine
from export_center.registry import Registry
from export_center.repository.tables import TASKS
from export_center.runtime import upgrade_database
from export_center.settings import Settings
from export_center.storage.local import LocalStorage
from export_center.testing import FaultInjectingRun, MemoryTransport


@dataclass
class CountingDelivery:
    """A delivery that counts how it was settled."""

    body: bytes
    message_id: str = "m1"
    properties: dict[str, str] = field(default_factory=dict)
    delivery_attempt: int = 1
    acks: int = 0
    releases: int = 0

    def ack(self) -> None:
        self.acks += 1

    def release(self) -> None:
        self.releases += 1


class Finished(Exception):
    """Stands for the end of an attempt in these tests (no provider is running)."""


@pytest.fixture
def consumer(tmp_path: Path):
    engine = make_engine(f"sqlite:///{tmp_path / 'ec.db'}")
    upgrade_database(engine)
    settings = Settings(environment="test", mount_sample_providers=True, data_dir=tmp_path)
    context = RunContext(
        settings=settings,
        registry=Registry(),
        storage=LocalStorage(tmp_path / "files"),
        provider=None,  # type: ignore[arg-type]  # never called: the run stops first
        topic="t",
    )

    def stop_at_fetch(point: str) -> None:
        raise Finished(point)

    consumer = Consumer(
        engine,
        MemoryTransport(),
        context,
        owner="w",
        run_factory=FaultInjectingRun.with_fault(stop_at_fetch),
    )
    yield consumer
    engine.dispose()


def queued_task(engine) -> repository.Task:
    with engine.begin() as conn:
        return repository.create_task(
            conn,
            repository.NewTask(
                export_type="ORDERS",
                format="CSV",
                task_name="x",
                parameters={},
                tenant_id="t",
                app_code="PLATFORM",
                requested_by="u",
                max_attempts=3,
            ),
            topic="t",
            tag=commands.COMMAND_TAG,
            limits=repository.CreateLimits(),
        ).task


def body(task: repository.Task, version: int = 1) -> bytes:
    return commands.encode(
        event_id="e",
        task_no=task.task_no,
        export_type="ORDERS",
        dispatch_version=version,
        trace_id="x",
    ).encode()


def test_a_claimed_command_is_acknowledged_once_before_the_export_runs(consumer):
    task = queued_task(consumer.engine)
    delivery = CountingDelivery(body(task))
    assert consumer.handle_delivery(delivery) == ClaimBranch.EXECUTED
    assert (delivery.acks, delivery.releases) == (1, 0)
    with consumer.engine.connect() as conn:
        after = repository.read_task(conn, task.id)
    assert after is not None and after.attempt_count == 1  # it was claimed and ran


@pytest.mark.parametrize(
    ("setup", "branch"),
    [
        ({"status": "SUCCEEDED"}, ClaimBranch.TERMINAL),
        ({"dispatch_version": 2}, ClaimBranch.OLDER_VERSION),
    ],
)
def test_an_unclaimed_command_is_acknowledged_once_and_changes_nothing(consumer, setup, branch):
    task = queued_task(consumer.engine)
    with consumer.engine.begin() as conn:
        conn.execute(update(TASKS).where(TASKS.c.id == task.id).values(**setup))
    delivery = CountingDelivery(body(task))
    assert consumer.handle_delivery(delivery) == branch
    assert (delivery.acks, delivery.releases) == (1, 0)
    assert list(consumer.handled)[-1] == (task.task_no, branch)


@pytest.mark.parametrize(
    "raw",
    [b"\x00not json", b"[]", b'{"schemaVersion": 99}', b'{"schemaVersion": 1, "taskId": 5}'],
)
def test_a_body_this_version_cannot_read_is_released_never_acknowledged(consumer, raw):
    delivery = CountingDelivery(raw)
    assert consumer.handle_delivery(delivery) == ClaimBranch.INVALID
    assert (delivery.acks, delivery.releases) == (0, 1)


def test_recent_outcomes_stay_bounded(consumer):
    task = queued_task(consumer.engine)
    with consumer.engine.begin() as conn:
        conn.execute(update(TASKS).where(TASKS.c.id == task.id).values(status="SUCCEEDED"))
    for _ in range(1_200):
        consumer.handle_delivery(CountingDelivery(body(task)))
    assert len(consumer.handled) == 1_000


def test_a_broker_outage_is_one_warning_with_backoff_then_one_line_when_it_works(caplog):
    import logging

    from export_center.loops import ReceiveFailures

    logger = logging.getLogger("tests.receive")
    failures = ReceiveFailures("command receive", logger)
    with caplog.at_level(logging.INFO, logger="tests.receive"):
        pauses = [failures.failed(ConnectionError("connection refused\ndetails")) for _ in range(6)]
        failures.worked()
        failures.worked()
    assert pauses == [1, 2, 4, 8, 10, 10]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "command receive failed: connection refused; retrying"),
        ("INFO", "command receive works again after 0 s (6 failed tries)"),
    ]
    assert all(r.exc_info is None for r in caplog.records)  # no traceback per try
