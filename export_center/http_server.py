"""The HTTP server of ``serve``: uvicorn (h11) with a request-receipt deadline and a limit.

uvicorn bounds the time between two requests of a connection (``timeout_keep_alive``)
but not the time a request takes to arrive: its keep-alive timer is reset by every byte
received, so a client that sends one header line every few seconds holds its
connection for ever, and a few hundred of them make ``/healthz`` time out (slowloris).
An ASGI middleware cannot help: the app is called only once the headers are complete.
:class:`BoundedH11Protocol` is uvicorn's h11 protocol with the two limits uvicorn lacks
in this form:

* **Request-receipt deadline** (``api.request_timeout_seconds``, 10 s by default): a
  request's line, headers and body must arrive within that many seconds of its first
  byte (for the first request, of the connection's opening). Then the server answers
  408 ``REQUEST_TIMEOUT`` (when a request had begun and no answer has) and closes the
  connection; a connection that sent nothing is closed without a word, as an idle one.
  The deadline ends once the request is whole: answers, downloads included, take the
  time they need, as long as the client takes their bytes.
* **Send timeout** (``api.send_timeout_seconds``, 60 s by default, nginx's
  ``send_timeout``): an answer whose client takes none of its bytes for that long (the
  socket's buffer stays full: a download opened and never read) has its connection
  closed, so such clients cannot hold connections until the limit below locks everyone
  out. A slow client that keeps reading is never cut.
* **Connection limit** (``api.max_connections``): a request that arrives while more
  connections are open, or more requests in progress, than the limit is answered 503
  ``SERVER_BUSY`` with ``Retry-After: 1`` and its connection closed (uvicorn's own
  ``limit_concurrency`` answers the same rule in plain text).

Both answers are the API's JSON body ``{code, message, field}``. In production a
reverse proxy in front should still bound header and body times and connection counts
itself (docs/operations.md "Start order (production)").
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
import orjson
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from export_center.settings import ApiSettings

__all__ = ["BoundedH11Protocol", "bounded_protocol", "server_config", "server_options"]

log = logging.getLogger(__name__)

#: The client's states in which a request is still arriving (its line and headers, or
#: its body).
_RECEIVING = (h11.IDLE, h11.SEND_BODY)


def _raw_answer(
    status: int, reason: str, code: str, message: str, retry_after: int | None
) -> bytes:
    """A whole HTTP/1.1 answer with a JSON body and ``Connection: close``."""
    body = orjson.dumps({"code": code, "message": message, "field": None})
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        "cache-control: no-store",
    ]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-receipt deadline and a connection limit.

    Use :func:`bounded_protocol` to make a subclass with the two figures; uvicorn makes
    one instance per connection.

    Attributes:
        request_timeout: seconds a request may take to arrive (module docstring).
        max_connections: connections, and requests in progress, served at once.
    """

    request_timeout: float = 10.0
    send_timeout: float = 60.0
    max_connections: int = 500

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None
        # The limit is applied by _limited (a JSON 503) instead of uvicorn's plain text.
        self.limit_concurrency = None
        self.app = self._limited(self.app)

    def _limited(self, app: Any) -> Any:
        async def limited(scope: Any, receive: Any, send: Any) -> None:
            # This request's task and connection are counted already.
            busy = max(len(self.connections), len(self.tasks)) > self.max_connections
            if not busy or scope.get("type") != "http":
                await app(scope, receive, send)
                return
            log.warning("refused a request: %d connections are open", len(self.connections))
            body = orjson.dumps(
                {
                    "code": "SERVER_BUSY",
                    "message": "the server has as many connections as it takes; try again "
                    "in a second",
                    "field": None,
                }
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", b"1"),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

        return limited

    # -- the deadline

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of the connection's next request
        super().data_received(data)
        if self.conn.their_state not in _RECEIVING:
            self._disarm()  # the request is whole (or the connection ends)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._unstall()
        super().connection_lost(exc)

    # -- the send timeout: the transport pauses writing while its buffer is full

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled is None:
            self._stalled = self.loop.call_later(self.send_timeout, self._send_expired)

    def resume_writing(self) -> None:
        self._unstall()
        super().resume_writing()

    def _unstall(self) -> None:
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None

    def _send_expired(self) -> None:
        self._stalled = None
        if self.transport.is_closing():
            return
        log.info(
            "closed a connection to %s: it took no byte of its answer for %g s",
            f"{self.client[0]}:{self.client[1]}" if self.client else "?",
            self.send_timeout,
        )
        self.transport.abort()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state not in _RECEIVING:
            return
        log.info(
            "closed a connection from %s: its request did not arrive within %g s",
            f"{self.client[0]}:{self.client[1]}" if self.client else "?",
            self.request_timeout,
        )
        started = self.conn.their_state is h11.SEND_BODY or bool(self.conn.trailing_data[0])
        # A request begun and not answered is told why; a connection that sent nothing
        # (a browser's preconnected socket) is closed as an idle one is.
        if started and self.conn.our_state is h11.IDLE:
            self.transport.write(
                _raw_answer(
                    408,
                    "Request Timeout",
                    "REQUEST_TIMEOUT",
                    f"the request did not arrive within {self.request_timeout:g} s",
                    None,
                )
            )
        self.transport.close()


def bounded_protocol(
    *, request_timeout: float, max_connections: int, send_timeout: float = 60.0
) -> type[BoundedH11Protocol]:
    """A :class:`BoundedH11Protocol` subclass with these figures, for uvicorn's ``http=``.

    Args:
        request_timeout: seconds a request may take to arrive (> 0).
        max_connections: connections and requests in progress served at once (>= 1).
        send_timeout: seconds an answer may wait for its client to take a byte (> 0).
    """
    return type(
        "BoundedH11Protocol",
        (BoundedH11Protocol,),
        {
            "request_timeout": request_timeout,
            "max_connections": max_connections,
            "send_timeout": send_timeout,
        },
    )


def server_options(api: ApiSettings) -> dict[str, Any]:
    """The uvicorn options every API server of ``serve`` shares, one process or
    ``--workers N``: idle connections kept ``api.keep_alive_seconds``, no WebSocket (the
    API has none), no X-Forwarded-For rewriting, uvicorn's log lines through the
    process's own JSON handler, and 30 s of graceful shutdown."""
    return {
        "ws": "none",
        # X-Forwarded-For is read by the download audit, from trusted proxies only.
        "proxy_headers": False,
        "log_config": None,
        # uvicorn's 5 s equals httpx's pool expiry: a request sent at 5 s of idleness
        # met the server closing the connection ("Server disconnected").
        "timeout_keep_alive": api.keep_alive_seconds,
        "lifespan": "on",
        "timeout_graceful_shutdown": 30,
    }


def server_config(app: Any, *, host: str, port: int, api: ApiSettings) -> uvicorn.Config:
    """uvicorn's configuration of ``serve`` (and of the embedded test servers): h11 with
    the limits of ``api`` (:class:`BoundedH11Protocol`) and :func:`server_options`."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=bounded_protocol(
            request_timeout=api.request_timeout_seconds,
            max_connections=api.max_connections,
            send_timeout=api.send_timeout_seconds,
        ),
        **server_options(api),
    )
