"""Host names and origins (DNS rebinding, cross-site requests): the pure rules of
export_center.hosts and export_center.api.guards, and the headers every answer gets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from export_center.api.guards import SecurityHeaders, cross_site_refusal
from export_center.hosts import (
    Authority,
    HostPatterns,
    is_loopback,
    parse_authority,
    pattern_problem,
    same_origin,
)
from export_center.settings import ApiSettings


@pytest.mark.parametrize(
    ("header", "host", "port"),
    [
        ("127.0.0.1:8000", "127.0.0.1", 8000),
        ("LocalHost.", "localhost", None),
        ("localhost.:8000", "localhost", 8000),
        ("[::1]", "::1", None),
        ("[0:0:0:0:0:0:0:1]:8000", "::1", 8000),
        ("Exports.Example.COM", "exports.example.com", None),
        ("exports.example.com.:443", "exports.example.com", 443),
        ("api_1", "api_1", None),  # docker compose service names
    ],
)
def test_host_headers_are_normalized(header, host, port):
    assert parse_authority(header) == Authority(host, port)


@pytest.mark.parametrize(
    "header",
    [
        "",
        " ",
        "a..b",
        ".",
        "127.0.0.1:99999",
        "127.0.0.1:",
        "[::1",
        "::1",  # an IPv6 address needs brackets
        "[::1%25eth0]",
        "user@127.0.0.1",
        "127.0.0.1/x",
        "127.0.0.1 evil",
        "évil.example",
        "[fe80::zz]",
    ],
)
def test_malformed_host_headers_are_refused(header):
    assert parse_authority(header) is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("app.localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),  # the "0.0.0.0 day" trick: not loopback, refused
        ("::", False),
        ("localhost.example.com", False),
        ("127.0.0.1.nip.io", False),
        ("mylocalhost", False),
        ("10.0.0.1", False),
        ("2130706433", False),  # 127.0.0.1 as a number: a name, not an address
        ("127.1", False),
    ],
)
def test_loopback_names_and_addresses(host, loopback):
    authority = parse_authority(host if ":" not in host else f"[{host}]")
    assert authority is not None
    assert is_loopback(authority.host) is loopback


def test_configured_patterns_names_wildcards_addresses_networks():
    patterns = HostPatterns(["exports.example.com", "*.corp.example", "10.1.2.3", "fd00::/8"])
    assert patterns.matches("exports.example.com")
    assert not patterns.matches("evil.exports.example.com")
    assert patterns.matches("a.corp.example") and patterns.matches("b.a.corp.example")
    assert not patterns.matches("corp.example")  # *.domain is the names under it
    assert not patterns.matches("evilcorp.example")
    assert patterns.matches("10.1.2.3") and not patterns.matches("10.1.2.4")
    assert patterns.matches("fd12::1") and not patterns.matches("fe80::1")
    assert patterns.trusts("localhost") and not patterns.trusts("evil.example")
    assert HostPatterns(["*"]).trusts("anything.example")
    assert HostPatterns(["Exports.Example.com."]).matches("exports.example.com")


@pytest.mark.parametrize(
    "pattern",
    [
        "http://exports.example.com",
        "exports.example.com:8000",
        "exports.example.com/path",
        "*example.com",
        "ex*ample.com",
        "*.",
        "*.10.0.0.1",
        "10.0.0.0/33",
        "",
    ],
)
def test_invalid_patterns_are_refused_at_start(pattern):
    assert pattern_problem(pattern) is not None
    with pytest.raises(ValueError, match="allowed_hosts"):
        ApiSettings(allowed_hosts=[pattern])


def test_valid_patterns_are_kept():
    settings = ApiSettings(allowed_hosts=["exports.example.com", "*.example.com", "10.0.0.0/8"])
    assert settings.allowed_hosts == ["exports.example.com", "*.example.com", "10.0.0.0/8"]


HOST = Authority("127.0.0.1", 8000)
NONE = HostPatterns(())


@pytest.mark.parametrize(
    ("origin", "host", "own"),
    [
        ("http://127.0.0.1:8000", HOST, True),
        ("http://127.0.0.1:8001", HOST, False),  # another loopback port: another origin
        ("http://localhost:8000", HOST, False),
        ("http://127.0.0.1", HOST, False),
        ("null", HOST, False),
        ("file://", HOST, False),
        ("http://127.0.0.1:8000/path", HOST, False),
        ("https://exports.example.com", Authority("exports.example.com", None), True),
        # A TLS proxy in front: the browser's https origin, the Host without a port.
        ("https://exports.example.com", Authority("exports.example.com", 443), True),
        ("http://exports.example.com", Authority("exports.example.com", 8080), False),
        ("http://[::1]:8000", Authority("::1", 8000), True),
    ],
)
def test_own_origin(origin, host, own):
    assert same_origin(origin, host, NONE) is own


def test_a_configured_name_is_own_whatever_host_a_proxy_forwards():
    patterns = HostPatterns(["exports.example.com", "127.0.0.1"])
    upstream = Authority("127.0.0.1", 8000)  # nginx's default Host: the upstream address
    assert same_origin("https://exports.example.com", upstream, patterns)
    assert not same_origin("https://evil.example", upstream, patterns)
    # A loopback name in the list never makes another loopback port the same origin.
    assert not same_origin("http://127.0.0.1:9999", upstream, patterns)
    assert not same_origin("https://evil.example", upstream, HostPatterns(["*"]))


def refusal(method: str = "POST", **headers: str | None) -> str | None:
    return cross_site_refusal(
        method=method,
        origin=headers.get("origin"),
        fetch_site=headers.get("site"),
        fetch_mode=headers.get("mode"),
        fetch_dest=headers.get("dest"),
        host=HOST,
        patterns=NONE,
    )


OWN = "http://127.0.0.1:8000"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_unsafe_methods_from_another_site_are_refused(method):
    assert refusal(method, site="cross-site") is not None
    assert refusal(method, site="cross-site", origin="http://evil.example") is not None
    assert refusal(method, origin="http://evil.example") is not None  # no Sec-Fetch-*
    assert refusal(method, origin="null") is not None  # sandboxed frame, file: page
    assert refusal(method, site="same-site", origin="http://127.0.0.1:9000") is not None
    assert refusal(method, site="same-site") is not None
    # Fetch Metadata wins over an Origin that looks like this server's: the same name
    # over plain http is another site (a network attacker's page).
    assert refusal(method, site="cross-site", origin=OWN) is not None
    assert refusal(method, site="same-site", origin=OWN) is not None
    assert refusal(method, site="none", origin="http://evil.example") is not None


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_unsafe_methods_of_the_page_and_of_scripts_are_answered(method):
    assert refusal(method, site="same-origin", origin=OWN) is None
    assert refusal(method, origin=OWN) is None  # a browser without Fetch Metadata
    assert refusal(method) is None  # curl, httpx, the provider client


def test_reads_from_another_site_are_refused_but_links_work():
    assert refusal("GET", site="cross-site", mode="cors", dest="empty") is not None
    assert refusal("GET", site="cross-site", mode="no-cors", dest="image") is not None
    assert refusal("GET", site="cross-site", mode="no-cors", dest="script") is not None
    assert refusal("GET", site="cross-site", mode="navigate", dest="object") is not None
    # A link from another site, a chat or an e-mail opens the page or a download.
    assert refusal("GET", site="cross-site", mode="navigate", dest="document") is None
    assert refusal("HEAD", site="cross-site", mode="navigate", dest="document") is None
    assert refusal("GET", site="same-site", mode="cors", dest="empty") is None
    assert refusal("GET", site="same-origin", mode="cors", dest="empty") is None
    assert refusal("GET", site="none", mode="navigate", dest="document") is None
    assert refusal("GET") is None


def _headers_of(content_type: str, path: str, extra: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The answer headers of a one-route ASGI app behind SecurityHeaders (no I/O)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", content_type.encode()), *extra],
            }
        )
        await send({"type": "http.response.body", "body": b"x"})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "GET", "path": path, "headers": []}
    asyncio.run(SecurityHeaders(app)(scope, receive, send))
    return {k.decode(): v.decode() for k, v in sent[0]["headers"]}


@pytest.mark.parametrize("path", ["/ui/", "/docs", "/api/v1/exports/x/download", "/err"])
def test_every_html_answer_forbids_framing(path):
    headers = _headers_of("text/html; charset=utf-8", path, [])
    assert headers["x-frame-options"] == "DENY"
    assert headers["content-security-policy"] == "frame-ancestors 'none'"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    # A route's own policy is kept, with the frame rule added when it lacks one.
    own = _headers_of("text/html", path, [(b"content-security-policy", b"default-src 'self'")])
    assert own["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"


def test_api_answers_are_not_stored_unless_the_route_says_otherwise():
    assert _headers_of("application/json", "/api/v1/exports", [])["cache-control"] == "no-store"
    assert _headers_of("application/json", "/internal/x", [])["cache-control"] == "no-store"
    kept = _headers_of("text/csv", "/api/v1/x", [(b"cache-control", b"private, max-age=5")])
    assert kept["cache-control"] == "private, max-age=5"
    assert "cache-control" not in _headers_of("text/javascript", "/ui/app.js", [])


@pytest.mark.parametrize("kind", ["application/json", "text/csv; charset=utf-8", "text/javascript"])
def test_no_answer_may_be_framed(kind):
    # A JSON answer in another site's frame (the proxy adds Authorization) shows nothing.
    headers = _headers_of(kind, "/api/v1/exports", [])
    assert headers["x-frame-options"] == "DENY"
    assert headers["content-security-policy"] == "frame-ancestors 'none'"
    assert "referrer-policy" not in headers
