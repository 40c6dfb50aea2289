"""Every class of provider answer, over real HTTP on loopback (export_center.provider_client).

The FLAKY provider (tests/fault_provider.py) answers scripted statuses and headers, or
drips its answer; the client is the one the pipeline uses. No database: these run once.
The same answers through a whole export are in test_failures_and_retries.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from export_center.embedded import free_port
from export_center.errors import (
    FetchAborted,
    PageTooLarge,
    ProviderRejected,
    ProviderTooSlow,
    ProviderUnavailable,
)
from export_center.provider_client import Batch, ProviderClient, ProviderRequest
from tests.fault_provider import FaultProviderServer

TOKEN = "internal-token-for-answer-tests-0123456789"


@pytest.fixture(scope="module")
def faulty() -> Iterator[FaultProviderServer]:
    server = FaultProviderServer(TOKEN)
    server.start()
    yield server
    server.stop()


def request(base: str) -> ProviderRequest:
    return ProviderRequest(
        export_type="FLAKY",
        url=f"{base}/internal/exports/v1/FLAKY/batches",
        task_id="exp_answers",
        tenant_id="t1",
        app_code="PLATFORM",
        requested_by="alice",
        dispatch_version=1,
        parameters={},
        limit=100,
        trace_id="0" * 32,
    )


def fetch(faulty: FaultProviderServer, **options: Any) -> Batch:
    limits = {k: options.pop(k) for k in ("time_limit", "abort", "limit") if k in options}
    client = options.pop("client_class", ProviderClient)(token=TOKEN, retry_pause=0.01, **options)
    try:
        return client.fetch(request(faulty.url), cursor=None, snapshot_token=None, **limits)
    finally:
        client.close()


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 507])
def test_transient_answers_are_tried_again(faulty: FaultProviderServer, status: int) -> None:
    behaviour = faulty.reset(rows=250, scripted=[(status, {})])
    batch = fetch(faulty)
    assert batch.arrays  # the SDK sends rows as arrays in column order; "id" is first
    assert [row[0] for row in batch.rows] == list(range(1, 101)) and batch.has_more
    assert len(behaviour.requests) == 2


def test_transient_answers_on_every_try_fail_the_batch(faulty: FaultProviderServer) -> None:
    behaviour = faulty.reset(rows=250, scripted=[(503, {})] * 3)
    with pytest.raises(ProviderUnavailable) as caught:
        fetch(faulty)
    assert caught.value.message == "provider answered 503 on 3 attempts"
    assert not caught.value.permanent and len(behaviour.requests) == 3


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        (400, "PROVIDER_REJECTED", "provider answered 400 (SCRIPTED: scripted 400)"),
        (401, "PROVIDER_REJECTED", "provider answered 401 (SCRIPTED: scripted 401)"),
        (404, "PROVIDER_REJECTED", "provider answered 404 (SCRIPTED: scripted 404)"),
        (422, "PROVIDER_REJECTED", "provider answered 422 (SCRIPTED: scripted 422)"),
        (
            410,
            "SNAPSHOT_EXPIRED",
            "provider answered 410: snapshot expired (SCRIPTED: scripted 410)",
        ),
        (501, "PROVIDER_REJECTED", "provider answered 501 (SCRIPTED: scripted 501)"),
        (505, "PROVIDER_REJECTED", "provider answered 505 (SCRIPTED: scripted 505)"),
    ],
)
def test_permanent_answers_fail_at_once(
    faulty: FaultProviderServer, status: int, code: str, message: str
) -> None:
    behaviour = faulty.reset(rows=250, scripted=[(status, {})])
    with pytest.raises(ProviderRejected) as caught:
        fetch(faulty)
    assert (caught.value.code, caught.value.message) == (code, message)
    assert caught.value.permanent and len(behaviour.requests) == 1


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_reported_and_never_followed(
    faulty: FaultProviderServer, status: int
) -> None:
    # The Location is the provider's own batch path: following it could even succeed.
    location = request(faulty.url).url
    behaviour = faulty.reset(rows=250, scripted=[(status, {"Location": location})])
    with pytest.raises(ProviderRejected) as caught:
        fetch(faulty)
    assert caught.value.code == "PROVIDER_REDIRECTED"
    assert caught.value.message == f"provider redirected ({status}) to {location}"
    assert len(behaviour.requests) == 1


def test_a_redirect_without_location(faulty: FaultProviderServer) -> None:
    faulty.reset(rows=250, scripted=[(302, {})])
    with pytest.raises(ProviderRejected, match=r"^provider redirected \(302\) without a Location$"):
        fetch(faulty)


def test_retry_after_is_honoured_between_tries(faulty: FaultProviderServer) -> None:
    behaviour = faulty.reset(rows=250, scripted=[(429, {"Retry-After": "1"})])
    assert len(fetch(faulty).rows) == 100
    first, second = (r["at"] for r in behaviour.requests)
    assert second - first >= 0.9  # the retry pause alone is 0.01 s


def test_a_retry_after_beyond_the_bound_fails_without_waiting(
    faulty: FaultProviderServer,
) -> None:
    behaviour = faulty.reset(rows=250, scripted=[(429, {"Retry-After": "31"})])
    with pytest.raises(ProviderUnavailable) as caught:
        fetch(faulty, max_retry_after=30)
    assert caught.value.message.startswith("provider answered 429 with Retry-After 31 s, longer")
    assert len(behaviour.requests) == 1


def test_timeouts_and_connection_errors_are_transient(faulty: FaultProviderServer) -> None:
    behaviour = faulty.reset(rows=250, sleep_seconds=1.0)
    with pytest.raises(ProviderUnavailable, match="^provider timed out on 2 attempts$"):
        fetch(faulty, read_timeout=0.3, attempts=2)
    assert len(behaviour.requests) == 2
    client = ProviderClient(token=TOKEN, retry_pause=0.01, attempts=2)
    nobody = request(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ProviderUnavailable, match=r"^provider connection failed \(ConnectError\)"):
        client.fetch(nobody, cursor=None, snapshot_token=None)
    client.close()


def test_a_dripping_answer_is_cut_at_the_batch_time_limit(faulty: FaultProviderServer) -> None:
    # A byte every 0.2 s for 20 s: no read timeout ever fires, the batch limit does.
    faulty.reset(rows=250, drip_at_batch=1, drip_every=0.2, drip_for=20)
    with pytest.raises(ProviderTooSlow) as caught:
        fetch(faulty, time_limit=1.0)
    assert caught.value.message == "provider answer took longer than 1 s"
    assert caught.value.code == "PROVIDER_TOO_SLOW" and not caught.value.permanent


def test_the_batch_time_limit_covers_the_tries(faulty: FaultProviderServer) -> None:
    faulty.reset(rows=250, scripted=[(503, {"Retry-After": "5"})])
    with pytest.raises(ProviderTooSlow) as caught:
        fetch(faulty, time_limit=1.0)
    assert caught.value.message == "provider answer took longer than 1 s (last try: answered 503)"


@pytest.mark.parametrize("where", ["dripping", "pausing"])
def test_abort_stops_the_fetch(faulty: FaultProviderServer, where: str) -> None:
    if where == "dripping":
        faulty.reset(rows=250, drip_at_batch=1, drip_every=0.2, drip_for=30)
    else:  # the pause before the next try (a 20 s Retry-After)
        faulty.reset(rows=250, scripted=[(503, {"Retry-After": "20"})])
    abort = threading.Event()
    threading.Timer(0.5, abort.set).start()
    started = time.monotonic()
    with pytest.raises(FetchAborted):
        fetch(faulty, abort=abort)
    assert time.monotonic() - started < 10  # not after the 20 s pause or the 30 s answer


def test_the_caller_may_ask_for_fewer_rows_than_the_request(faulty: FaultProviderServer) -> None:
    behaviour = faulty.reset(rows=250)
    batch = fetch(faulty, limit=40)
    assert [row[0] for row in batch.rows] == list(range(1, 41))
    assert [r["limit"] for r in behaviour.requests] == [40]


def test_a_413_is_a_page_too_large_at_once(faulty: FaultProviderServer) -> None:
    behaviour = faulty.reset(rows=250, refuse_above=50)
    with pytest.raises(PageTooLarge) as caught:
        fetch(faulty)
    error = caught.value
    assert (error.code, error.permanent, error.cause, error.limit) == (
        "PAGE_TOO_LARGE",
        False,
        "413",
        100,
    )
    assert error.message == (
        "provider answered 413 Payload Too Large for a page of 100 rows "
        "(PAGE_TOO_LARGE: a page of 100 rows is too large)"
    )
    assert len(behaviour.requests) == 1  # the same size is not asked again
    assert len(fetch(faulty, limit=50).rows) == 50


def test_an_answer_over_4_mb_is_a_page_too_large(faulty: FaultProviderServer) -> None:
    behaviour = faulty.reset(rows=250, big_text=50_000)  # 100 rows: about 5 MB
    with pytest.raises(PageTooLarge) as caught:
        fetch(faulty)
    assert caught.value.cause == "body" and caught.value.limit == 100
    assert caught.value.message.startswith("answer of 5,0")
    assert caught.value.message.endswith(" bytes, at most 4 MB allowed for a page of 100 rows")
    assert len(behaviour.requests) == 1
    assert len(fetch(faulty, limit=50).rows) == 50


class OutOfMemoryClient(ProviderClient):
    """Runs out of memory decoding any answer of more than 60 rows' worth of bytes."""

    def _parse(self, raw: bytes, limit: int) -> Batch:
        if limit > 60:
            raise MemoryError
        return super()._parse(raw, limit)


