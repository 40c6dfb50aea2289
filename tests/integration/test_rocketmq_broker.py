"""The official RocketMQ 5.x Python client against a real broker.

Runs against the local test server of ``scripts/rocketmq.sh start`` (NameServer + Proxy
in local mode with the Broker embedded), reached through the Proxy's gRPC endpoint in
``EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT`` (``scripts/rocketmq.sh endpoint``, e.g.
``127.0.0.1:8081``). Without it the tests are skipped locally and FAIL when ``CI`` is
set. They need ``rocketmq-python-client==5.1.2``.

What they pin down, with the topics and groups the script creates
(``EXPORT_CENTER_TOPIC_PREFIX``, default ``test-``):

* (a) a Producer's tag, key, user properties and body arrive unchanged at a
  ``SimpleConsumer`` of the worker group, and ``ack`` settles the message;
* (b) a message that is never acknowledged comes back after its invisible time with
  ``delivery_attempt`` 2, then 3, and after the worker group's retry limit
  (``retryMaxTimes`` 2, so 3 deliveries) lands in ``%DLQ%<worker group>``, where the
  dead-letter handler's group reads it with its user properties intact (the handler
  locates the task by them, never by the body).

The broker and its groups are shared (other runs, other developers): every run uses
its own message keys, only touches its own messages and never acknowledges someone
else's. Measured timings are printed (``pytest -s`` or ``-rP`` shows them).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytestmark = [pytest.mark.rocketmq, pytest.mark.timeout(300)]

PREFIX = os.environ.get("EXPORT_CENTER_TOPIC_PREFIX") or "test-"  # as scripts/rocketmq.sh
TOPIC = f"{PREFIX}export-center-command-v1"
WORKER_GROUP = f"{PREFIX}export-center-worker-v1"
DLQ_GROUP = f"{PREFIX}export-center-dlq-handler-v1"
DLQ_TOPIC = f"%DLQ%{WORKER_GROUP}"
TAG = "EXPORT_TASK"
WORKER_RETRY_MAX_TIMES = 2  # scripts/rocketmq.sh: updateSubGroup -r 2
MAX_DELIVERIES = WORKER_RETRY_MAX_TIMES + 1

# The proxy rejects an invisible time under 10 s (BadRequestException 40011) and clamps
# the long poll to 5..20 s. A short long poll keeps the shutdown quick: a receive still
# waiting in the proxy when its client goes away can take (and lose, for one invisible
# time) the next message of the group.
INVISIBLE_SECONDS = 10
AWAIT_SECONDS = 5


def rocketmq_endpoint() -> str:
    """The proxy endpoint from the environment, or skip (locally) / fail (CI)."""
    endpoint = os.environ.get("EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT")
    if not endpoint:
        if os.environ.get("CI"):
            pytest.fail(
                "EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT is not set: RocketMQ tests must run in CI"
            )
        pytest.skip("EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT is not set (scripts/rocketmq.sh start)")
    return endpoint


def rocketmq_client() -> Any:
    """The ``rocketmq`` package of rocketmq-python-client, or skip (locally) / fail (CI)."""
    try:
        import rocketmq
    except ImportError as exc:
        message = (
            f"rocketmq-python-client is not installed ({exc}): "
            "pip install rocketmq-python-client==5.1.2"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return rocketmq


@dataclass
class Client:
    """One test's clients; everything started here is shut down by the fixture."""

    rmq: Any
    endpoint: str
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    started: list[Any] = field(default_factory=list)

    def config(self) -> Any:
        return self.rmq.ClientConfiguration(
            self.endpoint, self.rmq.Credentials(), request_timeout=5
        )

    def producer(self) -> Any:
        producer = self.rmq.Producer(self.config(), (TOPIC,))
        producer.startup()
        self.started.append(producer)
        return producer

    def consumer(self, group: str, topic: str, tag: str) -> Any:
        # Keyword arguments: 5.1.2 inserted a parameter before tls_enable.
        consumer = self.rmq.SimpleConsumer(
            self.config(),
            group,
            {topic: self.rmq.FilterExpression(tag)},
            await_duration=AWAIT_SECONDS,
        )
        consumer.startup()
        self.started.append(consumer)
        return consumer

    def command(self, case: str) -> tuple[Any, str, dict[str, str], bytes]:
        """A command message as the publisher builds it: key, tag, properties."""
        key = f"rmq-it-{self.run_id}-{case}"
        properties = {
            "eventId": str(uuid.uuid4()),
            "taskId": f"task-{self.run_id}-{case}",
            "dispatchVersion": "1",
            "schemaVersion": "1",
        }
        body = json.dumps({**properties, "exportType": "ORDERS", "case": case}).encode()
        message = self.rmq.Message()
        message.topic = TOPIC
        message.body = body
        message.tag = TAG
        message.keys = key  # the setter ADDS one key per assignment (a list raises)
        for name, value in properties.items():
            message.add_property(name, value)
        return message, key, properties, body


@pytest.fixture
def client() -> Iterator[Client]:
    endpoint = rocketmq_endpoint()
    c = Client(rocketmq_client(), endpoint)
    try:
        yield c
    finally:
        for started in reversed(c.started):
            with contextlib.suppress(Exception):
                started.shutdown()


