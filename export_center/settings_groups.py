"""The component groups of :class:`export_center.settings.Settings`.

One pydantic model per component (``EXPORT_CENTER_<GROUP>__<NAME>``): loops, the task
attempt, providers, limits, RocketMQ, storage and the API. :mod:`export_center.settings`
assembles them and re-exports every name, so callers import from there.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal
from zoneinfo import available_timezones

from pydantic import BaseModel, Field, SecretStr, field_validator

from export_center.hosts import pattern_problem

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
    "StorageSettings",
    "TaskSettings",
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
    storage_full_backoff_seconds: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: [600.0, 1800.0],
        description="Least wait before automatic retry n of an attempt that found the file "
        "storage full (last repeats): a retry seconds later would meet the same full disk",
    )
    max_lease_recoveries: int = Field(
        3,
        ge=0,
        le=100,
        description="Times a task's worker may stop renewing its lease (killed, lost, frozen) "
        "before the task fails WORKER_LOST; counted apart from the type's max_attempts",
    )
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
    distributed_shards: bool = Field(
        False,
        description="Shards of a sharded export are units of work that any worker of the "
        "cluster claims (its own lease, checkpoint and attempts; woken through the outbox, "
        "tag EXPORT_SHARD); the worker that claimed the task coordinates, runs "
        "local_shards of them itself and assembles the file. False: every shard is a "
        "thread of that one worker (the embedded default: faster on one machine)",
    )
    shard_lease_seconds: int = Field(
        30,
        ge=5,
        le=3600,
        description="Distributed shards: the lease a worker running another worker's shard "
        "writes at claim and renews every third of it; a killed runner's shard is taken "
        "over this long after its last renewal (the coordinator's own shards live with the "
        "task's lease)",
    )
    local_shards: int = Field(
        1,
        ge=0,
        le=16,
        description="Distributed shards: how many the coordinating worker runs at once in "
        "its own threads (the rest, up to the type's parallel, go to other workers; it "
        "takes over a shard that nobody runs)",
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
        default_factory=lambda: [1.0, 4.0, 16.0, 30.0],
        description="Pauses before asking again for a page the provider answered 503/504 "
        "DB_TIMEOUT, one retry per entry (then the attempt fails, retried later); the "
        "default rides out a provider database restart of about 50 s within the batch "
        "time limit",
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
    low_space_mb: float = Field(
        1024.0,
        ge=0,
        description="Local storage: below this much free space the reconciler deletes the "
        "kept shard parts of FAILED tasks (oldest first) and doctor, /readyz and the "
        "export_storage_free_bytes metric report low space; 0: never",
    )
    s3: S3Settings = Field(default_factory=S3Settings)


class ApiSettings(BaseModel):
    """HTTP API: bind address, trusted names, server limits, JWT and download-link signing."""

    host: str = Field("127.0.0.1", description="serve: bind address")
    port: int = Field(8000, description="serve: bind port")
    public_base_url: str | None = Field(
        None,
        description="Base URL providers registered as self are called on (its host is "
        "one of this server's names)",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Names this API answers to besides loopback ones (a Host header naming "
        "anything else is 421 UNTRUSTED_HOST): exports.example.com, *.example.com, "
        "10.0.0.0/8, or * for any",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses or networks of reverse proxies whose X-Forwarded-For is "
        "believed for the client address of the download audit (10.0.0.5, 10.0.0.0/8); "
        "from any other peer the header is ignored",
    )
    request_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=300,
        description="serve: a request's headers and body must arrive within this many "
        "seconds of its first byte (or of the connection's opening); then the connection "
        "is closed with 408",
    )
    send_timeout_seconds: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="serve: an answer whose client takes none of its bytes for this many "
        "seconds (a download nobody reads) has its connection closed",
    )
    keep_alive_seconds: int = Field(
        20,
        ge=1,
        le=300,
        description="serve: an idle connection is closed this many seconds after its last "
        "answer; longer than the 5 s after which HTTP client pools such as httpx stop "
        "reusing one, so a client does not send on a connection the server is closing",
    )
    max_connections: int = Field(
        500,
        ge=2,
        description="serve: connections (and requests in progress) at once; a request "
        "beyond is answered 503 SERVER_BUSY",
    )
    jwt_secret: SecretStr | None = Field(None, description="HS256 secret of bearer tokens")
    jwt_audience: list[str] = Field(
        default_factory=list,
        description="Audiences (aud) a token must name one of; unset: tokens that carry "
        "an aud are refused (401 TOKEN_WRONG_AUDIENCE)",
    )
    dev_sign_in: bool | None = Field(
        None,
        description="Offer the web page's development sign-in (callers on this machine that "
        "open the page at a loopback address or localhost, same-origin requests only; not "
        "through a proxy or another name); unset: on for the embedded default only",
    )
    jwt_leeway_seconds: float = Field(
        30.0, ge=0, le=600, description="Clock skew tolerated on a token's exp, nbf and iat"
    )
    download_link_ttl_seconds: int = Field(
        24 * 3600, description="Lifetime of a signed download link"
    )
    download_secret: SecretStr | None = Field(None, description="HMAC secret of download links")
    manifest_secret: SecretStr | None = Field(
        None, description="HMAC secret that signs export manifests (export-center verify checks it)"
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _host_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            problem = pattern_problem(pattern)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: list[str]) -> list[str]:
        for network in value:
            ipaddress.ip_network(network.strip(), strict=False)  # ValueError names it
        return value

    @field_validator("jwt_audience")
    @classmethod
    def _audiences(cls, value: list[str]) -> list[str]:
        if any(not audience.strip() for audience in value):
            raise ValueError("an audience must be non-empty text")
        return value
