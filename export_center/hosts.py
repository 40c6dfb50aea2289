"""Host names and origins: which names this server answers to, and which origin is its own.

Two rules use this module (:mod:`export_center.api.guards`):

* **Trusted hosts** (DNS rebinding). A page whose name an attacker's DNS rebinds to
  127.0.0.1 reaches a loopback server from the user's browser with a ``Host`` header
  that names the attacker's domain. The server answers only requests whose ``Host`` is
  a loopback name or address, or one of the configured names
  (``EXPORT_CENTER_API__ALLOWED_HOSTS``, plus the host of ``api.public_base_url``).
  Loopback names are ``localhost`` and every name under ``.localhost`` (RFC 6761: they
  resolve to loopback and are never delegated, so no attacker's DNS answers for them);
  loopback addresses are 127.0.0.0/8, ``::1`` and ``::ffff:127.0.0.0/104``.
* **Own origin** (cross-site requests). An ``Origin`` is this server's own when its host
  and port are the request's ``Host`` (a missing port is the scheme's default port), or
  when its host is one of the configured names.

Names compare case-insensitively and without one trailing dot (``LocalHost.`` is
``localhost``); IPv6 addresses compare in their compressed form (``[0:0::1]`` is
``[::1]``). A port never decides whether a host is trusted: behind a proxy the ``Host``
carries the proxy's port.

Configured patterns (:class:`HostPatterns`): an exact name (``exports.example.com``), a
wildcard of the names under a domain (``*.example.com``, not the domain itself), an IP
address (``10.1.2.3``, ``[fd00::1]`` or ``fd00::1``), a network of addresses
(``10.0.0.0/8``: the ``Host`` of Kubernetes probes is the pod's address), or ``*``
(any host: switches the rule off; only behind a proxy that checks ``Host`` itself).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "Authority",
    "HostPatterns",
    "is_loopback",
    "origin_authority",
    "parse_authority",
    "pattern_problem",
    "same_origin",
]

_AUTHORITY = re.compile(
    r"^(?:\[(?P<ipv6>[0-9a-fA-F:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?$"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAPPED_LOOPBACK = ipaddress.ip_network("::ffff:127.0.0.0/104")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Authority:
    """The host and port of a ``Host`` header or an origin, normalized.

    Attributes:
        host: lowercase name without a trailing dot, or an IP address in its standard
            text (IPv6 compressed, without brackets).
        port: the port written, or None when none was.
    """

    host: str
    port: int | None

    @property
    def address(self) -> IpAddress | None:
        """The host as an IP address, or None when it is a name."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None


def parse_authority(value: str) -> Authority | None:
    """Parse ``host[:port]`` as a ``Host`` header carries it (RFC 9110 §7.2).

    Args:
        value: e.g. ``127.0.0.1:8000``, ``[::1]``, ``Exports.Example.COM.``.

    Returns:
        The normalized authority, or None when the value is not a host name, an IPv4
        address or a bracketed IPv6 address, optionally followed by a port 0..65535
        (user info, paths, spaces, empty labels and IPv6 zone ids are refused).
    """
    match = _AUTHORITY.match(value.strip())
    if match is None:
        return None
    port = match["port"]
    if port is not None and int(port) > 65535:
        return None
    if match["ipv6"] is not None:
        try:
            host = str(ipaddress.IPv6Address(match["ipv6"]))
        except ValueError:
            return None
    else:
        name = _name(match["name"])
        if name is None:
            return None
        host = name
    return Authority(host, int(port) if port is not None else None)


def _name(text: str) -> str | None:
    """A host name lowercased, without one trailing dot; None with an empty label."""
    name = text.lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or any(not label for label in name.split(".")):
        return None
    try:  # an IPv4 address in its one standard spelling (never "127.1" or "0x7f.1")
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        return name


