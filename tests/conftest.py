"""Shared fixtures: databases (SQLite and MariaDB), the TPC-H sample, a running stack.

Every integration test that takes ``db_url`` runs twice: on a fresh SQLite file and
on a fresh MariaDB database. Without ``EXPORT_CENTER_TEST_MARIADB_URL`` the MariaDB
half is skipped locally but FAILS when ``CI`` is set (a missing service must never
pass silently).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.support.cases_provider import CASES_TOKEN, CasesServer
from tests.support.fault_provider import FAULT_TOKEN, FaultProviderServer, registry_file
from tests.support.helpers import Stack
from tests.support.operator_seed import Seeded, seed

SAMPLE_SCALE = 0.01  # 15,000 orders, 1,500 customers


def mariadb_base_url() -> str:
    """The MariaDB URL from the environment, or skip (locally) / fail (CI)."""
    url = os.environ.get("EXPORT_CENTER_TEST_MARIADB_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("EXPORT_CENTER_TEST_MARIADB_URL is not set: MariaDB tests must run in CI")
        pytest.skip("EXPORT_CENTER_TEST_MARIADB_URL is not set (run scripts/test.sh)")
    return url


def _fresh_mariadb(prefix: str, collation: str | None = None) -> tuple[str, Callable[[], None]]:
    """A new empty MariaDB database (``utf8mb4``, the server's default collation unless
    ``collation`` is given) and the function that drops it."""
    base = make_url(mariadb_base_url())
    name = f"export_center_{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base)
    collate = f" COLLATE {collation}" if collation else ""
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4{collate}"))
    admin.dispose()

    def drop() -> None:
        eng = create_engine(base)
        with eng.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        eng.dispose()

    return base.set(database=name).render_as_string(hide_password=False), drop


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of each dialect (migrations not yet run)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'export-center.db'}"
        return
    url, drop = _fresh_mariadb("t")
    try:
        yield url
    finally:
        drop()


@pytest.fixture
def mariadb_db_url() -> Iterator[str]:
    """A fresh, empty MariaDB database (for the tests that only make sense there)."""
    url, drop = _fresh_mariadb("m")
    try:
        yield url
    finally:
        drop()


@pytest.fixture
def dialect(db_url: str) -> str:
    """``sqlite`` or ``mariadb`` for the current ``db_url``."""
    return "sqlite" if db_url.startswith("sqlite") else "mariadb"


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding the generated TPC-H CSV files of the test scale."""
    data = Path(os.environ.get("EXPORT_CENTER_TEST_SAMPLE_DIR", tmp_path_factory.mktemp("tpch")))
    return data


_SAMPLES: dict[tuple[str, float], str] = {}


def sample_url(dialect: str, sample_dir: Path, scale: float = SAMPLE_SCALE) -> str:
    """A database with the TPC-H sample of ``scale`` loaded, one per dialect and scale."""
    if (dialect, scale) in _SAMPLES:
        return _SAMPLES[dialect, scale]
    from export_center.db import make_engine
    from providers import tpch

    suffix = str(scale).replace(".", "_")
    if dialect == "sqlite":
        url = f"sqlite:///{sample_dir / f'sample-{suffix}.db'}"
    else:
        # One sample database per concurrent pytest process of scripts/test.sh (its
        # EXPORT_CENTER_TEST_GROUP): two processes loading one database at once would race.
        # With pytest-xdist each worker process of a group loads its own too.
        worker = "_".join(
            part
            for part in (
                os.environ.get("EXPORT_CENTER_TEST_GROUP", ""),
                os.environ.get("PYTEST_XDIST_WORKER", ""),
            )
            if part
        )
        name = f"export_center_sample_{suffix}{'_' + worker if worker else ''}"
        url = make_url(mariadb_base_url()).set(database=name).render_as_string(hide_password=False)
        admin = create_engine(make_url(mariadb_base_url()))
        with admin.begin() as conn:
            conn.execute(text(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4"))
        admin.dispose()
    engine = make_engine(url, immediate=False)
    tpch.ensure_loaded(engine, scale, sample_dir)
    engine.dispose()
    _SAMPLES[dialect, scale] = url
    return url


@pytest.fixture
def make_stack(
    db_url: str, dialect: str, sample_dir: Path, tmp_path: Path
) -> Iterator[Callable[..., Stack]]:
    """Factory for a running embedded stack on loopback; stops them all at teardown."""
    stacks: list[Stack] = []

    def factory(
        scale: float = SAMPLE_SCALE, wrap: Callable[[Any], Any] | None = None, **overrides: Any
    ) -> Stack:
        stack = Stack.start(
            data_dir=tmp_path / f"data{len(stacks)}",
            database_url=db_url,
            sample_database_url=sample_url(dialect, sample_dir, scale),
            overrides=overrides,
            wrap=wrap,
        )
        stacks.append(stack)
        return stack

    yield factory
    for stack in reversed(stacks):
        stack.stop()


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    """One running stack with default test settings."""
    return make_stack()


@pytest.fixture
def cases(tmp_path: Path) -> Iterator[CasesServer]:
    """The CASES provider (tests/support/cases_provider.py) serving on loopback."""
    server = CasesServer(CASES_TOKEN, tmp_path / "events.db")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def faulty() -> Iterator[FaultProviderServer]:
    """The FLAKY provider (tests/support/fault_provider.py) serving on loopback."""
    server = FaultProviderServer(FAULT_TOKEN)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def flaky_stack(
    make_stack: Callable[..., Stack], faulty: FaultProviderServer, tmp_path: Path
) -> Callable[..., Stack]:
    """Factory for a stack whose FLAKY export type calls ``faulty``."""

    def factory(
        max_attempts: int = 3,
        max_rows: int = 5_000_000,
        batch_timeout_seconds: int | None = None,
        batch_size: int = 1000,
        **overrides: Any,
    ) -> Stack:
        registry = registry_file(
            tmp_path,
            faulty.url,
            max_rows=max_rows,
            batch_size=batch_size,
            max_attempts=max_attempts,
            batch_timeout_seconds=batch_timeout_seconds,
        )
        provider = {"internal_token": FAULT_TOKEN, **overrides.pop("provider", {})}
        return make_stack(export_types_file=str(registry), provider=provider, **overrides)

    return factory


@pytest.fixture
def seeded(flaky_stack: Callable[..., Stack], faulty: FaultProviderServer) -> Seeded:
    """A database with a succeeded, a failed, a quarantined and a stuck export."""
    return seed(flaky_stack, faulty)


@pytest.fixture
def s3_endpoint() -> str:
    """The shared S3Proxy (skipped locally, failed in CI when missing)."""
    from tests.support.s3 import s3_endpoint as endpoint

    return endpoint()


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    """A boto3 client of the shared S3Proxy."""
    from tests.support.s3 import s3_client

    return s3_client(s3_endpoint)


@pytest.fixture
def bucket(s3: Any) -> Iterator[str]:
    """A fresh empty bucket on the shared S3Proxy, removed afterwards."""
    from tests.support.s3 import fresh_bucket

    with fresh_bucket(s3) as name:
        yield name


@pytest.fixture
def private_s3(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Factory of private S3Proxy servers a test may stop; all stopped afterwards."""
    from tests.support.s3 import PrivateS3Proxy

    servers: list[PrivateS3Proxy] = []

    def factory(read_only: bool = False) -> PrivateS3Proxy:
        server = PrivateS3Proxy(tmp_path / f"s3proxy{len(servers)}", read_only=read_only)
        servers.append(server)
        server.start()
        return server

    yield factory
    for server in servers:
        server.close()
