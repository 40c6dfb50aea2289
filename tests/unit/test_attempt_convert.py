"""The attempt's convert step (export_center.attempt.steps.convert): a bad row is named by
the caller's row offset and batch number, never by a counter of the attempt, so a shard
and the single stream each number their own rows. The shards at once, over HTTP, are in
tests/integration/test_shard_row_numbers.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from export_center.attempt.batches import BatchConverter
from export_center.attempt.steps import convert
from export_center.columns import Column, ColumnType
from export_center.errors import PermanentExportError, ProviderContractError
from export_center.provider_client import Batch

COLUMNS = [Column("id", "id", ColumnType.INTEGER), Column("amount", "amount", ColumnType.DECIMAL)]


def _batch(rows: list[Any], *, arrays: bool = False) -> Batch:
    return Batch(
        columns=COLUMNS,
        rows=rows,
        next_cursor=None,
        has_more=False,
        total_rows=None,
        snapshot_token=None,
        schema_hash="h",
        arrays=arrays,
    )


def _rows(count: int, bad: int | None = None) -> list[dict[str, Any]]:
    """``count`` good rows, the ``bad``-th (0-based) with an ``id`` that is no integer."""
    return [{"id": "x" if i == bad else i, "amount": Decimal("1.50")} for i in range(count)]


@pytest.mark.parametrize(
    ("offset", "count", "bad", "row"),
    [
        (0, 1_000, 0, 1),  # the first row of a stream
        (0, 1_000, 999, 1_000),  # the last row of its first page
        (1_000, 1_000, 0, 1_001),  # the first row of the next page
        (4_000, 1_000, 999, 5_000),  # a later page of a shard
        (123_456, 7, 3, 123_460),  # any offset, any batch size
    ],
)
def test_a_bad_value_is_named_by_the_given_offset(
    offset: int, count: int, bad: int, row: int
) -> None:
    with pytest.raises(PermanentExportError) as caught:
        convert(_batch(_rows(count, bad)), BatchConverter(COLUMNS), offset=offset, batch_no=5)
    assert caught.value.code == "INVALID_VALUE"
    assert caught.value.message == f"row {row}, column id: not an integer: 'x'"


@pytest.mark.parametrize("arrays", [False, True])
def test_a_row_of_the_wrong_shape_is_named_by_the_given_offset(arrays: bool) -> None:
    rows: list[Any] = [[1, "1.50"], [2, "2.50"]] if arrays else [{"id": 1, "amount": "1.50"}]
    rows.append("oops")
    with pytest.raises(ProviderContractError) as caught:
        convert(_batch(rows, arrays=arrays), BatchConverter(COLUMNS), offset=2_000, batch_no=3)
    expected = f"provider broke the contract: row {2_000 + len(rows)} is "
    assert caught.value.message.startswith(expected), caught.value.message


@pytest.mark.parametrize(("batch_no", "where"), [(7, "batch 7"), (None, "the batch")])
def test_a_missing_column_names_the_given_batch(batch_no: int | None, where: str) -> None:
    rows = [{"id": i} for i in range(3)]
    with pytest.raises(ProviderContractError) as caught:
        convert(_batch(rows), BatchConverter(COLUMNS), offset=9_000, batch_no=batch_no)
    assert caught.value.message == (
        f"provider broke the contract: column 'amount' is in no row of {where}"
    )


def test_good_rows_are_converted_whatever_the_offset() -> None:
    typed = convert(_batch(_rows(3)), BatchConverter(COLUMNS), offset=10_000, batch_no=2)
    assert typed[0] == [0, 1, 2]
    assert [str(v) for v in typed[1]] == ["1.50"] * 3


def test_a_provider_may_leave_out_the_columns_that_were_not_chosen() -> None:
    # The request carried columns ["amount"]: rows without "id" are fine (empty cells,
    # projected away by the attempt); rows without the chosen "amount" still break it.
    chosen = BatchConverter(COLUMNS, required=["amount"])
    rows = [{"amount": "1.50"}, {"amount": "2.25"}]
    ids, amounts = convert(_batch(rows), chosen, offset=0, batch_no=1)
    assert list(ids) == [None, None]
    assert [Decimal(str(v)) for v in amounts] == [Decimal("1.50"), Decimal("2.25")]
    with pytest.raises(ProviderContractError) as caught:
        convert(_batch([{"id": 1}]), chosen, offset=0, batch_no=4)
    assert caught.value.message == (
        "provider broke the contract: column 'amount' is in no row of batch 4"
    )