def test_out_of_memory_decoding_is_a_page_too_large(faulty: FaultProviderServer) -> None:
    faulty.reset(rows=250)
    with pytest.raises(PageTooLarge) as caught:
        fetch(faulty, client_class=OutOfMemoryClient)
    assert caught.value.cause == "memory" and not caught.value.permanent
    assert caught.value.message.startswith("out of memory decoding an answer of ")
    assert len(fetch(faulty, client_class=OutOfMemoryClient, limit=60).rows) == 60


def gaps(behaviour: Any) -> list[float]:
    times = [r["at"] for r in behaviour.requests]
    return [later - earlier for earlier, later in zip(times, times[1:], strict=False)]


@pytest.mark.parametrize("status", [503, 504])
def test_a_db_timeout_is_asked_again_on_its_own_schedule(
    faulty: FaultProviderServer, status: int
) -> None:
    behaviour = faulty.reset(rows=250, db_timeouts=3, db_timeout_status=status)
    # One try for other failures: the DB_TIMEOUT retries do not use it up.
    batch = fetch(faulty, attempts=1, db_timeout_pauses=(0.1, 0.4, 1.6))
    assert len(batch.rows) == 100
    assert [r["status"] for r in behaviour.requests] == [status] * 3 + [200]
    first, second, third = gaps(behaviour)
    assert 0.1 <= first < 0.4 <= second < 1.6 <= third < 3.0, (first, second, third)


