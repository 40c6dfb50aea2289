"""Bearer tokens: clock leeway, and a 401 that says what to check."""

from __future__ import annotations

import time

import jwt
import pytest

from export_center.auth import decode_token, issue_token
from export_center.errors import Unauthorized

SECRET = "s" * 40


def token(**claims: object) -> str:
    now = int(time.time())
    body = {"sub": "alice", "tenant": "acme", "iat": now, "exp": now + 600, **claims}
    return jwt.encode(body, SECRET, algorithm="HS256")


@pytest.mark.parametrize("claim", ["iat", "nbf"])
def test_a_token_from_a_clock_a_few_seconds_ahead_is_accepted(claim):
    ahead = int(time.time()) + 5
    assert decode_token(SECRET, token(**{claim: ahead})).user == "alice"
    assert decode_token(SECRET, token(**{claim: ahead + 20})).tenant == "acme"


@pytest.mark.parametrize("claim", ["iat", "nbf"])
def test_beyond_the_leeway_the_401_names_the_clock(claim):
    ahead = int(time.time()) + 120
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, token(**{claim: ahead}))
    assert error.value.code == "TOKEN_NOT_YET_VALID"
    assert "clock" in error.value.message
    # The leeway is a setting: 0 refuses even 5 s of skew, 300 accepts 120 s.
    with pytest.raises(Unauthorized):
        decode_token(SECRET, token(**{claim: int(time.time()) + 5}), leeway_seconds=0)
    assert decode_token(SECRET, token(**{claim: ahead}), leeway_seconds=300).user == "alice"


def test_expiry_keeps_its_meaning_within_the_leeway():
    just = int(time.time()) - 10
    assert decode_token(SECRET, token(exp=just)).user == "alice"
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, token(exp=int(time.time()) - 40))
    assert error.value.code == "TOKEN_EXPIRED"


def test_a_token_of_another_installation_says_which_key_to_use():
    other = issue_token("o" * 40, user="alice", tenant="acme")
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, other)
    assert error.value.code == "TOKEN_WRONG_KEY"
    assert "EXPORT_CENTER_DATA_DIR" in error.value.message
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, "not.a.jwt")
    assert error.value.code == "TOKEN_INVALID"


@pytest.mark.parametrize("exp", [10**20, 100_000_000_000_000])
def test_an_expiry_out_of_range_is_a_401_not_a_crash(exp):
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, token(exp=exp))
    assert error.value.code == "TOKEN_INVALID" and "exp" in error.value.message


@pytest.mark.parametrize("app", ["BOGUS", "platform", ""])
def test_an_unknown_app_is_refused(app):
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, token(app=app))
    assert error.value.code == "TOKEN_INVALID"


def test_garbage_is_named_as_not_a_jwt():
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, "garbage.\xb7.x")
    assert error.value.message.startswith("the bearer token is not a JWT")
    assert "codec" not in error.value.message
