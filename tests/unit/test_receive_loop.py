"""The one receive loop of the command consumer and the dead-letter handler
(``loops.receive_loop``): a broker outage is ridden out with 1 s doubling up to 10 s and
a failed handling waits 0.5 s doubling up to 30 s (reset by a handling that works),
both on the stop event, so a stop ends every wait at once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from export_center.loops import receive_loop
from export_center.outages import Backoff


class RecordingStop(threading.Event):
    """A stop event whose waits are recorded and return at once (no sleeping)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        return self.is_set()


@dataclass
class Letter:
    """A delivery that remembers nothing; ``ok`` says how handling it ends."""

    ok: bool
    message_id: str = "m"
    body: bytes = b"{}"
    properties: dict[str, str] = field(default_factory=dict)
    delivery_attempt: int = 1

    def ack(self) -> None:
        """Nothing to settle."""

    def release(self) -> None:
        """Nothing to settle."""


def _source(script: list[object], stop: threading.Event):
    """``receive`` answering ``script`` in order (an exception is raised), then setting
    ``stop``; returns it and the timeouts it was called with."""
    steps: Iterator[object] = iter(script)
    timeouts: list[float] = []

    def receive(timeout: float) -> Letter | None:
        timeouts.append(timeout)
        step = next(steps, StopIteration)
        if step is StopIteration:
            stop.set()
            return None
        if isinstance(step, Exception):
            raise step
        assert step is None or isinstance(step, Letter)
        return step

    return receive, timeouts


def test_the_consumer_shape_backs_off_on_outages_and_never_after_a_handling():
    stop = RecordingStop()
    down = ConnectionError("refused")
    script: list[object] = [down, down, down, None, Letter(False), Letter(True), down]
    receive, timeouts = _source(script, stop)
    handled: list[bool] = []
    receive_loop(
        receive,
        lambda letter: handled.append(letter.ok),
        stop,
        what="command receive",
        logger=logging.getLogger("tests.receive"),
        timeout_seconds=0.5,
    )
    assert handled == [False, True]
    assert stop.waits == [1.0, 2.0, 4.0, 1.0]  # outages only; the count restarts
    assert set(timeouts) == {0.5} and len(timeouts) == len(script) + 1


def test_the_dead_letter_shape_waits_after_failed_handlings_and_resets():
    stop = RecordingStop()
    letters = [Letter(False), Letter(False), Letter(False), Letter(True), Letter(False)]
    receive, _ = _source([*letters, ConnectionError("refused")], stop)
    receive_loop(
        receive,
        lambda letter: "quarantined" if letter.ok else "error",
        stop,
        what="dead-letter receive",
        logger=logging.getLogger("tests.receive"),
        timeout_seconds=1.0,
        failed=lambda outcome: outcome == "error",
        pause=Backoff(0.5, 30.0),
    )
    assert stop.waits == [0.5, 1.0, 2.0, 0.5, 1.0]


def test_the_pause_after_failures_stops_doubling_at_its_ceiling():
    stop = RecordingStop()
    receive, _ = _source([Letter(False)] * 9, stop)
    receive_loop(
        receive,
        lambda letter: letter.ok,
        stop,
        what="dead-letter receive",
        logger=logging.getLogger("tests.receive"),
        timeout_seconds=1.0,
        failed=lambda ok: not ok,
        pause=Backoff(0.5, 30.0),
    )
    assert stop.waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_stopped_loop_receives_nothing_and_half_a_policy_is_refused():
    stop = RecordingStop()
    stop.set()
    receive, timeouts = _source([Letter(True)], stop)
    receive_loop(
        receive,
        lambda letter: None,
        stop,
        what="x",
        logger=logging.getLogger("t"),
        timeout_seconds=1.0,
    )
    assert timeouts == []
    with pytest.raises(ValueError, match="together"):
        receive_loop(
            receive,
            lambda letter: None,
            stop,
            what="x",
            logger=logging.getLogger("t"),
            timeout_seconds=1.0,
            failed=lambda outcome: True,
        )
