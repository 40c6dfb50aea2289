"""One running stack per database for the combination tests, and their exports.

The combination tests make about a hundred small exports; starting a stack (and, on
MariaDB, migrating a fresh database) for each would cost more than the exports. So
:func:`combo_stack` is a module-scoped fixture, one stack on SQLite and one on MariaDB,
with ORDERS pages of :data:`PAGE_ROWS` rows (a day shard pages twice, so batch, part
and shard boundaries fall in different places) and checkpoints after every page (a
resumed attempt has something to resume). Tests that change the stack (the registry's
ORDERS, the shard parallelism, the attempt factory) put it back before they end.

:func:`producer_mode` is how a test asks for the single-stream producer: ORDERS always
has a ``shards`` spec in the registry, so even an export without a date range goes
through the sharded producer (one ``all`` shard); with the spec removed for the test,
the same parameters run through ``attempt.single.SingleStreamProducer``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _fresh_mariadb, sample_url
from tests.support.combos import (
    DECLARED_KEYS,
    DECLARED_TITLES,
    RANGE,
    RANGE_ROWS,
    RANGE_SHARDS,
    read_csv_table,
)
from tests.support.helpers import Stack, create, in_shard_order, wait_state
from tests.support.shard_probe import ServedRows

PAGE_ROWS = 4
"""ORDERS rows per provider page in these tests (the registry's 5,000 would give one
page per shard)."""

STACKS = ["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)]


@dataclasses.dataclass
class ComboStack:
    """The stack, its provider probe and the plain CSV baselines made so far."""

    stack: Stack
    probe: ServedRows
    dialect: str
    baselines: dict[str, list[list[str]]] = dataclasses.field(default_factory=dict)


@pytest.fixture(scope="module", params=STACKS)
def combo(
    request: pytest.FixtureRequest, sample_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComboStack]:
    """The module's stack on SQLite, then on MariaDB (import it into the test module)."""
    dialect = request.param
    started, drop = start_combo_stack(dialect, sample_dir, tmp_path_factory.mktemp(dialect))
    try:
        yield started
    finally:
        started.stack.stop()
        drop()


@pytest.fixture(params=["single", "sharded"])
def producer(request: pytest.FixtureRequest, combo: ComboStack) -> Iterator[str]:
    """``single`` or ``sharded``: ORDERS runs that way for the test (:func:`producer_mode`)."""
    with producer_mode(combo, request.param):
        yield request.param


def start_combo_stack(dialect: str, sample_dir: Path, base: Path) -> tuple[ComboStack, Any]:
    """Start the stack of ``dialect``; returns it and the function that drops its
    database (a no-op on SQLite)."""
    if dialect == "sqlite":
        url, drop = f"sqlite:///{base / 'export-center.db'}", (lambda: None)
    else:
        url, drop = _fresh_mariadb("combo")
    probes: list[ServedRows] = []

    def wrap(app: Any) -> ServedRows:
        probes.append(ServedRows(app))
        return probes[-1]

    try:
        stack = Stack.start(
            data_dir=base / "data",
            database_url=url,
            sample_database_url=sample_url(dialect, sample_dir),
            overrides={"task": {"checkpoint_every_seconds": 0.001}},
            wrap=wrap,
        )
    except BaseException:
        drop()
        raise
    registry = stack.runtime.registry
    registry.types["ORDERS"] = dataclasses.replace(registry.types["ORDERS"], batch_size=PAGE_ROWS)
    return ComboStack(stack, probes[0], dialect), drop


@contextlib.contextmanager
def producer_mode(combo: ComboStack, producer: str) -> Iterator[None]:
    """ORDERS as a single stream (``single``: its shards spec removed) or in day shards
    (``sharded``: as the registry has it) while the block runs."""
    registry = combo.stack.runtime.registry
    original = registry.types["ORDERS"]
    if producer == "single":
        registry.types["ORDERS"] = dataclasses.replace(original, shards=None)
    try:
        yield
    finally:
        registry.types["ORDERS"] = original


def run_export(
    client: httpx.Client, fmt: str, parameters: dict[str, Any], **body: Any
) -> tuple[dict[str, Any], httpx.Response]:
    """Create an export over HTTP, wait for it to succeed, download it through its
    signed link; returns the task detail and the download response."""
    answer = create(client, fmt, parameters=parameters, **body)
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"])
    assert detail["state"] == "succeeded", detail
    download = client.get(detail["downloadUrl"])
    assert download.status_code == 200, download.text
    return detail, download


def shard_ids(combo: ComboStack, task_id: str) -> set[str | None]:
    """The ``shard`` ids of the provider requests of ``task_id`` (None: no shard)."""
    return set(combo.probe.by_shard(task_id))


def order_keys(combo: ComboStack, parameters: dict[str, Any], rows: list[list[str]]) -> list[int]:
    """The order keys of full ORDERS rows (every declared column) in the order the
    export must have them: by day shard, then key; by key for a single stream."""
    day, key = DECLARED_KEYS.index("o_orderdate"), DECLARED_KEYS.index("o_orderkey")
    return in_shard_order(
        combo.stack, parameters, ((dt.date.fromisoformat(r[day]), int(r[key])) for r in rows)
    )


def baseline(combo: ComboStack, producer: str) -> list[list[str]]:
    """The plain CSV rows (every declared column, as text) of :data:`RANGE` exported with
    the defaults by ``producer`` (the mode :func:`producer_mode` has set), made once per
    stack and producer. Checks on the way that the rows come in the producer's order and
    that the provider was asked per day shard (``sharded``) or without a shard."""
    if producer in combo.baselines:
        return combo.baselines[producer]
    client = combo.stack.client()
    detail, download = run_export(client, "csv", RANGE, taskName="baseline")
    table = read_csv_table(download.content)
    assert table.head == DECLARED_TITLES
    assert len(table.rows) == RANGE_ROWS
    key = DECLARED_KEYS.index("o_orderkey")
    assert [int(row[key]) for row in table.rows] == order_keys(combo, RANGE, table.rows)
    shards = shard_ids(combo, detail["taskId"])
    if producer == "single":
        assert shards == {None} and detail["shardsTotal"] is None, (shards, detail)
    else:
        assert len(shards) == RANGE_SHARDS and None not in shards, shards
        assert detail["shardsTotal"] == RANGE_SHARDS
    combo.baselines[producer] = table.rows
    return table.rows
