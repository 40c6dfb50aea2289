"""Settings of the export center, read from the environment.

Every setting is an environment variable with the prefix ``EXPORT_CENTER_``; nested
groups use ``__`` (``EXPORT_CENTER_TASK__LEASE_SECONDS=300``). ``docs/settings.md``
lists them all. The defaults are production values, except where the embedded default
needs something else (a SQLite file and every loop switched on).

The embedded default keeps all of its state under ``data_dir``: the SQLite file, the
exported files, the generated secrets and the TPC-H sample. Its default is the user's
data directory (``platformdirs``: ``~/.local/share/export-center`` on Linux), not the
working directory, so a command started from another directory finds the same
installation (same secrets, same database).
"""

from __future__ import annotations

import secrets
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import available_timezones

import platformdirs
from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "ApiSettings",
    "ConsumerSettings",
    "LimitSettings",
    "LoopSettings",
    "ProviderSettings",
    "PublisherSettings",
    "ReconcilerSettings",
    "RocketMQSettings",
    "S3Settings",
    "Settings",
    "StorageSettings",
    "TaskSettings",
    "default_data_dir",
    "load_or_create_secret",
    "settings_problems",
]


class LoopSettings(BaseModel):
    """Switch and period of one background loop."""

    enabled: bool | None = Field(
        None, description="Run this loop here; unset: on, except in production (turn on in order)"
    )
    loop_seconds: float = Field(1.0, description="Seconds between two passes")


class PublisherSettings(LoopSettings):
    """Outbox publisher: claims at most ``batch_size`` rows a pass."""

    loop_seconds: float = Field(0.5, description="Seconds between two publisher passes")
    batch_size: int = Field(50, description="Outbox rows claimed per pass")
    lease_seconds: int = Field(60, description="Lease of a claimed outbox row (far above one send)")
    backoff_seconds: list[float] = Field(
        default_factory=lambda: [5.0, 15.0, 60.0, 300.0, 900.0],
        description="Wait after failed send n (the last repeats forever)",
    )
    probe_seconds: float = Field(
        5.0,
        gt=0,
        description="While sends fail: how often an idle publisher asks whether the broker "
        "answers again (then every backed-off command is sent at once)",
    )


class ConsumerSettings(LoopSettings):
    """Command consumer: ``concurrency`` exports run at once in one process."""

    concurrency: int = Field(2, description="Exports run at once by this process")
    gc_gen0_threshold: int = Field(
        10_000,
        ge=0,
        description="Python's cyclic garbage collector runs after this many new container "
        "objects (CPython's default is 700; an export allocates a list per row of every "
        "batch, so 700 means a collection every 700 rows). 0 keeps Python's setting",
    )


class ReconcilerSettings(LoopSettings):
    """Reconciler: the only redispatch path."""

    loop_seconds: float = Field(30.0, description="Seconds between two reconciler passes")
    redispatch_grace_seconds: int = Field(
        60, description="A due PENDING task waits this long before redispatch"
    )
    sent_stale_seconds: int = Field(
        600, description="A SENT command older than this whose task is still PENDING is sent again"
    )
    orphan_age_seconds: int = Field(
        24 * 3600, description="Files without a SUCCEEDED task older than this are deleted"
    )
    upload_orphan_age_seconds: int = Field(
        900,
        ge=0,
        description="Unfinished uploads (S3 multipart, .part files) of tasks not running, "
        "older than this, are aborted",
    )
    outbox_retention_days: int = Field(
        7, description="SENT outbox rows older than this are deleted"
    )
    audit_retention_days: float = Field(
        400.0, gt=0, description="Audit rows older than this are deleted (in bounded batches)"
    )
    failed_parts_retention_days: float = Field(
        7.0,
        gt=0,
        description="Shard parts of a FAILED task are kept this long for a manual retry "
        "that resumes; then the reconciler deletes them",
    )
    batch_size: int = Field(50, description="Rows handled per action per pass")


