"""Signed links carry an id and an issue time under their signature; links signed
before links had ids still verify (without an id); any change is LINK_INVALID."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qs, urlsplit

import pytest

from export_center.access import Scope
from export_center.errors import Forbidden
from export_center.link_limits import LinkLimits, file_rules, link_ttl
from export_center.links import is_link_id, is_link_of, new_link_id, sign_download, verify_download

SECRET = "s" * 32
SCOPE = Scope(tenant_id="t1", app_code="PLATFORM", owner="alice")
NOW = 1_800_000_000.0


def _fields(path: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(path).query).items()}


def _verify(fields: dict[str, str], now: float = NOW + 1) -> object:
    return verify_download(
        SECRET,
        "exp_1",
        user=fields["user"],
        tenant=fields["tenant"],
        app=fields["app"],
        scope=fields["scope"],
        expires=fields["expires"],
        signature=fields["signature"],
        link=fields.get("link"),
        issued=fields.get("issued"),
        now=now,
    )


def test_a_link_carries_a_signed_id_and_issue_time() -> None:
    fields = _fields(sign_download(SECRET, "exp_1", "alice", SCOPE, 60, now=NOW))
    assert is_link_id(fields["link"]) and fields["issued"] == str(int(NOW * 1000))
    grant = _verify(fields)
    assert (grant.link_id, grant.issued) == (fields["link"], int(NOW * 1000))  # type: ignore[attr-defined]
    other = _fields(sign_download(SECRET, "exp_1", "alice", SCOPE, 60, now=NOW))
    assert other["link"] != fields["link"]
    for key, value in (("link", "0" * 16), ("issued", "1"), ("expires", str(int(NOW) + 61))):
        with pytest.raises(Forbidden) as caught:
            _verify({**fields, key: value})
        assert caught.value.code == "LINK_INVALID"
    for dropped in ("link", "issued"):
        with pytest.raises(Forbidden):
            _verify({k: v for k, v in fields.items() if k != dropped})


def test_a_link_id_is_bound_to_its_task_and_secret() -> None:
    ids = {new_link_id(SECRET, "exp_1") for _ in range(200)}
    assert len(ids) == 200 and all(is_link_id(i) for i in ids)
    assert all(is_link_of(SECRET, "exp_1", i) for i in ids)
    signed = _fields(sign_download(SECRET, "exp_1", "alice", SCOPE, 60, now=NOW))["link"]
    assert is_link_of(SECRET, "exp_1", signed)
    # Another task, another secret, a changed digit, a made-up or malformed id: no.
    assert sum(is_link_of(SECRET, "exp_2", i) for i in ids) <= 1  # 32-bit tag
    assert not any(is_link_of("t" * 32, "exp_1", i) for i in ids)
    flipped = signed[:-1] + ("0" if signed[-1] != "0" else "1")
    for bad in (flipped, "0123456789abcdef", "", "XYZ", signed.upper()):
        assert not is_link_of(SECRET, "exp_1", bad)


def test_a_link_signed_before_links_had_ids_verifies_without_an_id() -> None:
    expires = str(int(NOW) + 60)
    message = "\n".join(["download-v2", "exp_1", "alice", "t1", "PLATFORM", "own", expires])
    signature = hmac.new(SECRET.encode(), message.encode(), hashlib.sha256).hexdigest()
    fields = {"user": "alice", "tenant": "t1", "app": "PLATFORM", "scope": "own"}
    grant = _verify({**fields, "expires": expires, "signature": signature})
    assert (grant.link_id, grant.issued) == (None, None)  # type: ignore[attr-defined]


def test_registry_link_limits_are_checked_and_cut_the_link_lifetime() -> None:
    rules = file_rules("ORDERS", {"links": {"max_uses": 3, "minutes": 30}, "trace_footer": True})
    assert rules.links == LinkLimits(max_uses=3, minutes=30) and rules.trace_footer
    assert link_ttl(86400, type("T", (), {"files": rules})()) == 1800
    assert link_ttl(600, type("T", (), {"files": rules})()) == 600
    assert link_ttl(600, None) == 600
    for bad in (
        {"links": {"max_uses": 0}},
        {"links": {"uses": 1}},
        {"links": 3},
        {"trace_footer": "yes"},
    ):
        with pytest.raises(ValueError, match="ORDERS"):
            file_rules("ORDERS", bad)
