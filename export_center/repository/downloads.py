"""Downloads, link revocations, link uses and file hashes (``export_download``,
``export_link_revocation``, ``export_link_use``, ``export_file_hash``).

* :func:`record_download` appends one download row (database clock); rows are never
  updated or deleted by the product.
* :func:`revoke_links` appends one revocation row and its audit row in the caller's
  transaction; :func:`link_revoked` answers whether a link is revoked: its own id was
  revoked, or every link of its task was revoked at or after the link's issue time (a
  link without id: any revocation of every link).
* :func:`use_link` counts one use of a link under a limit with a fenced UPDATE (exact
  under concurrency).
* :func:`record_file_hashes` / :func:`tasks_with_hash`: the SHA-256 of every file of a
  task, from its manifest body.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from sqlalchemy import ColumnElement, Connection, Table, and_, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from export_center.db import db_now, db_now_plus
from export_center.models_downloads import (
    ExportDownload,
    ExportFileHash,
    ExportLinkRevocation,
    ExportLinkUse,
)
from export_center.repository.audit import AuditAction, record_audit
from export_center.repository.rows import Task

__all__ = [
    "DOWNLOADS",
    "DOWNLOAD_KINDS",
    "DownloadRow",
    "FILE_HASHES",
    "NewDownload",
    "download_rows",
    "link_revoked",
    "purge_downloads",
    "record_download",
    "record_file_hashes",
    "revoke_links",
    "tasks_with_hash",
    "use_link",
]

DOWNLOADS = cast(Table, ExportDownload.__table__)
REVOCATIONS = cast(Table, ExportLinkRevocation.__table__)
LINK_USES = cast(Table, ExportLinkUse.__table__)
FILE_HASHES = cast(Table, ExportFileHash.__table__)

#: The kinds of download rows: the bearer request (answered with a signed link), the
#: signed link (the file, a range, or a refusal), the presigned hop (307 to the bucket).
DOWNLOAD_KINDS = ("bearer", "link", "presigned")


@dataclass(frozen=True, slots=True)
class NewDownload:
    """What a download row records besides the task and the time."""

    user: str
    kind: str
    client_address: str
    user_agent: str | None
    link_id: str | None
    byte_range: str | None
    status: int
    code: str | None = None


@dataclass(frozen=True, slots=True)
class DownloadRow:
    """One ``export_download`` row (``at`` naive UTC, database clock)."""

    id: int
    task_no: str
    tenant_id: str
    user: str
    kind: str
    at: datetime
    client_address: str
    user_agent: str | None
    link_id: str | None
    byte_range: str | None
    status: int
    code: str | None


def record_download(conn: Connection, task: Task, row: NewDownload) -> None:
    """Append one download row of ``task``, at the database clock, in the caller's
    transaction (texts cut to their columns)."""
    conn.execute(
        insert(DOWNLOADS).values(
            task_id=task.id,
            task_no=task.task_no,
            tenant_id=task.tenant_id,
            user_id=row.user[:128],
            kind=row.kind,
            at=db_now(),
            client_address=row.client_address[:64],
            user_agent=row.user_agent[:500] if row.user_agent else None,
            link_id=row.link_id,
            byte_range=row.byte_range[:100] if row.byte_range else None,
            status=row.status,
            code=row.code[:64] if row.code else None,
        )
    )


def download_rows(
    conn: Connection,
    *,
    task_id: int | None = None,
    tenant_id: str | None = None,
    user: str | None = None,
    kind: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[DownloadRow]:
    """Download rows, newest first, filtered by task, tenant, user, kind and time
    (``since`` inclusive, ``until`` exclusive, naive UTC); ``before_id`` pages on.

    Args:
        limit: at most this many rows (a bounded read).
    """
    d = DOWNLOADS.c
    conds: list[Any] = []
    if task_id is not None:
        conds.append(d.task_id == task_id)
    if tenant_id is not None:
        conds.append(d.tenant_id == tenant_id)
    if user is not None:
        conds.append(d.user_id == user)
    if kind is not None:
        conds.append(d.kind == kind)
    if since is not None:
        conds.append(d.at >= since)
    if until is not None:
        conds.append(d.at < until)
    if before_id is not None:
        conds.append(d.id < before_id)
    rows = conn.execute(
        select(DOWNLOADS).where(*conds).order_by(d.id.desc()).limit(limit)
    ).mappings()
    return [
        DownloadRow(
            id=r["id"],
            task_no=r["task_no"],
            tenant_id=r["tenant_id"],
            user=r["user_id"],
            kind=r["kind"],
            at=r["at"],
            client_address=r["client_address"],
            user_agent=r["user_agent"],
            link_id=r["link_id"],
            byte_range=r["byte_range"],
            status=r["status"],
            code=r["code"],
        )
        for r in rows
    ]


def purge_downloads(conn: Connection, older_than_days: float, limit: int) -> int:
    """Delete at most ``limit`` download rows older than ``older_than_days`` (the audit
    retention: the download audit is kept as long as the audit trail).

    Returns:
        How many rows were deleted.
    """
    d = DOWNLOADS.c
    ids = [
        r[0]
        for r in conn.execute(
            select(d.id)
            .where(d.at <= db_now_plus(-older_than_days * 86400))
            .order_by(d.id)
            .limit(limit)
        )
    ]
    if not ids:
        return 0
    return int(conn.execute(DOWNLOADS.delete().where(d.id.in_(ids))).rowcount)


def revoke_links(
    conn: Connection, task: Task, link_id: str | None, *, actor: str, reason: str | None
) -> None:
    """Revoke one link of ``task`` (``link_id``) or every link issued so far (None), and
    write the audit row, in the caller's transaction."""
    conn.execute(
        insert(REVOCATIONS).values(
            task_id=task.id,
            link_id=link_id,
            revoked_at=db_now(),
            actor=actor[:160],
            reason=reason[:1000] if reason else None,
        )
    )
    record_audit(
        conn,
        actor=actor,
        action=AuditAction.LINK_REVOKE,
        outcome="revoked",
        task=task,
        reason=reason,
        details={"linkId": link_id, "scope": "link" if link_id else "all"},
    )