class TaskSettings(BaseModel):
    """Execution of one export attempt."""

    lease_seconds: int = Field(300, description="Lease written at claim and at each renewal")
    heartbeat_seconds: float = Field(60.0, description="Watchdog renewal period")
    max_duration_minutes: float = Field(30.0, description="Execution deadline of one attempt")
    retry_backoff_seconds: list[float] = Field(
        default_factory=lambda: [60.0, 900.0],
        description="Backoff before automatic retry n (last repeats)",
    )
    retry_jitter: float = Field(0.2, description="Random spread of the retry backoff (0.2 = ±20 %)")
    max_file_size_mb: float | None = Field(
        None,
        description="File size cap enforced while writing; unset: 50 in production, 512 embedded",
    )
    retention_days: float = Field(7.0, description="How long a finished file is kept")
    progress_every_seconds: float = Field(
        0.5, description="Progress is written at batch ends, at most this often"
    )
    shard_parallel_cap: int = Field(
        4,
        ge=1,
        le=16,
        description="Most shards of one task fetched at once in this worker, whatever "
        "the type asks (each holds a page in memory, a fetch thread and a DB connection "
        "at checkpoints)",
    )
    checkpoint_every_seconds: float = Field(
        0.0,
        ge=0,
        description="A shard stores its segment and writes its checkpoint at a page end "
        "at most this often; 0: after every page (a crash then refetches only the pages "
        "in flight); always when the segment passes 8 MB",
    )
    time_zone: str = Field(
        "UTC",
        description="Default time zone (IANA name) of an export's date-times; "
        "a create may choose another with timeZone",
    )

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if value not in available_timezones() or value in ("localtime", "posixrules", "Factory"):
            raise ValueError(f"not an IANA time zone name: {value!r} (e.g. Asia/Shanghai, UTC)")
        return value


class ProviderSettings(BaseModel):
    """How the export center calls providers, and how the sample providers behave."""

    connect_timeout_seconds: float = Field(3.0, description="Provider connect timeout")
    read_timeout_seconds: float = Field(15.0, description="Provider read timeout")
    request_attempts: int = Field(
        3,
        description="Tries per batch for 408, 429, 5xx (not 501, 505), timeouts, connection errors",
    )
    max_retry_after_seconds: float = Field(
        30.0,
        gt=0,
        description="Longest Retry-After waited between tries; a longer one ends the attempt",
    )
    batch_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="Total time limit of one batch, retries included (registry may override)",
    )
    db_timeout_retry_seconds: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: [1.0, 4.0, 16.0],
        description="Pauses before asking again for a page the provider answered 503/504 "
        "DB_TIMEOUT, one retry per entry (then the attempt fails, retried later)",
    )
    internal_token: SecretStr | None = Field(
        None, description="X-Internal-Service-Token shared with providers"
    )
    snapshot_ttl_seconds: int = Field(
        24 * 3600, description="Sample providers: snapshot token lifetime"
    )


class LimitSettings(BaseModel):
    """Creation guard: duplicate window and active-task limits."""

    duplicate_window_seconds: float = Field(
        60.0, description="Same request within this window returns the active task"
    )
    max_active_per_user: int = Field(3, description="Queued or running tasks per user")
    max_active_per_type: int = Field(5, description="Queued or running tasks per export type")


class RocketMQSettings(BaseModel):
    """The RocketMQ transport: gRPC through the proxy, official client."""

    endpoint: str = Field("127.0.0.1:8081", description="Proxy gRPC endpoint host:port")
    invisible_seconds: int = Field(60, description="Invisible time of a received command (>= 10)")
    await_seconds: int = Field(5, description="Long-poll wait of one receive (5..20)")
    request_timeout_seconds: int = Field(
        5, description="gRPC request timeout in whole seconds (send, ack)"
    )
    dlq_enabled: bool | None = Field(
        None, description="Run the dead-letter handler here; unset: same as the consumer switch"
    )


