"""W3C trace context: which traceparent headers are kept, and the ids log lines carry."""

from __future__ import annotations

import io
import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context

import pytest

from export_center.ids import new_span_id, new_trace_id, trace_id_of, traceparent
from export_center.logs import JsonFormatter, log_context

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    "header",
    [
        f"00-{TRACE}-{SPAN}-01",
        f"00-{TRACE}-{SPAN}-00",  # not sampled: still the caller's trace
        f" 00-{TRACE}-{SPAN}-01\t",  # optional whitespace around the value
        f"01-{TRACE}-{SPAN}-01-future-field",  # a later version may add fields
        f"cc-{TRACE}-{SPAN}-09",
    ],
)
def test_a_valid_traceparent_gives_its_trace_id(header):
    assert trace_id_of(header) == TRACE


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        f"ff-{TRACE}-{SPAN}-01",  # version ff is forbidden
        f"00-{TRACE}-{SPAN}-01-extra",  # version 00 has exactly four fields
        f"00-{TRACE.upper()}-{SPAN}-01",  # hex must be lowercase
        f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"00-{TRACE[:-1]}-{SPAN}-01",  # short trace id
        f"00-{TRACE}-{SPAN}-1",  # short flags
        f"00_{TRACE}_{SPAN}_01",
    ],
)
def test_an_unusable_traceparent_starts_a_new_trace(header):
    assert trace_id_of(header) is None


def test_new_ids_have_the_w3c_shapes():
    spans = {new_span_id() for _ in range(1000)}
    assert len(spans) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{16}", s) and s != "0" * 16 for s in spans)
    header = traceparent(new_trace_id(), new_span_id())
    assert trace_id_of(header) == header[3:35]


def _json_lines(run) -> list[dict]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.trace")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        run(logger)
    finally:
        logger.removeHandler(handler)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_log_context_adds_ids_to_lines_in_its_block_and_in_copied_contexts():
    def run(logger: logging.Logger) -> None:
        logger.info("before")
        with log_context(taskId="exp_1", traceId=TRACE, eventId=None):
            logger.info("inside")
            logger.info("own id wins", extra={"taskId": "exp_2"})
            with ThreadPoolExecutor(1) as pool:
                pool.submit(copy_context().run, logger.info, "in a pool thread").result()
                pool.submit(logger.info, "pool without the context").result()
        logger.info("after")

    lines = {line["message"]: line for line in _json_lines(run)}
    assert "traceId" not in lines["before"] and "traceId" not in lines["after"]
    assert (lines["inside"]["taskId"], lines["inside"]["traceId"]) == ("exp_1", TRACE)
    assert "eventId" not in lines["inside"]  # None values are left out
    assert lines["own id wins"]["taskId"] == "exp_2"
    assert lines["in a pool thread"]["traceId"] == TRACE
    assert "traceId" not in lines["pool without the context"]
