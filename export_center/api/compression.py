"""gzip for the page's files and the API's JSON answers (Starlette's ``GZipMiddleware``).

A client that sends ``Accept-Encoding: gzip`` gets answers of 500 bytes or more
compressed (``Content-Encoding: gzip``, ``Vary: Accept-Encoding``), except:

* file downloads (``/api/v1/exports/{taskId}/download``): they answer ``Range`` with
  byte positions of the file, carry its ``Content-Length``, may be hundreds of MB, and
  an XLSX file is a zip already;
* the development sign-in's answer, which holds a bearer token: compressing a secret
  with text an attacker can add to the same answer lets the size leak the secret
  (BREACH);
* the provider routes mounted in the app (``/internal/``): their caller is a worker on
  the same host or network, where deflating every 4 MB page costs the provider and the
  worker more CPU than the bytes saved (the export's bottleneck is that CPU);
* what Starlette never compresses: 206 answers, answers with their own
  ``Content-Encoding``, images, archives, event streams.
"""

from __future__ import annotations

import re

from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Compression", "MINIMUM_SIZE", "UNCOMPRESSED_PATHS"]

#: Answers smaller than this many bytes travel as they are (gzip would not pay).
MINIMUM_SIZE = 500
#: Paths whose answers are never compressed (module docstring).
UNCOMPRESSED_PATHS = re.compile(
    r"^/api/v1/exports/[^/]+/download$|^/api/v1/dev/sign-in$|^/internal/"
)


class Compression:
    """``GZipMiddleware`` (zlib level 6) for every path but :data:`UNCOMPRESSED_PATHS`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=MINIMUM_SIZE, compresslevel=6)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not UNCOMPRESSED_PATHS.match(str(scope.get("path", ""))):
            await self.gzip(scope, receive, send)
            return
        await self.app(scope, receive, send)
