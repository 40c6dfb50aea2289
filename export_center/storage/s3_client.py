"""The boto3 client of the S3 adapter, and how its errors read.

Client: boto3 (the AWS SDK for Python, maintained by AWS, thread-safe clients, SigV4,
presigning, paginators, retries with backoff). It talks to AWS S3 and to S3-compatible
servers (S3Proxy, MinIO, Ceph) through ``endpoint_url`` and path-style addressing.

Errors: every S3 failure (connection refused, timeout, 5xx after botocore's retries,
access denied) becomes :class:`~export_center.errors.StorageError`, a transient export
error, whose message :func:`describe_error` words: the operation, the key and the S3
error code, never the endpoint or a credential.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)

from export_center.settings import S3Settings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["describe_error", "http_status", "make_client"]


def make_client(settings: S3Settings) -> S3Client:
    """A boto3 S3 client for ``settings``.

    Credentials: ``access_key_id`` and ``secret_access_key`` when both are set, else
    boto3's default chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, the shared
    credentials file, a container or instance role). They are never logged.

    Args:
        settings: the ``storage.s3`` settings.

    Returns:
        A thread-safe client (SigV4, path-style when ``path_style``, ``standard`` retries
        with ``max_attempts`` tries per call, the connect and read timeouts in seconds).

    Raises:
        ValueError: the environment holds an access key without its secret (or the
            reverse), said as a sentence instead of botocore's traceback.
    """
    config = Config(
        region_name=settings.region,
        signature_version="s3v4",
        s3={"addressing_style": "path" if settings.path_style else "auto"},
        connect_timeout=settings.connect_timeout_seconds,
        read_timeout=settings.read_timeout_seconds,
        retries={"max_attempts": settings.max_attempts, "mode": "standard"},
        max_pool_connections=settings.max_connections,
        # Checksums only where S3 requires them: several S3-compatible servers refuse
        # the flexible checksums that boto3 adds by default since 1.36.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    keys: dict[str, str] = {}
    if settings.access_key_id is not None and settings.secret_access_key is not None:
        keys = {
            "aws_access_key_id": settings.access_key_id.get_secret_value(),
            "aws_secret_access_key": settings.secret_access_key.get_secret_value(),
        }
    try:
        client: S3Client = boto3.session.Session().client(
            "s3", endpoint_url=settings.endpoint_url, config=config, **keys
        )
    except PartialCredentialsError as exc:
        raise ValueError(
            f"incomplete S3 credentials ({type(exc).__name__}): set both AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY, or neither to use the AWS chain's other sources"
        ) from exc
    return client


def describe_error(exc: Exception) -> str:
    """A short reason that a task's owner may read: the S3 error code and message, or
    the client error's class with a plain cause. Never the endpoint, the bucket or a
    credential (botocore's own text names the endpoint URL); the full error stays
    chained to the :class:`StorageError` for the logs."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or str(
            exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        )
        message = error.get("Message") or ""
        return f"{code} {message}".strip()
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return f"{type(exc).__name__}: the object storage does not answer"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return f"{type(exc).__name__}: the object storage credentials are missing or incomplete"
    return type(exc).__name__


def http_status(exc: ClientError) -> int:
    """The HTTP status of an S3 error answer (0 when it has none)."""
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
