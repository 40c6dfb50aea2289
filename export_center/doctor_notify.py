"""The doctor's checks of the notification channels an operator configured.

* ``smtp``: when ``EXPORT_CENTER_NOTIFY__SMTP_HOST`` is set, one SMTP session as a
  delivery opens it (connect, EHLO, STARTTLS or TLS with the configured CA, login),
  then ``MAIL FROM`` the configured sender, RSET and QUIT: no mail is sent. A refusal
  names what to fix (host and port, TLS, the CA file, the login, the sender).
* ``robot {name}``: each chat robot's webhook host accepts a TCP connection (3 s); no
  message is posted, so a group is never disturbed by a check.

Nothing is checked (and nothing reported) for a channel that is not configured.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from urllib.parse import urlsplit

from export_center.doctor_check import Check
from export_center.notify.channels.email import EmailChannel
from export_center.settings_notify import NotifySettings

__all__ = ["notify_checks"]

#: Seconds a robot host has to accept a connection.
ROBOT_CONNECT_SECONDS = 3.0


def notify_checks(settings: NotifySettings) -> list[Check]:
    """The ``smtp`` check (when e-mail is configured) and one ``robot {name}`` check per
    configured robot, in name order."""
    checks = [] if not settings.smtp_host else [_smtp(settings)]
    return checks + [_robot(name, settings.robots[name].url) for name in sorted(settings.robots)]


def _smtp(settings: NotifySettings) -> Check:
    where = f"{settings.smtp_host}:{settings.smtp_port}"
    try:
        EmailChannel(settings).verify()
    except smtplib.SMTPAuthenticationError as exc:
        return Check(
            "smtp",
            False,
            f"{where} refused the login ({exc.smtp_code}); fix EXPORT_CENTER_NOTIFY__SMTP_USERNAME "
            "and EXPORT_CENTER_NOTIFY__SMTP_PASSWORD",
        )
    except smtplib.SMTPSenderRefused as exc:
        said = (
            exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else ""
        )
        return Check(
            "smtp",
            False,
            f"{where} refused the sender {settings.mail_from} ({exc.smtp_code} {said.strip()}); "
            "set EXPORT_CENTER_NOTIFY__SMTP_USERNAME and _PASSWORD if it needs a login, or fix "
            "EXPORT_CENTER_NOTIFY__MAIL_FROM",
        )
    except smtplib.SMTPNotSupportedError as exc:
        return Check(
            "smtp",
            False,
            f"{where} does not offer what the settings ask ({exc}); set "
            "EXPORT_CENTER_NOTIFY__SMTP_TLS (none, starttls, tls) to what the server speaks",
        )
    except ssl.SSLError as exc:
        return Check(
            "smtp",
            False,
            f"TLS with {where} failed ({exc.reason or exc}); check EXPORT_CENTER_NOTIFY__SMTP_TLS "
            "and EXPORT_CENTER_NOTIFY__SMTP_CA_FILE",
        )
    except (smtplib.SMTPException, OSError) as exc:
        return Check(
            "smtp",
            False,
            f"the SMTP server at {where} does not answer ({type(exc).__name__}: {exc}); start "
            "it or fix EXPORT_CENTER_NOTIFY__SMTP_HOST and EXPORT_CENTER_NOTIFY__SMTP_PORT",
        )
    login = f", login {settings.smtp_username}" if settings.smtp_username else ""
    return Check("smtp", True, f"{where} ({settings.smtp_tls}{login}) takes a session")


def _robot(name: str, url: str) -> Check:
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((host, port), timeout=ROBOT_CONNECT_SECONDS):
            pass
    except (OSError, ValueError) as exc:
        return Check(
            f"robot {name}",
            False,
            f"{host or url} does not accept connections ({exc}); check the robot's url in "
            "EXPORT_CENTER_NOTIFY__ROBOTS and the network path to it",
        )
    return Check(f"robot {name}", True, f"{host}:{port} accepts connections (nothing posted)")
