"""A bad value in a sharded export is named by its own shard's row and page, on SQLite and
MariaDB, over real HTTP (the DAY_EVENTS provider of tests/support/cases_provider.py, one shard per
day, pages of 1,000 rows, shards running at once).

Each shard's thread counts its own rows: the row offset is an argument of the attempt's
convert step, never a counter of the attempt that shard threads set in turn. To make a
shared counter show, both shards convert their bad page at the same moment (a barrier
in the convert step, through the attempt's documented seam, that both enter before either
converts and neither leaves before both converted): a counter that each shard sets
before converting and restores after would hold the later shard's value in both
messages.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from export_center.errors import ExportFailure
from export_center.testing import FaultInjectingAttempt, FaultInjectingRun
from tests.support.cases_provider import CASES_TOKEN, CasesServer, cases_registry
from tests.support.helpers import Stack, create, wait_state

DAYS = ("2024-05-01", "2024-05-02")
PER_DAY = 6_000
"""Events per day (one every 14 s): six pages of 1,000 rows per shard."""


def _events(cases: CasesServer) -> None:
    """Ids ``day * PER_DAY + i``: row ``i + 1`` of day ``day``'s shard."""
    rows = []
    for day, text in enumerate(DAYS):
        start = dt.datetime.fromisoformat(text)
        for i in range(PER_DAY):
            stamp = start + dt.timedelta(seconds=14 * i)
            rows.append((day * PER_DAY + i, stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")))
    # One transaction: the provider's connection commits each statement otherwise.
    cases.db.execute("BEGIN")
    cases.db.executemany("INSERT INTO events VALUES (?, ?)", rows)
    cases.db.execute("COMMIT")


def _meeting_run(seen: list[tuple[str, str]]) -> type[FaultInjectingRun]:
    """A run whose convert step holds both shards' bad pages together (both enter
    before either converts, neither leaves before both converted) and records ``(day,
    message)`` of each conversion that failed."""
    meeting = threading.Barrier(len(DAYS), timeout=60)

    class MeetAtBadPages(FaultInjectingAttempt):
        def convert(self, batch: Any, converter: Any, *, offset: int, batch_no: int | None) -> Any:
            ids = [row[0] if batch.arrays else row["id"] for row in batch.rows]
            if not any(isinstance(value, str) for value in ids):
                return super().convert(batch, converter, offset=offset, batch_no=batch_no)
            meeting.wait()  # both shards are in convert with their bad page
            try:
                return super().convert(batch, converter, offset=offset, batch_no=batch_no)
            except ExportFailure as exc:
                first = batch.rows[0]
                stamp = first[1] if batch.arrays else first["created_at"]
                seen.append((stamp[:10], exc.message))
                raise
            finally:
                meeting.wait()  # neither leaves convert before both converted

    class MeetingRun(FaultInjectingRun):
        steps = MeetAtBadPages

    return MeetingRun


@pytest.mark.parametrize(
    "bad_rows",
    [(1_000, 5_000), (5_000, 1_000), (1, 1_001), (1_001, 1)],
    ids=["1000-5000", "5000-1000", "1-1001", "1001-1"],
)
def test_each_shard_names_its_own_row_when_two_fail_at_once(
    make_stack: Callable[..., Stack], cases: CasesServer, tmp_path: Path, bad_rows: tuple[int, int]
) -> None:
    """Two day shards at once, a value that is no integer in each (row ``bad_rows[k]``
    of shard ``k``, the last row of a page or the first): each conversion's message
    names its own shard's row, and the task's message names the shard that failed
    first, its page and that shard's row."""
    _events(cases)
    stack = make_stack(
        export_types_file=str(cases_registry(tmp_path, cases.url)),
        provider={"internal_token": CASES_TOKEN},
    )
    seen: list[tuple[str, str]] = []
    stack.runtime.consumer.run_factory = _meeting_run(seen)
    client = stack.client(perms=["export:cases:create"])
    bad_ids = [day * PER_DAY + row - 1 for day, row in enumerate(bad_rows)]
    params = {"from": DAYS[0], "to": DAYS[-1], "badIds": ",".join(map(str, bad_ids))}
    answer = create(client, "csv", exportType="DAY_EVENTS", timeZone="UTC", parameters=params)
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"], timeout=120)
    assert detail["state"] == "failed", detail
    expected = {
        day: f"row {row}, column id: not an integer"
        for day, row in zip(DAYS, bad_rows, strict=True)
    }
    assert sorted(day for day, _ in seen) == sorted(DAYS), seen
    for day, message in seen:
        assert message.startswith(expected[day] + ": "), (day, message, seen)
        assert f"bad-{bad_ids[DAYS.index(day)]}" in message, (day, message)
    error = detail["error"]
    assert error["code"] == "INVALID_VALUE", error
    pattern = r"fetch: shard (\S+), page (\d+)(?: \(cursor .*?\))?: (row \d+, column id: .*)$"
    named = re.match(pattern, error["message"])
    assert named is not None, error["message"]
    day, page, message = named.group(1), int(named.group(2)), named.group(3)
    row = bad_rows[DAYS.index(day)]
    assert page == (row - 1) // 1_000 + 1, error["message"]
    assert message.startswith(expected[day] + ": "), error["message"]