def is_loopback(host: str) -> bool:
    """True for ``localhost``, names under ``.localhost``, and loopback addresses.

    Args:
        host: a normalized host (:attr:`Authority.host`).
    """
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or (address.version == 6 and address in _MAPPED_LOOPBACK)


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid allowed-hosts entry, or None when it is."""
    try:
        _compile(pattern)
    except ValueError as exc:
        return str(exc)
    return None


def _compile(pattern: str) -> tuple[str, str | IpNetwork]:
    """``(kind, value)`` of one pattern: ``any``, ``name``, ``suffix`` or ``network``.

    Raises:
        ValueError: the pattern is none of the documented forms.
    """
    text = pattern.strip()
    if text == "*":
        return "any", "*"
    if "/" in text:
        try:
            return "network", ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(f"{pattern!r} is not a network such as 10.0.0.0/8") from None
    if text.startswith("*."):
        suffix = parse_authority(text[2:])
        if suffix is None or suffix.port is not None or suffix.address is not None:
            raise ValueError(f"{pattern!r}: a wildcard names a domain, like *.example.com")
        return "suffix", "." + suffix.host
    authority = parse_authority(text if ":" not in text or text.startswith("[") else f"[{text}]")
    if authority is None or authority.port is not None or "*" in text:
        raise ValueError(
            f"{pattern!r} is not a host name, an IP address, a network or *.domain "
            "(write no scheme, no port and no path)"
        )
    if authority.address is not None:
        return "network", ipaddress.ip_network(authority.address)
    return "name", authority.host


class HostPatterns:
    """The configured names of this server (:func:`pattern_problem` checks each one).

    Args:
        patterns: entries of ``api.allowed_hosts``.

    Raises:
        ValueError: an entry is not a valid pattern.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.any = False
        self._names: set[str] = set()
        self._suffixes: list[str] = []
        self._networks: list[IpNetwork] = []
        for pattern in patterns:
            kind, value = _compile(pattern)
            if kind == "any":
                self.any = True
            elif kind == "name":
                self._names.add(str(value))
            elif kind == "suffix":
                self._suffixes.append(str(value))
            elif not isinstance(value, str):
                self._networks.append(value)

    def matches(self, host: str) -> bool:
        """True when a configured pattern names ``host`` (a normalized host)."""
        if self.any or host in self._names:
            return True
        if any(host.endswith(suffix) for suffix in self._suffixes):
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._networks)

    def trusts(self, host: str) -> bool:
        """True when this server answers to ``host``: loopback, or a configured name."""
        return is_loopback(host) or self.matches(host)


def origin_authority(origin: str) -> tuple[str, Authority] | None:
    """``(scheme, authority)`` of an ``Origin`` header, or None when it is opaque.

    ``null`` (sandboxed frames, ``file:`` pages, some redirects), schemes other than
    http and https, and anything with a path, query or user info are opaque: they are
    never this server's own origin.
    """
    parts = urlsplit(origin.strip())
    if parts.scheme not in _DEFAULT_PORTS or parts.path or parts.query or parts.fragment:
        return None
    if "@" in parts.netloc:
        return None
    authority = parse_authority(parts.netloc)
    return None if authority is None else (parts.scheme, authority)


def same_origin(origin: str, host: Authority, patterns: HostPatterns) -> bool:
    """True when ``origin`` (an ``Origin`` header) is this server's own.

    The rule: the origin's host and port are the request's ``Host`` (either port, when
    missing, is the default port of the origin's scheme: a TLS proxy in front makes the
    scheme the server sees differ from the browser's), or the origin's host is one of
    the configured names of ``patterns`` that is not a loopback one (a proxy that
    rewrites ``Host`` to the upstream's address). A loopback host counts only with the
    request's own port: a page on another loopback port is another origin.
    """
    parsed = origin_authority(origin)
    if parsed is None:
        return False
    scheme, authority = parsed
    if not patterns.any and not is_loopback(authority.host) and patterns.matches(authority.host):
        return True
    default = _DEFAULT_PORTS[scheme]
    return authority.host == host.host and (authority.port or default) == (host.port or default)
