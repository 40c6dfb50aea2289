"""Pages too large and database timeouts through whole exports, over real HTTP.

The FLAKY provider (tests/support/fault_provider.py) refuses pages above a size with 413
(``ProviderFault.page_too_large``), sends answers over the 4 MB cap, or answers 503
``DB_TIMEOUT`` (``ProviderFault.db_timeout``); the stack pages through it as it would
through a business service (docs/provider-guide.md, section 3).
"""

from __future__ import annotations

from decimal import Decimal

from tests.support.fault_provider import FLAKY, flaky
from tests.support.helpers import download, read_csv, wait_state

SHORT_SCHEDULE = [0.1, 0.4, 1.6]
#: How much longer than its pause a measured wait may be (a busy CI machine).
SLACK = 1.5


def expected_rows(count: int, note: str | None = None) -> list[list[str]]:
    return [
        [str(i), format(Decimal(i) / 100, "f"), note if note is not None else f"row {i}"]
        for i in range(1, count + 1)
    ]


def exported(stack, client, behaviour_rows: int) -> tuple[dict, list[list[str]]]:
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=90)
    assert detail["state"] == "succeeded", detail
    rows = read_csv(download(client, detail))
    assert rows[0] == ["Id", "Amount", "Note"] and len(rows) == behaviour_rows + 1
    return detail, rows[1:]


def test_pages_the_provider_refuses_are_halved_until_they_fit(flaky_stack, faulty):
    stack = flaky_stack(batch_size=4000)
    behaviour = faulty.reset(rows=9000, refuse_above=1000)
    client = stack.client(perms=FLAKY)
    detail, rows = exported(stack, client, 9000)
    assert detail["attempts"] == 1
    assert rows == expected_rows(9000)
    answered = [r["limit"] for r in behaviour.requests if r["status"] == 200]
    refused = [r["limit"] for r in behaviour.requests if r["status"] == 413]
    assert answered == [1000] * 9  # every page at most 1,000 rows
    # 4,000 and 2,000 refused; after 4 pages that fit, 2,000 is tried again and refused.
    assert refused == [4000, 2000, 2000, 2000]


def test_a_413_at_200_rows_fails_the_export_naming_the_limit(flaky_stack, faulty):
    stack = flaky_stack(batch_size=5000)
    behaviour = faulty.reset(rows=9000, refuse_above=0)
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    assert detail["state"] == "failed" and detail["attempts"] == 1, detail
    assert detail["error"]["code"] == "PROVIDER_REJECTED"
    assert detail["error"]["message"] == (
        "fetch: batch 1: provider refused pages of 200 rows (413 Payload Too Large) after "
        "halving from 5,000 (PAGE_TOO_LARGE: a page of 200 rows is too large)"
    )
    assert [r["limit"] for r in behaviour.requests] == [5000, 2500, 1250, 625, 312, 200]
    assert list(stack.runtime.storage.list()) == []


def test_an_answer_over_4_mb_is_asked_again_with_half_the_rows(flaky_stack, faulty):
    stack = flaky_stack(batch_size=1000)
    # 5,000 characters a row: 1,000 rows are about 5 MB, 500 rows about 2.5 MB.
    behaviour = faulty.reset(rows=3000, big_text=5000)
    client = stack.client(perms=FLAKY)
    detail, rows = exported(stack, client, 3000)
    assert detail["attempts"] == 1
    assert rows == expected_rows(3000, "x" * 5000)
    # The provider answered every request; the export center refused the answers of
    # 1,000 rows, and asked for 1,000 again after 4 pages of 500.
    assert [r["limit"] for r in behaviour.requests] == [1000] + [500] * 4 + [1000] + [500] * 2


def test_the_page_size_grows_back_to_the_batch_size(flaky_stack, faulty):
    stack = flaky_stack(batch_size=4000)
    behaviour = faulty.reset(rows=20_000, refuse_above=1000, refuse_times=2)
    client = stack.client(perms=FLAKY)
    _, rows = exported(stack, client, 20_000)
    assert rows == expected_rows(20_000)
    assert [(r["limit"], r["status"]) for r in behaviour.requests] == [
        (4000, 413),
        (2000, 413),
        *[(1000, 200)] * 4,
        *[(2000, 200)] * 4,
        (4000, 200),
        (4000, 200),
    ]


def test_a_db_timeout_twice_then_ok_succeeds_after_the_pauses(flaky_stack, faulty):
    stack = flaky_stack(provider={"db_timeout_retry_seconds": SHORT_SCHEDULE})
    behaviour = faulty.reset(rows=2500, db_timeouts=2, db_timeout_at_batch=2)
    client = stack.client(perms=FLAKY)
    detail, rows = exported(stack, client, 2500)
    assert detail["attempts"] == 1
    assert rows == expected_rows(2500)
    second = [r for r in behaviour.requests if r["batch"] == 2]
    assert [r["status"] for r in second] == [503, 503, 200]
    first_gap, second_gap = (b["at"] - a["at"] for a, b in zip(second, second[1:], strict=False))
    # Each wait is at least its pause; the slack above it is for a loaded machine (the
    # pauses themselves are in the error message of the test below).
    assert 0.1 <= first_gap < 0.1 + SLACK and 0.4 <= second_gap < 0.4 + SLACK, (
        first_gap,
        second_gap,
    )


def test_a_db_timeout_every_time_ends_each_attempt_transiently(flaky_stack, faulty):
    stack = flaky_stack(max_attempts=2, provider={"db_timeout_retry_seconds": SHORT_SCHEDULE})
    behaviour = faulty.reset(rows=2500, db_timeouts=-1, db_timeout_at_batch=2)
    client = stack.client(perms=FLAKY)
    detail = wait_state(client, flaky(client).json()["taskId"], timeout=60)
    # The first attempt's failure was transient: a second attempt followed.
    assert detail["state"] == "failed" and detail["attempts"] == 2, detail
    assert detail["error"]["code"] == "PROVIDER_UNAVAILABLE"
    assert detail["error"]["message"].startswith("fetch: batch 2 (cursor "), detail["error"]
    assert detail["error"]["message"].endswith(
        ": provider answered 503 DB_TIMEOUT on 4 tries (3 retries, after 0.1, 0.4, 1.6 s)"
    )
    for version in (1, 2):
        tries = [r for r in behaviour.requests if r["version"] == version and r["batch"] == 2]
        assert [r["status"] for r in tries] == [503] * 4
        gaps = [b["at"] - a["at"] for a, b in zip(tries, tries[1:], strict=False)]
        assert all(
            pause <= gap < pause + SLACK for pause, gap in zip((0.1, 0.4, 1.6), gaps, strict=True)
        ), gaps