def test_a_db_timeout_on_every_try_fails_the_batch_naming_it(faulty: FaultProviderServer) -> None:
    behaviour = faulty.reset(rows=250, db_timeouts=-1)
    with pytest.raises(ProviderUnavailable) as caught:
        fetch(faulty, db_timeout_pauses=(0.01, 0.02, 0.04))
    assert caught.value.message == (
        "provider answered 503 DB_TIMEOUT on 4 attempts (3 retries, after 0.01, 0.02, 0.04 s)"
    )
    assert caught.value.code == "PROVIDER_UNAVAILABLE" and not caught.value.permanent
    assert len(behaviour.requests) == 4


def test_other_503s_keep_the_usual_tries(faulty: FaultProviderServer) -> None:
    # Two DB timeouts, then plain 503s: three plain tries, as without the timeouts.
    behaviour = faulty.reset(rows=250, db_timeouts=2, always_fail=True)
    with pytest.raises(ProviderUnavailable) as caught:
        fetch(faulty, db_timeout_pauses=(0.01, 0.01, 0.01))
    assert caught.value.message == "provider answered 503 on 5 attempts"
    assert [r["status"] for r in behaviour.requests] == [503] * 5


def test_the_batch_time_limit_and_abort_cut_a_db_timeout_pause(
    faulty: FaultProviderServer,
) -> None:
    faulty.reset(rows=250, db_timeouts=-1)
    started = time.monotonic()
    with pytest.raises(ProviderTooSlow) as caught:
        fetch(faulty, time_limit=1.0, db_timeout_pauses=(20.0,))
    assert caught.value.message == (
        "provider answer took longer than 1 s (last try: answered 503 DB_TIMEOUT)"
    )
    abort = threading.Event()
    threading.Timer(0.5, abort.set).start()
    with pytest.raises(FetchAborted):
        fetch(faulty, abort=abort, db_timeout_pauses=(20.0,))
    assert time.monotonic() - started < 10
