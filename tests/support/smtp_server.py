"""A real SMTP server on loopback (aiosmtpd) that keeps what it accepts, and a
self-signed certificate for its TLS."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from export_center.embedded import free_port


@dataclass
class Mailbox:
    """The aiosmtpd handler: RCPT ``nobody@...`` is refused for good (550), ``busy@...``
    for now (451); everything else is accepted and kept in ``mails``."""

    mails: list[Envelope] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)

    async def handle_RCPT(  # noqa: N802 (aiosmtpd's hook name)
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if address.startswith("nobody@"):
            return "550 5.1.1 <" + address + ">: mailbox unavailable"
        if address.startswith("busy@"):
            return "451 4.3.0 mailbox busy, try later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        self.mails.append(envelope)
        return "250 2.0.0 Message accepted"


class Credentials:
    """An aiosmtpd authenticator that admits one login and password."""

    def __init__(self, mailbox: Mailbox, login: str, password: str) -> None:
        self.mailbox, self.login, self.password = mailbox, login, password

    def __call__(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login, password = data.login.decode(), data.password.decode()
        self.mailbox.logins.append((mechanism, login))
        if (login, password) == (self.login, self.password):
            return AuthResult(success=True, auth_data=data)
        # handled=False: aiosmtpd answers 535 (its default handled=True answers nothing).
        return AuthResult(success=False, handled=False)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The server side TLS context of ``cert``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def start(mailbox: Mailbox, **smtp: Any) -> Controller:
    """An aiosmtpd controller on 127.0.0.1 and a free port, started (``stop()`` it)."""
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port(), **smtp)
    controller.start()
    return controller
