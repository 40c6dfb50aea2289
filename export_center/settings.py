"""Settings of the export center, read from the environment.

Every setting is an environment variable with the prefix ``EXPORT_CENTER_``; nested
groups use ``__`` (``EXPORT_CENTER_TASK__LEASE_SECONDS=300``). ``docs/settings.md``
lists them all. Defaults follow seed 002 §16.3 except where the embedded default needs
something else (a SQLite file and every loop switched on).

The embedded default keeps all of its state under ``data_dir`` (default
``./.export-center``): the SQLite file, the exported files, the generated secrets and
the TPC-H sample.
"""

from __future__ import annotations

import secrets
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "ApiSettings",
    "ConsumerSettings",
    "LimitSettings",
    "LoopSettings",
    "ProviderSettings",
    "PublisherSettings",
    "ReconcilerSettings",
    "Settings",
    "TaskSettings",
    "load_or_create_secret",
]


class LoopSettings(BaseModel):
    """Switch and period of one background loop (seed 002 §16.3)."""

    enabled: bool = True
    loop_seconds: float = 1.0


class PublisherSettings(LoopSettings):
    """Outbox publisher (seed 002 §7.4): claims at most ``batch_size`` rows a pass."""

    loop_seconds: float = 0.5
    batch_size: int = 50
    lease_seconds: int = 60


class ConsumerSettings(LoopSettings):
    """Command consumer: ``concurrency`` exports run at once in one process."""

    concurrency: int = 2


class ReconcilerSettings(LoopSettings):
    """Reconciler (seed 002 §8.5): the only redispatch path."""

    loop_seconds: float = 30.0
    redispatch_grace_seconds: int = 60
    sent_stale_seconds: int = 600
    orphan_age_seconds: int = 24 * 3600
    outbox_retention_days: int = 7
    batch_size: int = 50


class TaskSettings(BaseModel):
    """Execution of one export attempt (seed 002 §8.3, §9.2, §14)."""

    lease_seconds: int = 300
    heartbeat_seconds: float = 60.0
    max_duration_minutes: float = 30.0
    max_attempts: int = 3
    retry_backoff_seconds: list[float] = Field(default_factory=lambda: [60.0, 900.0])
    retry_jitter: float = 0.2
    max_file_size_mb: float | None = None
    retention_days: float = 7.0
    progress_every_seconds: float = 1.0
    time_zone: str = "UTC"


class ProviderSettings(BaseModel):
    """How the export center calls providers, and how the sample providers behave."""

    connect_timeout_seconds: float = 3.0
    read_timeout_seconds: float = 15.0
    request_attempts: int = 3
    batch_size: int = 1000
    max_rows: int = 5_000_000
    base_url: str | None = None
    internal_token: SecretStr | None = None
    snapshot_ttl_seconds: int = 24 * 3600


class LimitSettings(BaseModel):
    """Creation guard (seed 002 §14): duplicate window and active-task limits."""

    duplicate_window_seconds: float = 60.0
    max_active_per_user: int = 3
    max_active_per_type: int = 5


class ApiSettings(BaseModel):
    """HTTP API: bind address, JWT and download-link signing."""

    host: str = "127.0.0.1"
    port: int = 8000
    public_base_url: str | None = None
    jwt_secret: SecretStr | None = None
    jwt_algorithm: Literal["HS256"] = "HS256"
    download_link_ttl_seconds: int = 24 * 3600
    download_secret: SecretStr | None = None
    page_size_max: int = 100


class Settings(BaseSettings):
    """All settings of one export-center process.

    Secrets left unset are generated once and kept under ``data_dir`` (the embedded
    default); with ``environment="production"`` they must be given explicitly.
    """

    model_config = SettingsConfigDict(
        env_prefix="EXPORT_CENTER_", env_nested_delimiter="__", extra="ignore"
    )

    environment: Literal["embedded", "production", "test"] = "embedded"
    data_dir: Path = Path(".export-center")
    database_url: str | None = None
    instance_id: str = Field(default_factory=lambda: f"ec-{secrets.token_hex(4)}")
    transport: Literal["memory", "rocketmq"] = "memory"
    mount_sample_providers: bool = True
    load_sample_data: bool = True
    sample_scale: float = 0.27
    sample_database_url: str | None = None
    export_types_file: Path | None = None
    provider_allowed_hosts: list[str] = Field(default_factory=lambda: ["127.0.0.1", "localhost"])
    topic_prefix: str = ""

    api: ApiSettings = Field(default_factory=ApiSettings)
    publisher: PublisherSettings = Field(default_factory=PublisherSettings)
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    reconciler: ReconcilerSettings = Field(default_factory=ReconcilerSettings)
    task: TaskSettings = Field(default_factory=TaskSettings)
    provider: ProviderSettings = Field(default_factory=ProviderSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)

    @property
    def command_topic(self) -> str:
        """Command topic name with the environment prefix (seed 002 §6.2)."""
        return f"{self.topic_prefix}export-center-command-v1"

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
        (seed 002 §11) and 512 MB for the embedded default, whose sample exports of all
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

    def _secret(self, value: SecretStr | None, name: str) -> str:
        if value is not None and value.get_secret_value():
            secret = value.get_secret_value()
            if self.environment == "production" and (len(secret) < 32 or secret == "changeme"):
                raise ValueError(f"{name}: production secrets must be at least 32 characters")
            return secret
        if self.environment == "production":
            raise ValueError(f"{name}: must be set explicitly in production")
        return load_or_create_secret(self.data_dir / f"{name}.txt")


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
