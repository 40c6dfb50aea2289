"""``export-center doctor``: check a deployment before it fails on real work.

Each check answers ok or fail with one sentence; a failure names the fix. The checks, in
order: the settings a process needs to start; the database answers; the migrations are
at head; the create-guard row exists; the broker answers and knows the command topic
(RocketMQ only); the file storage is writable and has room for a full file (S3: the
bucket exists and takes objects, multipart uploads and deletes); the
export-type registry is valid; each provider host answers HTTP; the process clock agrees
with the database clock. Later checks that need an earlier one (the database) are
skipped with a sentence saying why.
"""

from __future__ import annotations

import shutil
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, select
from sqlalchemy.exc import SQLAlchemyError

from export_center import repository
from export_center.db import db_now, make_engine
from export_center.registry import Registry, RegistryError, load_registry
from export_center.settings import Settings

__all__ = ["Check", "run_checks"]

#: Most seconds the process clock may differ from the database clock.
MAX_CLOCK_SKEW_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Check:
    """One check: its name, whether it passed, and a sentence (the fix when it failed)."""

    name: str
    ok: bool
    message: str


def _settings_check(settings: Settings) -> Check:
    try:
        settings.check_startup()
    except ValueError as exc:
        return Check("settings", False, str(exc))
    return Check("settings", True, f"environment {settings.environment}")


def _database(settings: Settings) -> tuple[Check, Engine | None]:
    from sqlalchemy.engine import make_url

    url = settings.resolved_database_url
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        engine = make_engine(url)
        with engine.connect() as conn:
            repository.ping(conn)
    except Exception as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        return (
            Check(
                "database",
                False,
                f"{shown} does not answer ({reason}); start it or fix EXPORT_CENTER_DATABASE_URL",
            ),
            None,
        )
    return Check("database", True, shown), engine


def _migrations(engine: Engine) -> Check:
    from export_center.runtime import alembic_config

    head = ScriptDirectory.from_config(alembic_config(str(engine.url))).get_current_head()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        return Check(
            "migrations",
            False,
            f"the database is at revision {current or 'none'}, the code needs {head}; "
            "run `export-center db upgrade`",
        )
    return Check("migrations", True, f"at head ({head})")


def _guard(engine: Engine) -> Check:
    with engine.connect() as conn:
        present = repository.guard_row_exists(conn)
    if not present:
        return Check(
            "guard row",
            False,
            "export_task_guard has no GLOBAL_CREATE row; run `export-center db upgrade`",
        )
    return Check("guard row", True, "GLOBAL_CREATE present")


def _broker(settings: Settings) -> Check:
    if settings.transport != "rocketmq":
        return Check("broker", True, "in-process transport (no broker)")
    endpoint = settings.rocketmq.endpoint
    host, _, port = endpoint.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=3):
            pass
    except (OSError, ValueError) as exc:
        return Check(
            "broker",
            False,
            f"the RocketMQ proxy at {endpoint} does not answer ({exc}); start the broker "
            "or fix EXPORT_CENTER_ROCKETMQ__ENDPOINT",
        )
    from export_center.transport.rocketmq import check_topic

    try:
        check_topic(endpoint, settings.command_topic, settings.rocketmq.request_timeout_seconds)
    except Exception as exc:
        return Check(
            "broker",
            False,
            f"the broker at {endpoint} does not know topic {settings.command_topic} ({exc}); "
            "create it (deploy/rocketmq) or fix EXPORT_CENTER_TOPIC_PREFIX",
        )
    return Check("broker", True, f"{endpoint}, topic {settings.command_topic}")


def _storage(settings: Settings) -> Check:
    if settings.storage.backend == "s3":
        return _s3_storage(settings)
    root = settings.files_dir
    probe = root / f".doctor-{uuid.uuid4().hex}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return Check(
            "storage",
            False,
            f"cannot write under {root} ({exc.strerror or exc}); make it writable or set "
            "EXPORT_CENTER_DATA_DIR",
        )
    free = shutil.disk_usage(root).free
    need = 2 * settings.file_size_cap_bytes
    if free < need:
        return Check(
            "storage",
            False,
            f"{root} has {free / 2**20:,.0f} MB free, less than two full files "
            f"({need / 2**20:,.0f} MB); free space or lower EXPORT_CENTER_TASK__MAX_FILE_SIZE_MB",
        )
    return Check("storage", True, f"{root} writable, {free / 2**30:,.1f} GB free")


