"""The page size of one fetch stream (export_center.attempt.fetching.PageSizer): halving down to
the floor, the error at the floor, growing back up to the configured size. The same
rule over real HTTP through whole exports is in tests/integration/test_page_sizing.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from export_center.attempt.fetching import PAGE_FLOOR_ROWS, PageSizer
from export_center.errors import (
    PageTooLarge,
    ProviderContractError,
    ProviderRejected,
    ProviderUnavailable,
)
from export_center.provider_client import Batch


def page(rows: int) -> Batch:
    return Batch(None, [{}] * rows, None, False, None, None, None)


def provider(
    largest: int, cause: str = "413", asked: list[int] | None = None
) -> Callable[[int], Batch]:
    """A fetch that finds pages above ``largest`` rows too large, recording each size."""

    def call(limit: int) -> Batch:
        if asked is not None:
            asked.append(limit)
        if limit > largest:
            detail = " (PAGE_TOO_LARGE: too many)" if cause == "413" else ""
            raise PageTooLarge("too large", limit=limit, cause=cause, detail=detail)
        return page(limit)

    return call


def test_a_page_too_large_is_asked_again_with_half_the_rows_until_it_fits() -> None:
    asked: list[int] = []
    sizer = PageSizer(5000)
    assert len(sizer.fetch(provider(1000, asked=asked)).rows) == 625
    assert asked == [5000, 2500, 1250, 625]
    assert sizer.limit == 625


def test_halving_stops_at_200_rows_and_a_413_there_fails_for_good() -> None:
    asked: list[int] = []
    sizer = PageSizer(5000)
    with pytest.raises(ProviderRejected) as caught:
        sizer.fetch(provider(0, asked=asked))
    assert asked == [5000, 2500, 1250, 625, 312, PAGE_FLOOR_ROWS]
    assert caught.value.permanent and caught.value.code == "PROVIDER_REJECTED"
    assert caught.value.message == (
        "provider refused pages of 200 rows (413 Payload Too Large) after halving from "
        "5,000 (PAGE_TOO_LARGE: too many)"
    )


def test_a_batch_size_under_the_floor_is_the_floor() -> None:
    asked: list[int] = []
    with pytest.raises(ProviderRejected) as caught:
        PageSizer(50).fetch(provider(0, asked=asked))
    assert asked == [50]
    assert caught.value.message.startswith(
        "provider refused pages of 50 rows (413 Payload Too Large) (the type's batch size"
    )


def test_an_answer_over_the_cap_at_the_floor_is_a_contract_error() -> None:
    with pytest.raises(ProviderContractError) as caught:
        PageSizer(800).fetch(provider(100, cause="body"))
    assert caught.value.message == (
        "provider broke the contract: pages of 200 rows are over the 4 MB cap (too large) "
        "after halving from 800"
    )


def test_out_of_memory_at_the_floor_ends_the_attempt_transiently() -> None:
    with pytest.raises(PageTooLarge) as caught:
        PageSizer(400).fetch(provider(100, cause="memory"))
    assert not caught.value.permanent and caught.value.code == "PAGE_TOO_LARGE"
    assert caught.value.limit == 200


def test_the_size_doubles_after_four_pages_that_fit_never_above_the_configured_size() -> None:
    sizer = PageSizer(5000)
    with pytest.raises(ProviderRejected):
        sizer.fetch(provider(0))  # down to the floor
    assert sizer.limit == 200
    sizes = []
    for _ in range(24):
        sizes.append(len(sizer.fetch(provider(10_000)).rows))
    assert sizes == [200] * 4 + [400] * 4 + [800] * 4 + [1600] * 4 + [3200] * 4 + [5000] * 4
    assert sizer.limit == 5000


def test_a_page_too_large_again_starts_the_count_anew() -> None:
    sizer = PageSizer(4000)
    for _ in range(4):
        sizer.fetch(provider(1000))  # 4000 and 2000 refused, then 1000 fits 4 times
    assert sizer.limit == 2000
    for _ in range(3):
        sizer.fetch(provider(5000))  # three pages of 2000 fit
    asked: list[int] = []
    sizer.fetch(provider(1000, asked=asked))  # refused: 1000 fits, counted 1 (not 4)
    assert asked == [2000, 1000] and sizer.limit == 1000
    for _ in range(2):
        sizer.fetch(provider(5000))
    assert sizer.limit == 1000
    sizer.fetch(provider(5000))
    assert sizer.limit == 2000


def test_other_failures_pass_through_and_leave_the_size() -> None:
    sizer = PageSizer(1000)

    def call(limit: int) -> Batch:
        raise ProviderUnavailable("provider answered 503 on 3 tries")

    with pytest.raises(ProviderUnavailable):
        sizer.fetch(call)
    assert sizer.limit == 1000
