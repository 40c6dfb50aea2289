"""The webhook channel: signed JSON events POSTed to a tenant's endpoints.

Each delivery is ``POST <endpoint url>`` with the body ``{id, type, createdAt, data}``
(``createdAt`` ISO 8601 UTC) and the headers ``Content-Type: application/json``,
``Export-Center-Event-Id: <id>`` and ``Export-Center-Signature: t=<unix s>,v1=<hex>``
(:mod:`export_center.notify.signing`; one ``v1`` per valid secret, the new one first).
Redirects are not followed; a 2xx answer is delivered, anything else (another status, a
timeout, a refused connection) is retried by the notifier. An endpoint deleted or
disabled since the event was written, or whose URL the allow-list no longer admits, is
not called: the row ends dead (``retry=False``).

URL rules (:func:`check_webhook_url`, at create, update and every send): ``https://``,
or ``http://`` for a loopback host when ``notify.webhook_allow_http_loopback``; no user
info; the host must be listed in ``notify.webhook_allowed_hosts``, where an entry
``host`` admits that host on any port and ``host:port`` only that port. Names are not
resolved (a listed name is trusted as the operator listed it).
"""

from __future__ import annotations

import json
from datetime import UTC
from urllib.parse import urlsplit

import httpx
from sqlalchemy import Engine

from export_center.errors import ValidationFailed
from export_center.hosts import is_loopback, parse_authority
from export_center.notify.channels.base import Message, Outcome
from export_center.notify.signing import EVENT_ID_HEADER, SIGNATURE_HEADER, signature_header
from export_center.repository.webhooks import endpoint_secrets
from export_center.settings_notify import NotifySettings

__all__ = ["WebhookChannel", "check_webhook_url", "event_body"]


def _bad(message: str, code: str = "WEBHOOK_URL_NOT_ALLOWED") -> ValidationFailed:
    return ValidationFailed(message, code=code, field="url")


def check_webhook_url(url: object, settings: NotifySettings) -> str:
    """Check an endpoint URL against the rules in the module docstring.

    Returns:
        The URL as given.

    Raises:
        ValidationFailed: 422 ``INVALID_WEBHOOK_URL`` (not an absolute http(s) URL, user
            info), ``WEBHOOK_HTTPS_REQUIRED`` (plain http to a host that is not an
            allowed loopback host) or ``WEBHOOK_URL_NOT_ALLOWED`` (host not listed).
    """
    if not isinstance(url, str) or len(url) > 2048:
        raise _bad("url must be a string of at most 2048 characters", "INVALID_WEBHOOK_URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _bad(f"{url!r} is not a valid URL", "INVALID_WEBHOOK_URL") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _bad("url must be an absolute https:// URL", "INVALID_WEBHOOK_URL")
    if "@" in parts.netloc:
        raise _bad("url must not carry a user name or password", "INVALID_WEBHOOK_URL")
    authority = parse_authority(parts.netloc)
    if authority is None:
        raise _bad(f"{parts.netloc!r} is not a host name or address", "INVALID_WEBHOOK_URL")
    allowed = False
    for entry in settings.webhook_allowed_hosts:
        listed = parse_authority(entry)
        if listed is not None and listed.host == authority.host:
            allowed = allowed or listed.port is None or listed.port == port
    if not allowed:
        raise _bad(
            f"webhooks may not go to {parts.netloc}: the host is not in "
            "EXPORT_CENTER_NOTIFY__WEBHOOK_ALLOWED_HOSTS"
        )
    if parts.scheme == "http" and not (
        settings.webhook_allow_http_loopback and is_loopback(authority.host)
    ):
        raise _bad(
            "webhook URLs must use https:// (plain http is accepted only for listed "
            "loopback hosts)",
            "WEBHOOK_HTTPS_REQUIRED",
        )
    return url


def webhook_url_key(url: str) -> tuple[str, str, int, str, str]:
    """What makes two endpoint URLs the same receiver: scheme and host without case, the
    port with the scheme's default filled in (``:08742`` is ``:8742``), the path (``/``
    when empty) and the query; the fragment is never sent, so it does not count. A URL
    that does not parse is its own key."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return (url, "", 0, "", "")
    authority = parse_authority(parts.netloc)
    host = authority.host.lower() if authority is not None else parts.netloc.lower()
    scheme = parts.scheme.lower()
    default = 443 if scheme == "https" else 80
    return (scheme, host, port or default, parts.path or "/", parts.query)


def event_body(message: Message) -> bytes:
    """The raw JSON body of a delivery: ``{id, type, createdAt, data}``."""
    created = message.created_at.astimezone(UTC).isoformat(timespec="milliseconds")
    body = {
        "id": message.event_id,
        "type": message.event_type,
        "createdAt": created.replace("+00:00", "Z"),
        "data": dict(message.data),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class WebhookChannel:
    """Delivers to a webhook endpoint (the row's target is the endpoint's public id).

    Args:
        engine: the export center's database (the endpoint's URL and secrets).
        settings: the ``notify`` settings (allow-list, timeout).
        transport: an httpx transport (default: the network).
    """

    name = "webhook"

    def __init__(
        self,
        engine: Engine,
        settings: NotifySettings,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.client = httpx.Client(
            timeout=settings.send_timeout_seconds, follow_redirects=False, transport=transport
        )

    def send(self, target: str, message: Message) -> Outcome:
        """POST the signed event to endpoint ``target`` once (2xx: delivered)."""
        with self.engine.connect() as conn:
            found = endpoint_secrets(conn, target)
        if found is None:
            return Outcome(
                False, error="the endpoint was deleted or disabled", retry=False, dropped=True
            )
        endpoint, keys = found
        try:
            check_webhook_url(endpoint.url, self.settings)
        except ValidationFailed as exc:
            return Outcome(False, error=str(exc), retry=False)
        body = event_body(message)
        headers = {
            "Content-Type": "application/json",
            EVENT_ID_HEADER: message.event_id,
            SIGNATURE_HEADER: signature_header(keys, body),
            "User-Agent": "export-center-webhooks/1",
        }
        try:
            answer = self.client.post(endpoint.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return Outcome(False, error=f"{type(exc).__name__}: {exc}"[:300])
        if 200 <= answer.status_code < 300:
            return Outcome(True, status_code=answer.status_code)
        return Outcome(
            False, status_code=answer.status_code, error=f"answered HTTP {answer.status_code}"
        )

    def close(self) -> None:
        """Close the HTTP client."""
        self.client.close()
