"""The object-key scheme: every key a storage holds is made here, by the server.

* An export file: ``exports/{tenant}/{yyyy}/{mm}/{task_no}/{uuid}.{ext}``
  (:func:`new_object_key`). No request can name a path (CASES E33), and a tenant id that
  is not a plain name is replaced by a digest (:func:`tenant_segment`). Keys of the
  earlier layout without the tenant (``exports/{yyyy}/{mm}/{task_no}/{uuid}.{ext}``) are
  still read, served, expired and scanned, so files made before the change stay usable.
* One stored segment of a sharded export's part:
  ``parts/{task_no}/{shard:05d}/{segment:06d}.v{version}`` (:func:`part_key`).

Every adapter refuses any other key with :class:`~export_center.errors.StorageError`
through :func:`check_export_key`, :func:`check_part_key` and :func:`check_task_no`, so
the refusals read the same whatever the store.
"""

from __future__ import annotations

import functools
import hashlib
import re
import uuid
from datetime import UTC, datetime

from export_center.errors import StorageError

__all__ = [
    "EXPORT_PREFIX",
    "PART_PREFIX",
    "check_export_key",
    "check_part_key",
    "check_task_no",
    "is_export_key",
    "is_task_no",
    "new_object_key",
    "part_key",
    "task_no_of_key",
    "task_no_of_part",
    "tenant_segment",
]

#: Every export file lives under this prefix (the orphan scan looks only here).
EXPORT_PREFIX = "exports/"
_TASK_NO = r"exp_[0-9A-Z]{26}"
#: Shard parts of sharded exports live under this prefix until the file is finalized.
PART_PREFIX = "parts/"
_PART_KEY = re.compile(rf"^parts/({_TASK_NO})/\d{{5}}/\d{{6}}\.v\d{{1,9}}$")
_PLAIN_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@functools.cache
def _export_key() -> re.Pattern[str]:
    """The pattern of a server-made key (either layout); group 1 is the task number.

    The extensions are the format table's (``writers.formats``), each optionally
    gzipped (``csv.gz``), and ``zip`` (an archive of the file or its parts), imported at
    the first key checked so that a command that never touches a file does not load the
    writers.
    """
    from export_center.writers.formats import extension_pattern

    return re.compile(
        rf"^exports/(?:[A-Za-z0-9_-]{{1,64}}/|~[0-9a-f]{{32}}/)?\d{{4}}/\d{{2}}/"
        rf"({_TASK_NO})/[0-9a-f]{{32}}\.((?:{extension_pattern()})(?:\.gz)?|zip)$"
    )


def tenant_segment(tenant_id: str) -> str:
    """The key segment of a tenant: the id itself when it is a plain name (1-64 of
    ``A-Z a-z 0-9 _ -``), else ``~`` and the first 32 hex digits of its SHA-256.

    Tenant ids come from verified tokens, yet a key must never carry a path separator,
    a dot segment or a character an object store treats specially; the ``~`` keeps
    digests apart from plain names.
    """
    if _PLAIN_TENANT.match(tenant_id):
        return tenant_id
    return "~" + hashlib.sha256(tenant_id.encode("utf-8")).hexdigest()[:32]


def new_object_key(
    task_no: str, extension: str, *, tenant: str, now: datetime | None = None
) -> str:
    """Return a fresh server-made key for one attempt's file.

    Args:
        task_no: public task id (``exp_`` + 26 ULID characters).
        extension: a format's extension (``writers.formats``: ``csv``, ``xlsx``).
        tenant: the task's tenant id (made safe by :func:`tenant_segment`).
        now: the moment naming the year and month folders (default: now, UTC).

    Returns:
        ``exports/{tenant}/{yyyy}/{mm}/{task_no}/{32 hex digits}.{extension}``; every
        call returns a new key, so two attempts never share one.
    """
    now = now or datetime.now(UTC)
    segment = tenant_segment(tenant)
    return f"{EXPORT_PREFIX}{segment}/{now:%Y}/{now:%m}/{task_no}/{uuid.uuid4().hex}.{extension}"


def is_task_no(text: str) -> bool:
    """True when ``text`` is a public task id (``exp_`` + 26 ULID characters)."""
    return re.fullmatch(_TASK_NO, text) is not None


def part_key(task_no: str, shard_no: int, segment_no: int, version: int) -> str:
    """``parts/{task_no}/{shard:05d}/{segment:06d}.v{version}``: one stored segment of a
    shard's part, written by attempt ``version`` (so that an attempt that lost its lease
    can never overwrite a segment its successor stored).

    Raises:
        StorageError: ``task_no`` is not a task id.
    """
    if not is_task_no(task_no):
        raise StorageError(f"refused task number {task_no!r} for a part key")
    return f"{PART_PREFIX}{task_no}/{shard_no:05d}/{segment_no:06d}.v{version}"


def task_no_of_part(key: str) -> str | None:
    """The task number of a part key (None when ``key`` is not one)."""
    match = _PART_KEY.match(key)
    return match.group(1) if match else None


def is_export_key(key: str) -> bool:
    """True when ``key`` has the shape this server makes (either layout)."""
    return _export_key().match(key) is not None


def task_no_of_key(key: str) -> str | None:
    """The task id inside a server-made key, or None for any other key."""
    match = _export_key().match(key)
    return match.group(1) if match else None


def check_export_key(key: str) -> str:
    """``key`` itself when it is a server-made export key (either layout).

    Raises:
        StorageError: "refused object key ...: not made by this server".
    """
    if not is_export_key(key):
        raise StorageError(f"refused object key {key!r}: not made by this server")
    return key


def check_part_key(key: str) -> str:
    """``key`` itself when it is a server-made part key (:func:`part_key`).

    Raises:
        StorageError: "refused part key ...: not made by this server".
    """
    if task_no_of_part(key) is None:
        raise StorageError(f"refused part key {key!r}: not made by this server")
    return key


def check_task_no(task_no: str) -> str:
    """``task_no`` itself when it is a task id (the folder of a task's parts).

    Raises:
        StorageError: "refused task number ...".
    """
    if not is_task_no(task_no):
        raise StorageError(f"refused task number {task_no!r}")
    return task_no
