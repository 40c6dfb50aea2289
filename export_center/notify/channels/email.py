"""The e-mail channel: one message over SMTP per notification (stdlib smtplib).

The mail is a ``multipart/alternative`` of text/plain and text/html in the recipient's
language (:mod:`export_center.notify.texts`), with a link to the file and never the
file itself. Headers: ``Message-ID`` ``<{event id}.{recipient hash}@{From domain}>``
(the same on every redelivery to that recipient, so mail clients fold duplicates) and
``X-Export-Center-Event-Id``.

Outcomes:

* recipient domain not in ``notify.email_allowed_domains`` (checked again at send:
  the setting may have changed since the target was stored): ``retry=False``;
* SMTP 250 after DATA: delivered;
* a 5xx refusal of the recipient (RCPT) or of the message (DATA): ``retry=False``;
* any 4xx, any other refusal (sender, login) and every connection or TLS error: retryable.
"""

from __future__ import annotations

import hashlib
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formataddr, formatdate

from export_center.notify.channels.base import Message, Outcome
from export_center.notify.texts import compose, render_html, render_plain
from export_center.settings_notify import NotifySettings

__all__ = ["EmailChannel"]


def _domain(address: str) -> str:
    return address.rpartition("@")[2].strip().lower()


class EmailChannel:
    """Sends notifications as e-mail through ``notify.smtp_host``.

    Args:
        settings: the ``notify`` settings: ``smtp_host``, ``smtp_port``, ``smtp_tls``
            (``none``, ``starttls``, ``tls``), ``smtp_ca_file``, ``smtp_username``,
            ``smtp_password``, ``mail_from``, ``email_allowed_domains`` and
            ``send_timeout_seconds`` (one timeout for connect and each reply).
    """

    name = "email"

    def __init__(self, settings: NotifySettings) -> None:
        if not settings.smtp_host:
            raise ValueError("the e-mail channel needs notify.smtp_host")
        self._settings = settings
        self._host = settings.smtp_host

    def _context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self._settings.smtp_ca_file)

    def build(self, target: str, message: Message) -> EmailMessage:
        """The mail ``send`` would send to ``target`` (subject and bodies in
        ``message.language``)."""
        text = compose(message)
        mail = EmailMessage()
        sender = self._settings.mail_from
        display = "下载中心" if text.language == "zh" else "Export Center"
        mail["From"] = formataddr((display, sender))
        mail["To"] = target
        mail["Subject"] = text.title
        mail["Date"] = formatdate(message.created_at.timestamp(), usegmt=True)
        digest = hashlib.sha256(target.strip().lower().encode("utf-8")).hexdigest()[:12]
        mail["Message-ID"] = f"<{message.event_id}.{digest}@{_domain(sender) or 'localhost'}>"
        mail["X-Export-Center-Event-Id"] = message.event_id
        mail["Auto-Submitted"] = "auto-generated"
        mail["Content-Language"] = "zh-CN" if text.language == "zh" else "en"
        mail.set_content(render_plain(text))
        mail.add_alternative(render_html(text), subtype="html")
        return mail

    def _connect(self) -> smtplib.SMTP:
        s = self._settings
        timeout = s.send_timeout_seconds
        smtp: smtplib.SMTP
        if s.smtp_tls == "tls":
            smtp = smtplib.SMTP_SSL(
                self._host, s.smtp_port, timeout=timeout, context=self._context()
            )
        else:
            smtp = smtplib.SMTP(self._host, s.smtp_port, timeout=timeout)
        try:
            smtp.ehlo()
            if s.smtp_tls == "starttls":
                smtp.starttls(context=self._context())
                smtp.ehlo()
            if s.smtp_username:
                password = s.smtp_password.get_secret_value() if s.smtp_password else ""
                smtp.login(s.smtp_username, password)
        except BaseException:
            smtp.close()
            raise
        return smtp

    def verify(self) -> None:
        """Open a session as :meth:`send` does (connect, EHLO, STARTTLS or TLS, login),
        offer the sender (``MAIL FROM``), then RSET and QUIT: nothing is sent.

        Raises:
            smtplib.SMTPSenderRefused: the server refused ``mail_from`` (often: a login
                is required).
            smtplib.SMTPException, OSError, ssl.SSLError: what else the session met.
        """
        smtp = self._connect()
        try:
            code, reply = smtp.mail(self._settings.mail_from)
            if code != 250:
                raise smtplib.SMTPSenderRefused(code, reply, self._settings.mail_from)
            smtp.rset()
        finally:
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()

    def send(self, target: str, message: Message) -> Outcome:
        """Mail ``message`` to the address ``target`` once (rules in the module
        docstring); never raises for a failed delivery."""
        allowed = {d.strip().lower() for d in self._settings.email_allowed_domains}
        if "@" not in target or _domain(target) not in allowed:
            return Outcome(
                False, error=f"recipient domain {_domain(target)!r} is not allowed", retry=False
            )
        try:
            mail = self.build(target, message)
            smtp = self._connect()
            try:
                smtp.send_message(mail, from_addr=self._settings.mail_from, to_addrs=[target])
            finally:
                try:
                    smtp.quit()
                except (smtplib.SMTPException, OSError):
                    smtp.close()
        except smtplib.SMTPRecipientsRefused as exc:
            code, reply = next(iter(exc.recipients.values()), (0, b""))
            return self._refused(code, reply, permanent_5xx=True)
        except smtplib.SMTPDataError as exc:
            return self._refused(exc.smtp_code, exc.smtp_error, permanent_5xx=True)
        except smtplib.SMTPResponseException as exc:
            return self._refused(exc.smtp_code, exc.smtp_error, permanent_5xx=False)
        except (smtplib.SMTPException, OSError, ssl.SSLError) as exc:
            return Outcome(False, error=f"SMTP {self._host}: {type(exc).__name__}: {exc}"[:300])
        return Outcome(True, status_code=250)

    def _refused(self, code: int, reply: bytes | str, *, permanent_5xx: bool) -> Outcome:
        said = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
        return Outcome(
            False,
            status_code=code,
            error=f"SMTP {code} {' '.join(said.split())}"[:300],
            retry=not (permanent_5xx and 500 <= code < 600),
        )
