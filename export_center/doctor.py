"""``export-center doctor``: check a deployment before it fails on real work.

Each check answers ok or fail with one sentence; a failure names the fix. The checks, in
order: the settings a process needs to start; the database answers; the migrations are
at head; the create-guard row exists; the broker answers and knows the command topic
(RocketMQ only); the file storage is writable and has room for a full file (S3: the
bucket exists and takes objects, multipart uploads and deletes); the
export-type registry is valid; the sample providers serve (as the running ``serve``
reports them) and each provider host answers HTTP; the process clock agrees
with the database clock. Later checks that need an earlier one (the database) are
skipped with a sentence saying why.

The doctor looks and never makes: a SQLite database, a data directory, a files
directory or a generated secret that does not exist is reported (with the path and
what to do), never created, so pointing it at a wrong directory cannot turn that
directory into an installation.
"""

from __future__ import annotations

import os
import shutil
import socket
import textwrap
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, select
from sqlalchemy.exc import SQLAlchemyError

from export_center import places, repository
from export_center.db import db_now, make_engine
from export_center.doctor_check import Check
from export_center.doctor_notify import notify_checks
from export_center.registry import Registry, RegistryError
from export_center.registry_source import NoRegistry, open_registry, registry_source
from export_center.settings import Settings
from export_center.terminal import visible

__all__ = ["Check", "check_lines", "run_checks"]

#: Most seconds the process clock may differ from the database clock.
MAX_CLOCK_SKEW_SECONDS = 5.0


def check_lines(check: Check, width: int) -> list[str]:
    """One check as lines of at most ``width`` columns (where a word allows): the mark
    (``ok`` or ``FAIL``), the name, then the sentence wrapped between words and indented
    under its own first word, never cut in the middle of one."""
    head = f"{'ok  ' if check.ok else 'FAIL'} {check.name:24} "
    words = textwrap.wrap(
        visible(check.message),
        max(width - len(head), 20),
        break_long_words=False,
        break_on_hyphens=False,
    )
    body = words or [""]
    pad = " " * len(head)
    return [head + body[0], *(pad + line for line in body[1:])]


def _unmade_secrets(settings: Settings) -> list[str]:
    """The generated secrets (embedded default) that are neither set nor on file yet."""
    values = {
        "jwt-secret": settings.api.jwt_secret,
        "download-secret": settings.api.download_secret,
        "manifest-secret": settings.api.manifest_secret,
        "internal-token": settings.provider.internal_token,
    }
    return [
        name
        for name, value in values.items()
        if (value is None or not value.get_secret_value())
        and not (settings.data_dir / f"{name}.txt").exists()
    ]


def _settings_check(settings: Settings) -> Check:
    """The start-up rules, without generating a secret: a secret the embedded default
    has not generated yet is named (the first ``serve`` writes it), never created."""
    unmade = _unmade_secrets(settings)
    try:
        if unmade and settings.environment != "production":
            settings.prefix  # noqa: B018 - the start-up rule besides the secrets
        else:  # every secret is set or on file (production never generates one)
            settings.check_startup()
    except ValueError as exc:
        return Check("settings", False, str(exc))
    if unmade:
        return Check(
            "settings",
            True,
            f"environment {settings.environment}; no {', '.join(unmade)} in "
            f"{settings.data_dir} yet: the first `export-center serve` creates them (tokens "
            "and links signed elsewhere are refused then)",
        )
    return Check("settings", True, f"environment {settings.environment}")


def _database(settings: Settings) -> tuple[Check, Engine | None]:
    url = settings.resolved_database_url
    shown = places.shown_database(settings)
    missing = places.missing_database(settings)
    if missing is not None:
        return Check("database", False, missing), None
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
    if not root.exists():
        return _storage_to_come(settings, root)
    probe = root / f".doctor-{uuid.uuid4().hex}"
    try:
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
    low = int(settings.storage.low_space_mb * 2**20)
    if free < low:
        return Check(
            "storage",
            False,
            f"{root} has {free / 2**20:,.0f} MB free, below the low-space mark "
            f"({low / 2**20:,.0f} MB, EXPORT_CENTER_STORAGE__LOW_SPACE_MB): the kept shard "
            "parts of FAILED tasks are being deleted and exports may fail with "
            "STORAGE_ERROR; free space or grow the volume",
        )
    return Check("storage", True, f"{root} writable, {free / 2**30:,.1f} GB free")


def _storage_to_come(settings: Settings, root: Path) -> Check:
    """The files directory does not exist yet (the service creates it): its nearest
    existing parent must let the service create it. Nothing is created here."""
    parent = root.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        return Check(
            "storage",
            False,
            f"{root} does not exist and {parent} is not writable; make it writable or set "
            "EXPORT_CENTER_DATA_DIR",
        )
    free = shutil.disk_usage(parent).free
    return Check(
        "storage",
        True,
        f"{root} does not exist yet (the service creates it; {parent} is writable), "
        f"{free / 2**30:,.1f} GB free",
    )


def _s3_storage(settings: Settings) -> Check:
    """The bucket exists and takes writes, multipart uploads and deletes."""
    try:
        from export_center.storage.s3 import S3Storage

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
    source = registry_source(settings)
    path = source.path
    try:
        registry = open_registry(settings, source)
    except NoRegistry as exc:
        return Check("registry", False, str(exc)), None
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
    own = sorted(etype.code for etype in registry if etype.provider_url == "self")
    if own:
        checks.append(_sample_providers(settings, own))
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
    return checks


def _serve_url(settings: Settings) -> str:
    """Where this installation's ``export-center serve`` answers, by the settings."""
    if settings.api.public_base_url:
        return settings.api.public_base_url.rstrip("/")
    host = settings.api.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{host}:{settings.api.port}"


def _sample_providers(settings: Settings, codes: list[str]) -> Check:
    """The sample providers (types registered as ``self``) as the running ``serve``
    reports them in ``/readyz``: they live in that process, or in its child process,
    never in this one, so only it can say whether they serve."""
    name = "sample providers"
    where = (
        "in a child process of `export-center serve`"
        if settings.sample_providers_process
        else "inside `export-center serve`"
    )
    url = _serve_url(settings)
    try:
        answer = httpx.get(f"{url}/readyz", timeout=3.0)
        body = answer.json()
    except (httpx.HTTPError, ValueError):
        return Check(
            name,
            True,
            f"{', '.join(codes)} are served {where}, which does not answer at {url} (not "
            "started, or on another port: EXPORT_CENTER_API__PORT)",
        )
    state = body.get("sampleProviders") if isinstance(body, dict) else None
    if not isinstance(state, dict):
        return Check(name, True, f"{', '.join(codes)} are served inside `serve` at {url}")
    restarts = int(state.get("restarts") or 0)
    again = f", restarted {restarts} time{'s' if restarts != 1 else ''}" if restarts else ""
    if state.get("state") == "running":
        return Check(
            name,
            True,
            f"{', '.join(codes)}: process {state.get('pid')} of `serve` at {url} answers{again}",
        )
    return Check(
        name,
        False,
        f"the sample-provider process of `serve` at {url} is down "
        f"({state.get('lastExit') or 'not started'}{again}); exports of {', '.join(codes)} "
        "fail until it is back. `serve` restarts it by itself; its log says why it died",
    )


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
        why = (
            "no database"
            if places.missing_database(settings) is not None
            else "the database does not answer"
        )
        checks += [Check(name, False, f"not checked: {why}") for name, _ in needs_database]
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
    checks += notify_checks(settings.notify)
    return checks