class S3Settings(BaseModel):
    """S3-compatible object storage (``storage.backend = s3``).

    Credentials: ``access_key_id`` and ``secret_access_key`` when both are set, else the
    default AWS chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, the shared
    credentials file, a container or instance role). They are never logged.
    """

    bucket: str | None = Field(None, description="Bucket of the export files (required for s3)")
    endpoint_url: str | None = Field(
        None, description="S3 endpoint, e.g. http://127.0.0.1:18090; unset: AWS S3"
    )
    region: str | None = Field(None, description="Region signed into requests, e.g. us-east-1")
    path_style: bool = Field(
        False, description="Path-style addressing (http://host/bucket/key), for S3Proxy, MinIO"
    )
    access_key_id: SecretStr | None = Field(
        None, description="Access key id; unset: the default AWS credential chain"
    )
    secret_access_key: SecretStr | None = Field(
        None, description="Secret access key; unset: the default AWS credential chain"
    )
    part_size_mb: int = Field(
        8, ge=5, le=512, description="Multipart upload part size in MiB (S3's minimum is 5)"
    )
    upload_concurrency: int = Field(
        2, ge=1, le=16, description="Parts of one export uploaded at once while it renders"
    )
    max_connections: int = Field(32, ge=1, description="HTTP connections kept to S3 per process")
    connect_timeout_seconds: float = Field(3.0, gt=0, description="S3 connect timeout")
    read_timeout_seconds: float = Field(30.0, gt=0, description="S3 read timeout")
    max_attempts: int = Field(
        3, ge=1, le=10, description="Tries per S3 call (botocore standard retries, backoff)"
    )
    download: Literal["redirect", "proxy"] = Field(
        "redirect",
        description="redirect: answer a download with a presigned GET; proxy: the API "
        "streams the file (with Range), for buckets clients cannot reach",
    )
    link_seconds: int = Field(
        300,
        ge=1,
        le=7 * 24 * 3600,
        description="Lifetime of a presigned GET, signed per click; never past the file's "
        "retention",
    )


class StorageSettings(BaseModel):
    """Where export files live: a local directory (embedded default) or S3."""

    backend: Literal["local", "s3"] = Field(
        "local", description="local: a directory under the data dir; s3: an S3-compatible bucket"
    )
    s3: S3Settings = Field(default_factory=S3Settings)


class ApiSettings(BaseModel):
    """HTTP API: bind address, JWT and download-link signing."""

    host: str = Field("127.0.0.1", description="serve: bind address")
    port: int = Field(8000, description="serve: bind port")
    public_base_url: str | None = Field(
        None, description="Base URL providers registered as self are called on"
    )
    jwt_secret: SecretStr | None = Field(None, description="HS256 secret of bearer tokens")
    dev_sign_in: bool | None = Field(
        None,
        description="Offer the web page's development sign-in (loopback callers only); "
        "unset: on for the embedded default only",
    )
    jwt_leeway_seconds: float = Field(
        30.0, ge=0, le=600, description="Clock skew tolerated on a token's exp, nbf and iat"
    )
    download_link_ttl_seconds: int = Field(
        24 * 3600, description="Lifetime of a signed download link"
    )
    download_secret: SecretStr | None = Field(None, description="HMAC secret of download links")


