"""Every class of provider answer, over real HTTP on loopback (export_center.provider_client).

The FLAKY provider (tests/support/fault_provider.py) answers scripted statuses and headers,
drips its answer, or sends it compressed (a gzip bomb, stacked or unknown encodings);
the client is the one the pipeline uses. No database: these run once.
The same answers through a whole export are in test_failures_and_retries.py.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware

import export_center
from export_center.embedded import ServerThread, free_port
from export_center.errors import (
    FetchAborted,
    PageTooLarge,
    ProviderContractError,
    ProviderRejected,
    ProviderTooSlow,
    ProviderUnavailable,
)
from export_center.provider_client import ACCEPT_ENCODING, Batch, ProviderClient, ProviderRequest
from tests.support.fault_provider import Behaviour, FaultProviderServer, flaky_provider

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
    assert caught.value.message == "provider answered 503 on 3 tries"
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
    with pytest.raises(ProviderUnavailable, match="^provider timed out on 2 tries$"):
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
        "provider answered 503 DB_TIMEOUT on 4 tries (3 retries, after 0.01, 0.02, 0.04 s)"
    )
    assert caught.value.code == "PROVIDER_UNAVAILABLE" and not caught.value.permanent
    assert len(behaviour.requests) == 4


def test_other_503s_keep_the_usual_tries(faulty: FaultProviderServer) -> None:
    # Two DB timeouts, then plain 503s: three plain tries, as without the timeouts.
    behaviour = faulty.reset(rows=250, db_timeouts=2, always_fail=True)
    with pytest.raises(ProviderUnavailable) as caught:
        fetch(faulty, db_timeout_pauses=(0.01, 0.01, 0.01))
    assert caught.value.message == "provider answered 503 on 5 tries"
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


# --- Compressed answers: only the encodings asked for, inflated against the cap ---------

PAGE_ROWS = list(range(1, 101))


def gzip_members(body: bytes) -> bytes:
    """``body`` as two gzip members one after the other (RFC 1952 allows it)."""
    half = len(body) // 2
    return gzip.compress(body[:half]) + gzip.compress(body[half:])


def raw_deflate(body: bytes) -> bytes:
    """A deflate stream without the zlib wrapper (what some servers send as deflate)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(body) + packer.flush()


