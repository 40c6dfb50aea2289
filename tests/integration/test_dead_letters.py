"""Dead letters with the in-process transport; the RocketMQ twin of
these tests runs against the real broker in test_rocketmq_transport.py."""

from __future__ import annotations

from sqlalchemy import update

from export_center import metrics, repository
from export_center.consumer import Consumer
from export_center.dlq import DlqHandler
from export_center.models import ExportOutbox
from export_center.publisher import message_for_row
from export_center.reconciler import Reconciler
from export_center.settings import ReconcilerSettings
from export_center.storage.local import LocalStorage
from export_center.testing import MemoryTransport, Publisher
from export_center.transport import OutgoingMessage
from tests.integration.test_claims_and_loops import (  # noqa: F401 - fixture
    TOPIC,
    _NoRun,
    engine,
    new_task,
    outbox,
    set_task,
    task,
)

O = ExportOutbox.__table__  # noqa: E741


def poison_for(engine, t) -> OutgoingMessage:
    """The task's real command with a body nobody can parse (a bad deploy)."""
    row = outbox(engine, t.id)[-1]
    good = message_for_row(row)
    return OutgoingMessage(good.topic, good.tag, good.key, b"\x00not json", good.properties)


def test_poison_command_is_quarantined_and_never_loops(engine, tmp_path):
    transport = MemoryTransport(max_deliveries=3)
    t = new_task(engine)
    with engine.begin() as conn:  # the publisher sent it
        conn.execute(
            update(O).where(O.c.task_id == t.id).values(status="SENT", sent_at=repository.db_now())
        )
    consumer = Consumer(engine, transport, _NoRun(), owner="w")  # type: ignore[arg-type]
    transport.send(poison_for(engine, t))
    for _ in range(3):
        assert consumer.handle_delivery(transport.receive(1)) == "invalid"
    assert transport.receive(0.1) is None
    before = metrics.DLQ_MESSAGES._value.get()
    handler = DlqHandler(engine, transport.dead_letter_receiver())
    assert handler.handle_delivery(transport.dead_letter_receiver().receive(1)) == "quarantined"
    assert metrics.DLQ_MESSAGES._value.get() == before + 1
    fresh = task(engine, t.id)
    assert fresh.status == "FAILED" and fresh.dispatch_version == 1
    assert fresh.failure_message == "command message corrupted; create the export again"
    assert outbox(engine, t.id)[0].status == "QUARANTINED"
    # Twice the stale window later the reconciler still sends nothing: no loop.
    set_task(engine, t.id, next_retry_at=repository.db_now_plus(-3600))
    with engine.begin() as conn:
        conn.execute(
            update(O).where(O.c.task_id == t.id).values(sent_at=repository.db_now_plus(-1200))
        )
    rec = Reconciler(
        engine, LocalStorage(tmp_path), ReconcilerSettings(sent_stale_seconds=600), topic=TOPIC
    )
    assert rec.run_once() == 0
    assert Publisher(engine, transport, owner="p").run_once() == 0
    assert transport.dead_letter_receiver().receive(0.1) is None


def test_stale_and_broken_dead_letters_change_nothing(engine):
    handler = DlqHandler(engine)
    t = new_task(engine)
    row = outbox(engine, t.id)[0]
    props = {
        "eventId": row.event_id,
        "taskId": t.task_no,
        "dispatchVersion": "1",
        "schemaVersion": "1",
    }
    set_task(engine, t.id, dispatch_version=2)  # the task moved on to a new attempt
    assert handler.handle("m1", props) == "stale"
    set_task(engine, t.id, dispatch_version=1)
    assert handler.handle("m2", {**props, "eventId": "someone-else"}) == "stale"
    assert (
        handler.handle("m3", {k: v for k, v in props.items() if k != "taskId"})
        == "missing_properties"
    )
    assert handler.handle("m4", {**props, "dispatchVersion": "one"}) == "missing_properties"
    assert task(engine, t.id).status == "PENDING" and outbox(engine, t.id)[0].status == "PENDING"


def test_database_error_leaves_the_dead_letter_unacknowledged(engine, monkeypatch):
    transport = MemoryTransport(max_deliveries=1)
    t = new_task(engine)
    transport.send(poison_for(engine, t))
    transport.receive(1).release()  # one delivery, not acknowledged: dead-lettered

    def broken(*args, **kwargs):
        raise RuntimeError("database unavailable")

    monkeypatch.setattr(repository, "quarantine", broken)
    dead = transport.dead_letter_receiver()
    handler = DlqHandler(engine, dead)
    first = dead.receive(1)
    assert handler.handle_delivery(first) == "error"
    again = dead.receive(1)
    assert (
        again is not None and again.message_id == first.message_id and again.delivery_attempt == 2
    )
    monkeypatch.undo()
    assert handler.handle_delivery(again) == "quarantined"
    assert task(engine, t.id).status == "FAILED"
