"""Downloads as the audit sees them: every answer recorded, links revocable.

:func:`serve_download` answers ``GET /api/v1/exports/{taskId}/download`` and writes one
``export_download`` row per answer before it is sent (so a download is in the audit
before its first byte):

* a bearer request (type ``bearer``): the 307 to a new signed link, whose id is recorded;
  a refusal of a task the caller sees (not ready, expired) is recorded with its code;
* a signed link (type ``link``): the file, a range of it (206, 416), or a refusal once
  the signature was verified (410 ``LINK_REVOKED``, ``LINK_EXPIRED``, ``FILE_EXPIRED``...);
* a presigned hop (type ``presigned``): the 307 to a presigned GET of the bucket, signed
  for this click and valid ``storage.s3.link_seconds`` (300 s). A hop already minted lives
  out those seconds even when its link is revoked; with ``download = proxy`` no hop exists
  and every byte goes through this check.

A request whose link does not verify (bad signature) or whose task the caller cannot
see names no user and no task, and is not recorded. ``HEAD`` requests are not downloads
and are not recorded.

Who: the link's bound user (signed link), or the caller (bearer). The client address is
the TCP peer, unless the peer is one of ``api.trusted_proxies``: then ``X-Forwarded-For``
is read from the right, skipping trusted proxies, and the first address that is not one
is the client (:func:`client_address`); a header from any other peer is ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qs, urlsplit

from fastapi import Request, Response
from fastapi.responses import RedirectResponse
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool
from starlette.types import Message, Receive, Scope, Send

from export_center import metrics
from export_center.api import service
from export_center.api.files import file_response
from export_center.auth import Identity
from export_center.db import reading
from export_center.errors import Gone, RequestError, StorageError, Unauthorized
from export_center.link_limits import link_limits_of
from export_center.repository import Task, read_task_by_no
from export_center.repository.downloads import NewDownload, link_revoked, record_download, use_link
from export_center.runtime import Runtime

__all__ = ["RecordedAnswer", "Seen", "client_address", "serve_download"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Refusals of a signed link whose signature verified (the link's user is known).
_VERIFIED_REFUSALS = frozenset(
    {"LINK_EXPIRED", "LINK_NOT_YOURS", "FILE_EXPIRED", "NO_FILE", "NOT_READY", "FILE_GONE"}
)


@lru_cache(maxsize=16)
def _networks(configured: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(n.strip(), strict=False) for n in configured)


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in n for n in networks)


def client_address(request: Request, trusted_proxies: Sequence[str]) -> str:
    """The client's address of ``request``.

    The TCP peer, unless it is one of ``trusted_proxies`` (addresses or networks): then
    the ``X-Forwarded-For`` addresses are read right to left, trusted ones skipped, and
    the first untrusted one is the client (a malformed entry ends the walk: the last
    trusted hop is named). Without a header, the peer.
    """
    peer = request.client.host if request.client is not None else "unknown"
    networks = _networks(tuple(trusted_proxies))
    if not networks or not _trusted(peer, networks):
        return peer
    hops = [
        hop.strip()
        for value in request.headers.getlist("x-forwarded-for")
        for hop in value.split(",")
        if hop.strip()
    ]
    client = peer
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop.strip("[]"))
        except ValueError:
            return client
        client = hop.strip("[]")
        if not _trusted(client, networks):
            return client
    return client


@dataclass(frozen=True, slots=True)
class Seen:
    """What a download request shows of its client."""

    address: str
    user_agent: str | None
    byte_range: str | None

    @classmethod
    def of(cls, runtime: Runtime, request: Request) -> Seen:
        """Read the client address (trusted proxies only), user agent and ``Range``."""
        return cls(
            address=client_address(request, runtime.settings.api.trusted_proxies),
            user_agent=request.headers.get("user-agent"),
            byte_range=request.headers.get("range"),
        )


def _record(
    runtime: Runtime,
    task: Task,
    user: str,
    kind: str,
    seen: Seen,
    link_id: str | None,
    status: int,
    code: str | None = None,
) -> None:
    with runtime.engine.begin() as conn:
        _record_in(conn, task, user, kind, seen, link_id, status, code)
    metrics.DOWNLOADS.labels(kind, str(status)).inc()


def _record_in(
    conn: Connection,
    task: Task,
    user: str,
    kind: str,
    seen: Seen,
    link_id: str | None,
    status: int,
    code: str | None,
) -> None:
    row = NewDownload(
        user=user,
        kind=kind,
        client_address=seen.address,
        user_agent=seen.user_agent,
        link_id=link_id,
        byte_range=seen.byte_range,
        status=status,
        code=code,
    )
    record_download(conn, task, row)


def _bearer(runtime: Runtime, request: Request, task_id: str, user: Identity) -> Response:
    task = service.visible_task(runtime, task_id, user)
    recorded = request.method == "GET"
    seen = Seen.of(runtime, request)
    try:
        url = service.signed_link_for(runtime, user, task_id)
    except RequestError as exc:
        if recorded:
            _record(runtime, task, user.user, "bearer", seen, None, exc.status, exc.code)
        raise
    link_id = parse_qs(urlsplit(url).query).get("link", [None])[0]
    if recorded:
        _record(runtime, task, user.user, "bearer", seen, link_id, 307)
    return RedirectResponse(url, status_code=307)


def serve_download(
    runtime: Runtime,
    request: Request,
    task_id: str,
    user: Identity | None,
    link: Mapping[str, str] | None,
) -> Response:
    """Answer a download (bearer: a signed link; signed link: the file) and record it.

    Args:
        link: the signed link's query fields, or None for a bearer request.

    Raises:
        Unauthorized: neither a bearer token nor a link.
        Gone: ``LINK_REVOKED`` (the link, or every link of the task, was revoked),
            ``LINK_USED_UP`` (the type's per-link use limit is reached), and the
            refusals of :func:`export_center.api.service.file_for_link`.
    """
    if link is None:
        if user is None:
            raise Unauthorized("a bearer token or a signed link is required", code="UNAUTHORIZED")
        return _bearer(runtime, request, task_id, user)
    recorded = request.method == "GET"
    seen = Seen.of(runtime, request)
    link_id = link.get("link") or None
    try:
        grant = service.file_for_link(runtime, task_id, link, user)
    except RequestError as exc:
        if recorded and exc.code in _VERIFIED_REFUSALS:
            with reading(runtime.engine) as conn:
                task = read_task_by_no(conn, task_id)
            if task is not None:
                _record(runtime, task, link["user"], "link", seen, link_id, exc.status, exc.code)
        raise
    task = grant.task
    assert grant.link is not None
    who = grant.link.user
    refusal: Gone | None = None
    with runtime.engine.begin() as conn:
        if link_revoked(conn, task.id, grant.link.link_id, grant.link.issued):
            refusal = Gone(
                "this download link was revoked; ask the owner of the export for a new one",
                code="LINK_REVOKED",
            )
        elif recorded:
            limits = link_limits_of(runtime.registry.get(task.export_type))
            # A link signed before links had ids has no count of its own: not limited.
            if (
                limits.max_uses is not None
                and grant.link.link_id is not None
                and not use_link(conn, task.id, grant.link.link_id, limits.max_uses)
            ):
                refusal = Gone(
                    f"this download link was used {limits.max_uses} times, as many as "
                    "this export type allows; ask for a new one",
                    code="LINK_USED_UP",
                )
        if refusal is not None and recorded:
            _record_in(conn, task, who, "link", seen, link_id, 410, refusal.code)
    if refusal is not None:
        if recorded:
            metrics.DOWNLOADS.labels("link", "410").inc()
        raise refusal
    try:
        answer = file_response(runtime, grant, request)
    except StorageError:
        if recorded:
            _record(runtime, task, who, "link", seen, link_id, 503, "STORAGE_UNAVAILABLE")
        raise
    if not recorded:
        return answer
    kind = "presigned" if answer.status_code == 307 else "link"
    return RecordedAnswer(
        answer, lambda status: _record(runtime, task, who, kind, seen, link_id, status)
    )


class RecordedAnswer(Response):
    """``inner``, recorded with the status it really answers (a local file answers a
    ``Range`` itself, 200, 206 or 416) when its head is sent, before its first byte:
    ``record(status)`` runs in a worker thread (it writes to the database) and an error
    there stops the answer."""

    def __init__(self, inner: Response, record: Callable[[int], None]) -> None:
        self.inner = inner
        self.record = record
        self.status_code = inner.status_code
        self.background = None
        self.raw_headers = inner.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send ``inner``, recording its status first."""

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                await run_in_threadpool(self.record, int(message["status"]))
            await send(message)

        await self.inner(scope, receive, sending)