class Settings(BaseSettings):
    """All settings of one export-center process.

    Secrets left unset are generated once and kept under ``data_dir`` (the embedded
    default); with ``environment="production"`` they must be given explicitly.
    """

    model_config = SettingsConfigDict(
        env_prefix="EXPORT_CENTER_", env_nested_delimiter="__", extra="ignore"
    )

    environment: Literal["embedded", "production", "test"] = Field(
        "embedded", description="production refuses generated secrets and skips auto-migration"
    )
    data_dir: Path = Field(
        default_factory=lambda: default_data_dir(),
        description="Where the embedded default keeps its state (default: the user's data "
        "directory, whatever the working directory)",
    )
    database_url: str | None = Field(
        None, description="SQLAlchemy URL; unset: SQLite file in the data dir"
    )
    instance_id: str = Field(
        default_factory=lambda: f"ec-{secrets.token_hex(4)}",
        description="Lease owner id of this process",
    )
    transport: Literal["memory", "rocketmq"] = Field("memory", description="Command transport")
    mount_sample_providers: bool = Field(
        True, description="Serve the TPC-H sample providers in this process"
    )
    sample_providers_process: bool = Field(
        True,
        description="Embedded worker loops call the sample providers in a child process "
        "(its own core) instead of this process",
    )
    load_sample_data: bool = Field(True, description="Generate and load the TPC-H sample on start")
    sample_scale: float = Field(
        0.27, description="TPC-H scale factor of the sample (0.27 = 405,000 orders)"
    )
    sample_database_url: str | None = Field(
        None, description="Database of the sample data; unset: database_url"
    )
    export_types_file: Path | None = Field(
        None, description="Registry file (YAML or TOML); unset: the samples'"
    )
    provider_allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "localhost"],
        description="Hosts a provider_url may name",
    )
    topic_prefix: str | None = Field(
        None,
        description=(
            "Environment prefix of topic and group names; production must set it (may be empty)"
        ),
    )

    api: ApiSettings = Field(default_factory=ApiSettings)
    publisher: PublisherSettings = Field(default_factory=PublisherSettings)
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    reconciler: ReconcilerSettings = Field(default_factory=ReconcilerSettings)
    task: TaskSettings = Field(default_factory=TaskSettings)
    provider: ProviderSettings = Field(default_factory=ProviderSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    rocketmq: RocketMQSettings = Field(default_factory=RocketMQSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir(cls, value: object) -> object:
        """An empty value means the default; ``~`` is the home directory; a relative path
        is made absolute once, here, so the process never depends on its working
        directory afterwards."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return default_data_dir()
        return Path(str(value)).expanduser().absolute()

    @property
    def prefix(self) -> str:
        """The environment prefix; production refuses an unset one."""
        if self.topic_prefix is None:
            if self.environment == "production":
                raise ValueError("EXPORT_CENTER_TOPIC_PREFIX must be set explicitly in production")
            return "test-" if self.environment == "test" else ""
        return self.topic_prefix

    @property
    def command_topic(self) -> str:
        """Command topic name with the environment prefix."""
        return f"{self.prefix}export-center-command-v1"

    @property
    def worker_group(self) -> str:
        """Consumer group of the workers."""
        return f"{self.prefix}export-center-worker-v1"

    @property
    def dlq_group(self) -> str:
        """Consumer group of the dead-letter handler."""
        return f"{self.prefix}export-center-dlq-handler-v1"

    @property
    def dlq_topic(self) -> str:
        """RocketMQ's dead-letter topic of the worker group."""
        return f"%DLQ%{self.worker_group}"

    def loop_enabled(self, loop: LoopSettings) -> bool:
        """A loop's switch: explicit value, else on (embedded, test) or off (production).

        Production turns them on one by one: reconciler, publisher, consumer.
        """
        if loop.enabled is not None:
            return loop.enabled
        return self.environment != "production"

    @property
    def dlq_enabled(self) -> bool:
        """Whether this process runs the dead-letter handler."""
        if self.rocketmq.dlq_enabled is not None:
            return self.rocketmq.dlq_enabled
        return self.loop_enabled(self.consumer)

    @property
    def resolved_database_url(self) -> str:
        """SQLAlchemy URL: the setting, or a SQLite file under ``data_dir``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'export-center.db').resolve()}"

    @property
    def resolved_sample_database_url(self) -> str:
        """Where the sample providers read TPC-H data: the setting, else the main database."""
        return self.sample_database_url or self.resolved_database_url

    @property
    def file_size_cap_bytes(self) -> int:
        """File size cap enforced while writing: the setting, else 50 MB in production
        and 512 MB for the embedded default, whose sample exports of all
        405,000 orders make a 63 MB CSV."""
        mb = self.task.max_file_size_mb
        if mb is None:
            mb = 50.0 if self.environment == "production" else 512.0
        return int(mb * 1024 * 1024)

    @property
    def files_dir(self) -> Path:
        """Root of the local-directory storage."""
        return self.data_dir / "files"

    @cached_property
    def jwt_secret(self) -> str:
        """HS256 secret for bearer tokens (generated and kept for the embedded default)."""
        return self._secret(self.api.jwt_secret, "jwt-secret")

    @cached_property
    def download_secret(self) -> str:
        """HMAC secret for signed download links."""
        return self._secret(self.api.download_secret, "download-secret")

    @cached_property
    def internal_token(self) -> str:
        """``X-Internal-Service-Token`` shared with providers."""
        return self._secret(self.provider.internal_token, "internal-token")

    def check_startup(self) -> None:
        """Refuse to start with settings that would fail later: every secret present
        (and strong in production), the topic prefix set in production.

        Raises:
            ValueError: one sentence naming the setting and what to do.
        """
        self.prefix  # noqa: B018 - raises when production has no prefix
        if self.storage.backend == "s3" and not self.storage.s3.bucket:
            raise ValueError(
                "storage.backend is s3 but no bucket is set: set EXPORT_CENTER_STORAGE__S3__BUCKET"
            )
        for name in ("jwt_secret", "download_secret", "internal_token"):
            getattr(self, name)

    def _secret(self, value: SecretStr | None, name: str) -> str:
        if value is not None and value.get_secret_value():
            secret = value.get_secret_value()
            if self.environment == "production" and (len(secret) < 32 or secret == "changeme"):
                raise ValueError(f"{name}: production secrets must be at least 32 characters")
            return secret
        if self.environment == "production":
            variable = {
                "jwt-secret": "EXPORT_CENTER_API__JWT_SECRET",
                "download-secret": "EXPORT_CENTER_API__DOWNLOAD_SECRET",
                "internal-token": "EXPORT_CENTER_PROVIDER__INTERNAL_TOKEN",
            }.get(name, name)
            raise ValueError(
                f"{name}: must be set explicitly in production ({variable}, at least 32 characters)"
            )
        return load_or_create_secret(self.data_dir / f"{name}.txt")


def settings_problems(error: ValidationError) -> str:
    """The settings a process refused, one line each, named as the environment variable
    that sets them (``EXPORT_CENTER_STORAGE__S3__PART_SIZE_MB: Input should be greater
    than or equal to 5``), for a command to print instead of a traceback. The values are
    never shown: a refused value may be a secret.

    Args:
        error: what pydantic raised while reading :class:`Settings`.

    Returns:
        Text ending in a newline: a first line, then one line per refused setting.
    """
    lines = ["export-center: cannot start: invalid settings"]
    for problem in error.errors(include_url=False):
        path = [str(part) for part in problem["loc"]]
        name = "EXPORT_CENTER_" + "__".join(path).upper() if path else "settings"
        lines.append(f"  {name}: {problem['msg']}")  # never the value: it may be a secret
    return "\n".join(lines) + "\n"


def default_data_dir() -> Path:
    """The per-user data directory of the export center (``platformdirs``)."""
    return Path(platformdirs.user_data_dir("export-center", appauthor=False))


def load_or_create_secret(path: Path) -> str:
    """Read a secret from ``path``, creating it (256 random bits, mode 0600) if absent.

    Args:
        path: file holding the secret as URL-safe text.

    Returns:
        The secret text.
    """
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(secret)
    tmp.chmod(0o600)
    try:
        tmp.rename(path) if not path.exists() else tmp.unlink()
    except FileExistsError:  # pragma: no cover - racing creator won
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()