def bomb(wbits: int, megabytes: int = 128) -> bytes:
    """``megabytes`` MB of zeros, compressed (about 1,000 to 1: 128 KB for 128 MB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(1 << 20)
    return b"".join(packer.compress(block) for _ in range(megabytes)) + packer.flush()


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    gzip_bomb = bomb(16 + zlib.MAX_WBITS)
    return {
        "gzip": gzip_bomb,
        "deflate": bomb(zlib.MAX_WBITS),
        "gzip, gzip": gzip.compress(gzip_bomb, 9),  # 128 MB from less than 1 KB
    }


def encoding(coding: str, pack: Any) -> Any:
    return lambda body, _task: (pack(body), coding)


@pytest.mark.parametrize(
    ("coding", "pack"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("GZip", gzip_members),
        ("deflate", zlib.compress),
        ("deflate", raw_deflate),
        ("identity", bytes),
        ("", bytes),
    ],
    ids=["gzip", "x-gzip", "gzip-members", "deflate", "raw-deflate", "identity", "empty"],
)
def test_answers_in_the_encodings_asked_for_are_read(
    faulty: FaultProviderServer, coding: str, pack: Any
) -> None:
    behaviour = faulty.reset(rows=250, encode=encoding(coding, pack))
    batch = fetch(faulty)
    assert [row[0] for row in batch.rows] == PAGE_ROWS and batch.has_more
    assert behaviour.accept_encodings == [ACCEPT_ENCODING] == ["gzip, deflate"]


def test_an_sdk_provider_behind_a_gzip_middleware_is_read() -> None:
    """The FLAKY provider in an app with Starlette's GZipMiddleware: the answers travel
    as gzip because the client asks for it, and give the rows they give uncompressed."""
    app = FastAPI()
    app.add_middleware(GZipMiddleware, minimum_size=0)
    app.include_router(flaky_provider(Behaviour(rows=250), TOKEN).router())
    app.get("/healthz")(lambda: {"status": "ok"})
    server = ServerThread(app, "127.0.0.1", free_port())
    server.start(timeout=30)
    try:
        wire = httpx.post(
            request(server.url).url,
            headers={"X-Internal-Service-Token": TOKEN, "Accept-Encoding": ACCEPT_ENCODING},
            content=b'{"taskId":"t","tenantId":"t1","appCode":"PLATFORM","requestedBy":"a",'
            b'"dispatchVersion":1,"parameters":{},"limit":100}',
        )
        assert wire.headers["content-encoding"] == "gzip" and wire.status_code == 200
        client = ProviderClient(token=TOKEN)
        try:
            batch = client.fetch(request(server.url), cursor=None, snapshot_token=None)
        finally:
            client.close()
        assert [row[0] for row in batch.rows] == PAGE_ROWS and batch.has_more
    finally:
        server.stop()


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compression_bomb_is_a_page_too_large(
    faulty: FaultProviderServer, bombs: dict[str, bytes], coding: str
) -> None:
    behaviour = faulty.reset(rows=250, encode=lambda _body, _task: (bombs[coding], coding))
    with pytest.raises(PageTooLarge) as caught:
        fetch(faulty)
    assert (caught.value.cause, caught.value.limit, caught.value.permanent) == ("body", 100, False)
    assert caught.value.message == (
        f"answer larger than 4 MB once inflated ({coding}) for a page of 100 rows"
    )
    assert len(behaviour.requests) == 1  # not asked again at the same size


def test_a_real_page_over_4_mb_once_inflated_is_halved_like_any_other(
    faulty: FaultProviderServer,
) -> None:
    # 100 rows of 50,000 characters: 5 MB of JSON, a few KB of gzip.
    faulty.reset(rows=250, big_text=50_000, encode=encoding("gzip", gzip.compress))
    with pytest.raises(PageTooLarge) as caught:
        fetch(faulty)
    assert caught.value.message == (
        "answer larger than 4 MB once inflated (gzip) for a page of 100 rows"
    )
    assert [row[0] for row in fetch(faulty, limit=50).rows] == list(range(1, 51))


@pytest.mark.parametrize(
    ("coding", "pack"),
    [
        ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
        ("gzip,deflate", lambda b: zlib.compress(gzip.compress(b))),
        ("br", bytes),
        ("zstd", bytes),
        ("compress", bytes),
        ("x-snappy-framed", bytes),
    ],
)
def test_encodings_not_asked_for_or_stacked_break_the_contract(
    faulty: FaultProviderServer, coding: str, pack: Any
) -> None:
    behaviour = faulty.reset(rows=250, encode=encoding(coding, pack))
    with pytest.raises(ProviderContractError) as caught:
        fetch(faulty)
    if "," in coding:
        detail = (
            f"the answer's Content-Encoding '{coding}' stacks 2 encodings; one of gzip or "
            "deflate at most is read (the request said Accept-Encoding: gzip, deflate)"
        )
    else:
        detail = (
            f"the answer's Content-Encoding '{coding}' is not one the request accepts "
            "(Accept-Encoding: gzip, deflate)"
        )
    assert caught.value.message == f"provider broke the contract: {detail}"
    assert caught.value.code == "PROVIDER_CONTRACT" and caught.value.permanent
    assert len(behaviour.requests) == 1


@pytest.mark.parametrize(
    ("coding", "pack", "detail"),
    [
        ("gzip", lambda b: b"not gzip at all", "cannot be inflated"),
        ("gzip", lambda b: gzip.compress(b)[:-9], "ends before the end of its gzip stream"),
        ("gzip", lambda b: gzip.compress(b) + b"junk", "cannot be inflated"),
        ("deflate", lambda b: zlib.compress(b) + b"junk", "has bytes after the end of its"),
    ],
    ids=["not-gzip", "cut-short", "junk-after-gzip", "junk-after-deflate"],
)
def test_corrupt_compressed_answers_break_the_contract(
    faulty: FaultProviderServer, coding: str, pack: Any, detail: str
) -> None:
    faulty.reset(rows=250, encode=encoding(coding, pack))
    with pytest.raises(ProviderContractError) as caught:
        fetch(faulty)
    assert caught.value.message.startswith(f"provider broke the contract: the answer's {coding} ")
    assert detail in caught.value.message


def test_error_answers_are_inflated_too(faulty: FaultProviderServer) -> None:
    """A gzip 503 DB_TIMEOUT keeps its own schedule; a gzip 400 gives its detail."""
    behaviour = faulty.reset(rows=250, db_timeouts=1, encode=encoding("gzip", gzip.compress))
    assert len(fetch(faulty, db_timeout_pauses=(0.01,)).rows) == 100
    assert [r["status"] for r in behaviour.requests] == [503, 200]
    faulty.reset(rows=250, scripted=[(400, {})], encode=encoding("gzip", gzip.compress))
    with pytest.raises(ProviderRejected) as caught:
        fetch(faulty)
    assert caught.value.message == "provider answered 400 (SCRIPTED: scripted 400)"


@pytest.mark.parametrize("coding", ["gzip", "br", "gzip, gzip"])
def test_an_error_answer_that_cannot_be_read_keeps_its_status(
    faulty: FaultProviderServer, bombs: dict[str, bytes], coding: str
) -> None:
    """A bomb, or an encoding not read, in a 400 or a 503: the status decides, the body
    adds nothing (at most its first 64 KB inflated are read)."""

    def encode(body: bytes, _task: str) -> tuple[bytes, str]:
        if body.startswith(b'{"code":"SCRIPTED"'):  # the error answer
            return bombs["gzip"], coding
        return body, "identity"

    faulty.reset(rows=250, scripted=[(400, {})], encode=encode)
    with pytest.raises(ProviderRejected) as caught:
        fetch(faulty)
    assert caught.value.message == "provider answered 400"
    behaviour = faulty.reset(rows=250, scripted=[(503, {})], encode=encode)
    assert len(fetch(faulty).rows) == 100
    assert behaviour.accept_encodings == [ACCEPT_ENCODING] * 2  # the 503, then the page


PEAK_SCRIPT = """
import json, resource, sys
from export_center.errors import ExportFailure
from export_center.provider_client import ProviderClient, ProviderRequest