def test_send_receive_ack_keeps_tag_key_properties_and_body(client: Client) -> None:
    producer = client.producer()
    consumer = client.consumer(WORKER_GROUP, TOPIC, TAG)
    message, key, properties, body = client.command("roundtrip")

    t0 = time.monotonic()
    receipt = producer.send(message)
    sent_at = time.monotonic()
    assert receipt.message_id

    got = None
    deadline = sent_at + 60
    while got is None and time.monotonic() < deadline:
        for m in consumer.receive(16, 15):
            if key in m.keys:
                got = m
            # Someone else's message is left alone: it comes back after 15 s.
    received_at = time.monotonic()
    assert got is not None, f"message {key} not received within 60 s"

    assert got.message_id == receipt.message_id
    assert got.topic == TOPIC
    assert got.tag == TAG
    assert got.keys == {key}
    assert got.properties == properties
    assert got.body == body
    # 1 normally; 2 only when a receive left waiting by a killed client took the first
    # delivery (it stays invisible for that receive's invisible time, > 15 s here).
    assert got.delivery_attempt in (1, 2)
    consumer.ack(got)
    print(
        f"\nsend {1000 * (sent_at - t0):.0f} ms, send->receive {received_at - sent_at:.2f} s, "
        f"delivery_attempt {got.delivery_attempt}, message_id {got.message_id}"
    )

    # Acked: the message does not come back after its invisible time (15 s).
    redelivered = []
    deadline = time.monotonic() + 15 + 2 * AWAIT_SECONDS
    while time.monotonic() < deadline:
        redelivered += [m for m in consumer.receive(16, 10) if key in m.keys]
    assert not redelivered, f"acked message delivered again: {redelivered}"


def test_unacked_message_is_redelivered_then_dead_lettered_with_its_properties(
    client: Client,
) -> None:
    producer = client.producer()
    worker = client.consumer(WORKER_GROUP, TOPIC, TAG)
    dlq = client.consumer(DLQ_GROUP, DLQ_TOPIC, "*")
    message, key, properties, body = client.command("poison")

    deliveries: list[tuple[int, float, str]] = []  # (delivery_attempt, seconds after send, id)
    dead: list[tuple[Any, float]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    # One thread per consumer (each client is used by one thread only), so the timings
    # are not rounded up to the other consumer's long poll.
    def worker_loop() -> None:
        try:
            while not done.is_set():
                for m in worker.receive(16, INVISIBLE_SECONDS):
                    if key in m.keys:  # never acked: the poison message
                        seen = time.monotonic() - sent_at
                        deliveries.append((m.delivery_attempt, seen, m.message_id))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def dlq_loop() -> None:
        try:
            while not done.is_set():
                for m in dlq.receive(16, 30):
                    if key in m.keys:
                        dlq.ack(m)
                        dead.append((m, time.monotonic() - sent_at))
                        done.set()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            done.set()

    receipt = producer.send(message)
    sent_at = time.monotonic()
    threads = [
        threading.Thread(target=worker_loop, daemon=True),
        threading.Thread(target=dlq_loop, daemon=True),
    ]
    for t in threads:
        t.start()
    done.wait(180)
    done.set()
    for t in threads:  # no receive may still wait in the proxy when the clients shut down
        t.join(AWAIT_SECONDS + 15)

    assert not errors, errors
    timeline = ", ".join(f"attempt {a} at +{s:.1f}s" for a, s, _ in deliveries)
    assert dead, f"{key} not in {DLQ_TOPIC} within 180 s; deliveries: {timeline or 'none'}"
    dead_message, dead_after = dead[0]
    print(
        f"\ninvisible {INVISIBLE_SECONDS}s, long poll {AWAIT_SECONDS}s: {timeline}; "
        f"in {DLQ_TOPIC} at +{dead_after:.1f}s "
        f"(delivery_attempt there {dead_message.delivery_attempt})"
    )

    # Redelivery: attempts 1, 2, 3 (the first may have gone to a receive left waiting by
    # a killed client), each one only after the previous invisible time ran out.
    attempts = [a for a, _, _ in deliveries]
    assert attempts in ([1, 2, 3], [2, 3]), timeline
    assert {i for _, _, i in deliveries} == {receipt.message_id}
    gaps = [b - a for (_, a, _), (_, b, _) in zip(deliveries, deliveries[1:], strict=False)]
    slowest = INVISIBLE_SECONDS + 2 * AWAIT_SECONDS + 10
    assert all(INVISIBLE_SECONDS - 1 <= g <= slowest for g in gaps), timeline
    assert dead_after >= deliveries[-1][1] + INVISIBLE_SECONDS - 1, timeline

    # Dead-lettered: same message, user properties intact (what the DLQ handler needs).
    assert dead_message.topic == DLQ_TOPIC
    assert dead_message.message_id == receipt.message_id
    assert dead_message.properties == properties
    assert dead_message.keys == {key}
    assert dead_message.tag == TAG
    assert dead_message.body == body
    assert dead_message.delivery_attempt >= MAX_DELIVERIES
