"""How a download answers once a signed link was verified: the file, a redirect to a
presigned GET, or the object streamed through the API with ``Range``.

Which one is the storage's choice (:meth:`export_center.storage.base.Storage.download`):
a local directory is served by Starlette's ``FileResponse`` (which answers ``Range``
itself); S3 with ``download = redirect`` answers 307 to a presigned GET signed for this
click, valid ``storage.s3.link_seconds`` (5 min by default) and never past the file's
retention; S3 with ``download = proxy`` streams from the bucket.

Ranges of a proxied download (HTTP range requests): one range ``bytes=first-last``,
``bytes=first-`` or ``bytes=-suffix`` answers 206 with ``Content-Range``; a range that
starts past the end answers 416 ``RANGE_NOT_SATISFIABLE`` with ``Content-Range:
bytes */size``; several ranges, a malformed header, or an ``If-Range`` that is not the
object's ETag are ignored and the whole file is sent (200), as HTTP allows. Every
answer carries ``Cache-Control: no-store`` and the RFC 6266 ``Content-Disposition``.
"""

from __future__ import annotations

import re

from fastapi import Request, Response
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, StreamingResponse

from export_center.api.service import FileGrant
from export_center.filenames import content_disposition
from export_center.runtime import Runtime
from export_center.storage.base import LocalFile, Proxied, Redirect

__all__ = ["file_response", "parse_range"]

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """Read a ``Range`` header against an object of ``size`` bytes.

    Returns:
        ``(first, last)`` (inclusive byte positions) for one satisfiable range; None
        to send the whole file (no header, several ranges, malformed); ``"unsatisfiable"``
        when the one range starts at or past the end (or asks for a zero-length suffix).
    """
    if not header:
        return None
    match = _RANGE.match(header.strip().replace(" ", ""))
    if match is None:
        return None
    start, end = match.groups()
    if not start and not end:
        return None
    if not start:  # the last `end` bytes
        suffix = int(end)
        if suffix == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    first = int(start)
    last = min(int(end), size - 1) if end else size - 1
    if end and int(end) < first:
        return None  # invalid range: ignored
    if first >= size:
        return "unsatisfiable"
    return first, last


def file_response(runtime: Runtime, grant: FileGrant, request: Request) -> Response:
    """The answer to a verified download of ``grant``'s file.

    Raises:
        StorageError: the store does not answer (mapped to 503 by the app).
    """
    task = grant.task
    assert task.object_key is not None and task.file_name is not None
    content_type = task.content_type or "application/octet-stream"
    disposition = content_disposition(task.file_name)
    answer = runtime.storage.download(
        task.object_key,
        file_name=task.file_name,
        content_type=content_type,
        seconds=grant.presign_seconds(runtime.settings.storage.s3.link_seconds),
    )
    headers = {"Content-Disposition": disposition, "Cache-Control": "no-store"}
    if isinstance(answer, LocalFile):
        return FileResponse(answer.path, media_type=content_type, headers=headers)
    if isinstance(answer, Redirect):
        return RedirectResponse(answer.url, status_code=307, headers={"Cache-Control": "no-store"})
    return _proxied(answer, request, content_type, headers)


def _proxied(
    answer: Proxied, request: Request, content_type: str, headers: dict[str, str]
) -> Response:
    """Stream the object, or the one range asked for, through the API."""
    headers = {**headers, "Accept-Ranges": "bytes", "ETag": answer.etag}
    wanted = parse_range(request.headers.get("range"), answer.size)
    if_range = request.headers.get("if-range")
    if if_range is not None and if_range.strip() != answer.etag:
        wanted = None  # the file changed since the client's copy: send it whole
    if wanted == "unsatisfiable":
        return JSONResponse(
            {
                "code": "RANGE_NOT_SATISFIABLE",
                "message": f"the range starts past the end of the file ({answer.size} bytes)",
                "field": "Range",
            },
            status_code=416,
            headers={"Content-Range": f"bytes */{answer.size}", "Cache-Control": "no-store"},
        )
    status = 200
    first, last = 0, answer.size - 1
    if isinstance(wanted, tuple):
        first, last = wanted
        status = 206
        headers["Content-Range"] = f"bytes {first}-{last}/{answer.size}"
    headers["Content-Length"] = str(last - first + 1)
    if request.method == "HEAD":
        return Response(status_code=status, media_type=content_type, headers=headers)
    return StreamingResponse(
        answer.read(first, last), status_code=status, media_type=content_type, headers=headers
    )
