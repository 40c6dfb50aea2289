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
from typing import Literal

import platformdirs
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from export_center.settings_governance import ApprovalSettings
from export_center.settings_groups import (
    ApiSettings,
    ConsumerSettings,
    LimitSettings,
    LoopSettings,
    ProviderSettings,
    PublisherSettings,
    ReconcilerSettings,
    RocketMQSettings,
    S3Settings,
    StorageSettings,
    TaskSettings,
)
from export_center.settings_notify import (
    NotifySettings,
    RobotSettings,
    RouteSettings,
    SchedulerSettings,
)
from export_center.settings_quotas import QuotaSettings

__all__ = [
    "NotifySettings",
    "RobotSettings",
    "RouteSettings",
    "SchedulerSettings",
    "ApiSettings",
    "ConsumerSettings",
    "LimitSettings",
    "LoopSettings",
    "ProviderSettings",
    "PublisherSettings",
    "QuotaSettings",
    "ReconcilerSettings",
    "RocketMQSettings",
    "S3Settings",
    "Settings",
    "StorageSettings",
    "TaskSettings",
    "default_data_dir",
    "load_or_create_secret",
    "private_dir",
    "settings_problems",
]


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
        # Only the embedded default serves them unless told: elsewhere they would be a
        # second, unaudited way into the database named by sample_database_url.
        default_factory=lambda data: data.get("environment", "embedded") == "embedded",
        description="Serve the TPC-H sample providers in this process (and allow provider_url "
        "self in the registry); unset: on for the embedded default only",
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
        None,
        description="Registry file (YAML or TOML); unset: the samples' when the sample "
        "providers are mounted, else none (set it)",
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
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    quotas: QuotaSettings = Field(default_factory=QuotaSettings)
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)

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
    def manifest_secret(self) -> str:
        """HMAC-SHA256 key that signs export manifests (``packaging.manifest``)."""
        return self._secret(self.api.manifest_secret, "manifest-secret")

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
        for name in ("jwt_secret", "download_secret", "manifest_secret", "internal_token"):
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
                "manifest-secret": "EXPORT_CENTER_API__MANIFEST_SECRET",
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


def private_dir(path: Path) -> Path:
    """Make ``path`` (and its missing parents) a directory only its owner may enter.

    The rule: the data directory holds every tenant's files, the database and the
    secrets, so a directory the export center creates there is ``0700``, whatever the
    umask; one that exists already is left as its owner set it.

    Returns:
        ``path``.
    """
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.chmod(0o700)  # mkdir's mode is cut by the umask; 0700 is never widened
    return path


def load_or_create_secret(path: Path) -> str:
    """Read a secret from ``path``, creating it (256 random bits, mode 0600) if absent.

    Args:
        path: file holding the secret as URL-safe text.

    Returns:
        The secret text.
    """
    if path.exists():
        return path.read_text().strip()
    private_dir(path.parent)
    secret = secrets.token_urlsafe(32)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(secret)
    tmp.chmod(0o600)
    try:
        tmp.rename(path) if not path.exists() else tmp.unlink()
    except FileExistsError:  # pragma: no cover - racing creator won
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()
