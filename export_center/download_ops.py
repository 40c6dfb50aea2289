"""What the API, the admin API and the operator CLI do with downloads, links and files.

* :func:`task_downloads`: a task's download rows, newest first.
* :func:`revoke_task_links`: revoke one link of a task, or every link issued so far; a
  link id that was not minted for the task is refused (404 ``LINK_NOT_FOUND``: link ids
  carry an HMAC of their task, :func:`export_center.links.is_link_of`); written to
  ``export_link_revocation`` and the audit trail in one transaction. From the commit on,
  every API process answers the link 410 ``LINK_REVOKED`` (each download reads the
  revocations from the database; there is no cache).
* :func:`trace_file`: which task produced a file, from its bytes (SHA-256) alone, with
  the task's requester and every download of the task. Bytes whose hash no task stored
  (an edited file, a file from elsewhere) are unknown: never matched to a task by any
  other property (an XLSX file's document properties may be edited too).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Engine

from export_center.db import reading
from export_center.errors import NotFound, ValidationFailed
from export_center.links import is_link_id, is_link_of
from export_center.repository import Task, read_task
from export_center.repository.downloads import (
    DownloadRow,
    download_rows,
    revoke_links,
    tasks_with_hash,
)

__all__ = [
    "Traced",
    "checked_link_id",
    "file_sha256",
    "new_digest",
    "revoke_task_links",
    "task_downloads",
    "trace_file",
    "trace_hash",
]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: Most download rows one task's list shows (newest first).
TASK_DOWNLOADS_LIMIT = 500


def task_downloads(
    engine: Engine, task: Task, limit: int = TASK_DOWNLOADS_LIMIT
) -> list[DownloadRow]:
    """The download rows of ``task``, newest first, at most ``limit``."""
    with reading(engine) as conn:
        return download_rows(conn, task_id=task.id, limit=limit)


def checked_link_id(link_id: str | None) -> str | None:
    """``link_id`` when it has the shape of a link id (None stays None).

    Raises:
        ValidationFailed: ``INVALID_VALUE`` (field ``linkId``) otherwise.
    """
    if link_id is None or is_link_id(link_id):
        return link_id
    raise ValidationFailed(
        "linkId must be the 16 hexadecimal digits of a link's id (the link= of its URL)",
        code="INVALID_VALUE",
        field="linkId",
    )


def revoke_task_links(
    engine: Engine,
    task: Task,
    link_id: str | None,
    *,
    secret: str,
    actor: str,
    reason: str | None,
) -> None:
    """Revoke the link ``link_id`` of ``task``, or (None) every link issued so far.

    Args:
        secret: the download-link secret (it tells the task's link ids from others).

    Raises:
        ValidationFailed: ``INVALID_VALUE`` for a malformed link id.
        NotFound: ``LINK_NOT_FOUND`` for a well-formed id that is no link of ``task``
            (another task's link, or one made up): nothing is recorded.
    """
    checked = checked_link_id(link_id)
    if checked is not None and not is_link_of(secret, task.task_no, checked):
        raise NotFound(
            f"{checked} is not a download link of task {task.task_no}", code="LINK_NOT_FOUND"
        )
    with engine.begin() as conn:
        revoke_links(conn, task, checked, actor=actor, reason=reason)


@dataclass(frozen=True, slots=True)
class Traced:
    """A file traced to its task: the task, which of its files matched (name, ``file`` or
    ``archive``) and the task's downloads (newest first)."""

    sha256: str
    task: Task
    file_name: str
    kind: str
    downloads: list[DownloadRow]


def new_digest() -> hashlib._Hash:
    """A SHA-256 digest to feed a file's bytes to (the hash :func:`trace_hash` looks up)."""
    return hashlib.sha256()


def file_sha256(chunks: Iterable[bytes]) -> str:
    """Lowercase hex SHA-256 of the bytes ``chunks`` yields."""
    digest = new_digest()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def trace_hash(engine: Engine, sha256: str) -> list[Traced]:
    """Every task that stored a file with SHA-256 ``sha256`` (one, in practice: two
    identical files of two tasks both answer), with its downloads; [] when unknown.

    Raises:
        ValidationFailed: ``INVALID_VALUE`` (field ``sha256``) unless 64 hex digits.
    """
    wanted = sha256.strip().lower()
    if not _SHA256.fullmatch(wanted):
        raise ValidationFailed(
            "sha256 must be 64 hexadecimal digits", code="INVALID_VALUE", field="sha256"
        )
    found: list[Traced] = []
    with reading(engine) as conn:
        for task_id, name, kind in tasks_with_hash(conn, wanted):
            task = read_task(conn, task_id)
            if task is None:
                continue
            rows = download_rows(conn, task_id=task.id, limit=TASK_DOWNLOADS_LIMIT)
            found.append(Traced(wanted, task, name, kind, rows))
    return found


def trace_file(engine: Engine, chunks: Iterable[bytes]) -> tuple[str, list[Traced]]:
    """The SHA-256 of a file's bytes and what :func:`trace_hash` finds for it."""
    sha = file_sha256(chunks)
    return sha, trace_hash(engine, sha)