def _s3_storage(settings: Settings) -> Check:
    """The bucket exists and takes writes, multipart uploads and deletes."""
    try:
        from export_center.storage_s3 import S3Storage

        storage = S3Storage(settings.storage.s3)
    except ImportError:
        return Check(
            "storage",
            False,
            "storage.backend is s3 but boto3 is not installed; pip install 'export-center[s3]'",
        )
    except ValueError as exc:
        return Check("storage", False, str(exc))
    found = storage.check_bucket()
    return Check("storage", found.ok, found.message)


def _registry(settings: Settings) -> tuple[Check, Registry | None]:
    from export_center.runtime import default_registry_path

    path = Path(settings.export_types_file or default_registry_path())
    try:
        registry = load_registry(
            path,
            allowed_hosts=set(settings.provider_allowed_hosts),
            allow_self=settings.mount_sample_providers,
        )
    except RegistryError as exc:
        return Check(
            "registry", False, f"{path}: {exc}; fix the file and run the check again"
        ), None
    return Check("registry", True, f"{path}: {', '.join(sorted(registry.types))}"), registry


def _providers(settings: Settings, registry: Registry) -> list[Check]:
    hosts: dict[str, list[str]] = {}
    for etype in registry:
        if etype.provider_url == "self":
            continue
        hosts.setdefault(etype.provider_url.rstrip("/"), []).append(etype.code)
    checks = []
    for base, codes in sorted(hosts.items()):
        name = f"provider {urlsplit(base).netloc}"
        try:
            httpx.head(base + "/", timeout=3.0)
        except httpx.HTTPError as exc:
            checks.append(
                Check(
                    name,
                    False,
                    f"{base} does not answer ({type(exc).__name__}) for {', '.join(codes)}; "
                    "start the service or fix provider_url in the registry",
                )
            )
            continue
        checks.append(Check(name, True, f"{base} answers ({', '.join(codes)})"))
    if not checks:
        checks.append(Check("providers", True, "the sample providers run in this process"))
    return checks


def _clock(engine: Engine) -> Check:
    with engine.connect() as conn:
        before = time.time()
        now = conn.execute(select(db_now())).scalar_one()
        after = time.time()
    skew = _utc_timestamp(now) - (before + after) / 2
    if abs(skew) > MAX_CLOCK_SKEW_SECONDS:
        return Check(
            "clock",
            False,
            f"this host's clock is {-skew:+.1f} s from the database's; sync it with NTP "
            "(leases and deadlines use the database clock, tokens and links this one)",
        )
    return Check("clock", True, f"{skew:+.2f} s from the database clock")


def _utc_timestamp(value: object) -> float:
    """Seconds since the epoch of a database time (naive UTC, or ISO text on SQLite)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    assert isinstance(moment, datetime)
    return moment.replace(tzinfo=UTC).timestamp()


def _database_check(name: str, check: Callable[[Engine], Check], engine: Engine) -> Check:
    """Run one check that reads the database; a database without the export center's
    tables (never upgraded, or another schema) is a failed check, not a traceback."""
    try:
        return check(engine)
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        return Check(name, False, f"cannot read it ({reason}); run `export-center db upgrade`")


def run_checks(settings: Settings) -> list[Check]:
    """Run every check, in order; a check that needs the database is skipped (and
    failed) with a sentence when the database does not answer.

    Returns:
        The checks; the deployment is healthy when every ``ok`` is True.
    """
    checks = [_settings_check(settings)]
    database, engine = _database(settings)
    checks.append(database)
    needs_database: list[tuple[str, Callable[[Engine], Check]]] = [
        ("migrations", _migrations),
        ("guard row", _guard),
        ("clock", _clock),
    ]
    if engine is None:
        checks += [
            Check(name, False, "not checked: the database does not answer")
            for name, _ in needs_database
        ]
    else:
        try:
            checks += [_database_check(name, check, engine) for name, check in needs_database]
        finally:
            engine.dispose()
    checks.append(_broker(settings))
    checks.append(_storage(settings))
    registry_check, registry = _registry(settings)
    checks.append(registry_check)
    if registry is not None:
        checks += _providers(settings, registry)
    return checks