client = ProviderClient(token=sys.argv[2], retry_pause=0.01, attempts=1)

def fetch(task):
    request = ProviderRequest(
        export_type="FLAKY", url=sys.argv[1] + "/internal/exports/v1/FLAKY/batches",
        task_id=task, tenant_id="t1", app_code="PLATFORM", requested_by="alice",
        dispatch_version=1, parameters={}, limit=100, trace_id="0" * 32,
    )
    try:
        return len(client.fetch(request, cursor=None, snapshot_token=None).rows)
    except ExportFailure as exc:
        return exc.code

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB

outcomes = {"warm": [fetch("warm") for _ in range(3)]}
before = peak()
for task in sys.argv[3:]:
    outcomes[task] = [fetch(task) for _ in range(3)]
print(json.dumps({"before": before, "after": peak(), "outcomes": outcomes}))
"""


def test_the_peak_memory_of_the_caller_stays_flat_under_bombs(
    faulty: FaultProviderServer, bombs: dict[str, bytes]
) -> None:
    """A worker-like process fetches small gzip pages, then each bomb three times: its
    peak resident memory grows by less than 24 MB (a 4 MB cap and inflating steps of
    64 KB; measured: 0 MB over the warm-up), where reading through httpx's decoders
    grew it by about 70 MB for one bomb and 200 MB for the stacked one."""
    answers = {
        "gzip-bomb": (bombs["gzip"], "gzip"),
        "deflate-bomb": (bombs["deflate"], "deflate"),
        "stacked-bomb": (bombs["gzip, gzip"], "gzip, gzip"),
    }

    def encode(body: bytes, task: str) -> tuple[bytes, str]:
        return answers.get(task) or (gzip.compress(body), "gzip")

    faulty.reset(rows=250, encode=encode)
    root = Path(export_center.__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, faulty.url, TOKEN, *answers],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,  # "-c" puts the working directory first on the path
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["outcomes"] == {
        "warm": [100] * 3,
        "gzip-bomb": ["PAGE_TOO_LARGE"] * 3,
        "deflate-bomb": ["PAGE_TOO_LARGE"] * 3,
        "stacked-bomb": ["PROVIDER_CONTRACT"] * 3,
    }
    grown = report["after"] - report["before"]
    assert grown < 24 * 1024 * 1024, f"peak memory grew by {grown / 2**20:.1f} MB"