def link_revoked(
    conn: Connection, task_id: int, link_id: str | None, issued_ms: int | None
) -> bool:
    """True when the link is revoked: its id was revoked, or every link of the task was
    revoked at or after its issue time (Unix ms; a link without id or issue time is
    reached by any revocation of every link)."""
    r = REVOCATIONS.c
    every: ColumnElement[bool] = r.link_id.is_(None)
    if issued_ms is not None:
        issued = datetime.fromtimestamp(issued_ms / 1000, UTC).replace(tzinfo=None)
        every = and_(every, r.revoked_at >= issued)
    which = every if link_id is None else or_(r.link_id == link_id, every)
    found = conn.execute(select(r.id).where(r.task_id == task_id, which).limit(1)).first()
    return found is not None


def use_link(conn: Connection, task_id: int, link_id: str, max_uses: int) -> bool:
    """Count one use of ``link_id`` if it has served fewer than ``max_uses`` times.

    A fenced ``UPDATE ... WHERE uses < max_uses`` (the first use inserts the row, under a
    savepoint so that a concurrent first use turns into the UPDATE), so concurrent uses
    never pass the limit. Returns False when the limit is reached.
    """
    u = LINK_USES.c

    def bump() -> bool:
        stmt = (
            update(LINK_USES).where(u.link_id == link_id, u.uses < max_uses).values(uses=u.uses + 1)
        )
        return bool(conn.execute(stmt).rowcount == 1)

    if bump():
        return True
    if max_uses < 1:
        return False
    try:
        with conn.begin_nested():
            conn.execute(insert(LINK_USES).values(link_id=link_id, task_id=task_id, uses=1))
        return True
    except IntegrityError:
        return bump()


def record_file_hashes(conn: Connection, task_id: int, manifest_json: str | None) -> None:
    """Store the SHA-256 of each file the manifest body names (the files and the archive),
    in the caller's transaction (the commit of the task's success)."""
    if not manifest_json:
        return
    body = orjson.loads(manifest_json)
    rows = [
        {"sha256": f["sha256"], "task_id": task_id, "file_name": f["name"][:255], "kind": "file"}
        for f in body.get("files") or []
        if f.get("sha256")
    ]
    archive = body.get("archive")
    if archive and archive.get("sha256"):
        rows.append(
            {
                "sha256": archive["sha256"],
                "task_id": task_id,
                "file_name": archive["name"][:255],
                "kind": "archive",
            }
        )
    if rows:
        conn.execute(insert(FILE_HASHES), rows)


def tasks_with_hash(conn: Connection, sha256: str) -> list[tuple[int, str, str]]:
    """``(task id, file name, kind)`` of every stored file whose SHA-256 is ``sha256``."""
    h = FILE_HASHES.c
    return [
        (int(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute(
            select(h.task_id, h.file_name, h.kind).where(h.sha256 == sha256).order_by(h.id)
        )
    ]
