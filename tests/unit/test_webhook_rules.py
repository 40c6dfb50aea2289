"""Webhook URL rules and signatures (no I/O)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from export_center.errors import ValidationFailed
from export_center.notify.signing import sign, signature_header, verify
from export_center.notify.webhooks import check_webhook_url
from export_center.settings_notify import NotifySettings


def settings(*hosts: str, loopback_http: bool = True) -> NotifySettings:
    return NotifySettings(
        webhook_allowed_hosts=list(hosts), webhook_allow_http_loopback=loopback_http
    )


def code_of(url: str, s: NotifySettings) -> str:
    with pytest.raises(ValidationFailed) as caught:
        check_webhook_url(url, s)
    return str(caught.value.code)


def test_a_host_entry_admits_every_port_and_a_host_port_entry_only_its_port():
    s = settings("hooks.example.com", "127.0.0.1:9000")
    assert check_webhook_url("https://hooks.example.com/a", s)
    assert check_webhook_url("https://HOOKS.example.com.:8443/a", s)
    assert check_webhook_url("http://127.0.0.1:9000/a", s)
    assert code_of("http://127.0.0.1:9001/a", s) == "WEBHOOK_URL_NOT_ALLOWED"
    assert code_of("https://sub.hooks.example.com/a", s) == "WEBHOOK_URL_NOT_ALLOWED"


def test_plain_http_only_for_listed_loopback_hosts_while_the_setting_allows_it():
    assert code_of("http://hooks.example.com/a", settings("hooks.example.com")) == (
        "WEBHOOK_HTTPS_REQUIRED"
    )
    off = settings("127.0.0.1", loopback_http=False)
    assert code_of("http://127.0.0.1/a", off) == "WEBHOOK_HTTPS_REQUIRED"
    assert check_webhook_url("https://127.0.0.1/a", off)
    assert code_of("http://localhost/a", settings("127.0.0.1")) == "WEBHOOK_URL_NOT_ALLOWED"


def test_userinfo_and_junk_are_refused():
    s = settings("hooks.example.com")
    for url in (
        "https://a:b@hooks.example.com/",
        "https://hooks.example.com@evil.example.net/",
        "https://hooks.example.com:99999/",
        "mailto:x@hooks.example.com",
        "",
    ):
        assert code_of(url, s) == "INVALID_WEBHOOK_URL", url


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body_one_v1_per_secret():
    body = b'{"id":"e1"}'
    header = signature_header(["new", "old"], body, timestamp=1_700_000_000)
    expected = hmac.new(b"new", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected},v1={sign('old', 1_700_000_000, body)}"
    assert verify("old", header, body, now=1_700_000_100)
    assert not verify("old", header, body, now=1_700_000_301)  # a replay after 5 min
    assert not verify("other", header, body, now=1_700_000_000)
    assert not verify("new", header, body + b" ", now=1_700_000_000)


def test_two_spellings_of_one_receiver_have_one_key() -> None:
    from export_center.notify.webhooks import webhook_url_key as key

    assert key("http://127.0.0.1:08742/q") == key("http://127.0.0.1:8742/q")
    assert key("https://H.example.com/x#part") == key("https://h.example.com:443/x")
    assert key("https://h.example.com") == key("https://h.example.com/")
    assert key("https://h.example.com/x?a=1") != key("https://h.example.com/x?a=2")
    assert key("https://h.example.com/x") != key("http://h.example.com/x")
