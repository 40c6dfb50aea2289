"""A fetch stream's cursors (export_center.attempt.fetching.CursorLog): a cursor that comes back,
and pages without rows that keep saying hasMore. The same rules through whole exports,
one stream and sharded, are in tests/integration/test_cases.py and test_shards.py."""

from __future__ import annotations

import pytest

from export_center.attempt.fetching import EMPTY_PAGES_IN_A_ROW, CursorLog
from export_center.errors import ProviderContractError


def test_the_bound_is_100_empty_pages() -> None:
    assert EMPTY_PAGES_IN_A_ROW == 100


def test_the_100th_empty_page_in_a_row_ends_the_stream_naming_its_cursor() -> None:
    log = CursorLog()
    for batch_no in range(1, EMPTY_PAGES_IN_A_ROW):
        log.add(f"c{batch_no}", batch_no, 0)
    with pytest.raises(ProviderContractError) as caught:
        log.add("c100", 100, 0)
    assert caught.value.message == (
        "provider broke the contract: 100 empty pages in a row said hasMore "
        "(last nextCursor 'c100')"
    )
    assert caught.value.code == "PROVIDER_CONTRACT" and caught.value.permanent


@pytest.mark.parametrize("rows", [1, 5000])
def test_a_page_with_rows_starts_the_count_again(rows: int) -> None:
    log = CursorLog()
    batch_no = 0
    for _ in range(3):  # 99 empty, then rows: three times over, never 100 in a row
        for _ in range(EMPTY_PAGES_IN_A_ROW - 1):
            batch_no += 1
            log.add(f"c{batch_no}", batch_no, 0)
        batch_no += 1
        log.add(f"c{batch_no}", batch_no, rows)
    assert batch_no == 3 * EMPTY_PAGES_IN_A_ROW


def test_pages_with_rows_are_never_counted() -> None:
    log = CursorLog()
    for batch_no in range(1, 1001):
        log.add(f"c{batch_no}", batch_no, 1)


def test_a_long_last_cursor_is_shortened() -> None:
    log = CursorLog()
    for batch_no in range(1, EMPTY_PAGES_IN_A_ROW):
        log.add(f"{batch_no}" + "x" * 300, batch_no, 0)
    with pytest.raises(ProviderContractError) as caught:
        log.add("z" * 300, 100, 0)
    assert caught.value.message.endswith(f"(last nextCursor '{'z' * 37}...')")


def test_a_repeated_cursor_is_named_as_a_loop_even_on_an_empty_page() -> None:
    log = CursorLog()
    log.add("A", 1, 0)
    log.add("B", 2, 0)
    with pytest.raises(ProviderContractError, match="nextCursor 'A' of batch 3 repeats"):
        log.add("A", 3, 0)


@pytest.mark.parametrize("cursor", [None, ""])
def test_has_more_without_a_cursor_is_refused(cursor: str | None) -> None:
    with pytest.raises(ProviderContractError, match="batch 4 says hasMore but has no nextCursor"):
        CursorLog().add(cursor, 4, 0)
