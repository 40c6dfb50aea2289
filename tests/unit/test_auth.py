"""Bearer tokens: clock leeway, claim limits, audiences, and a 401 that says what to check."""

from __future__ import annotations

import time

import jwt
import pytest

from export_center.auth import (
    APP_CODE_MAX_LENGTH,
    TENANT_ID_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
    decode_token,
    issue_token,
)
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


# -- identity claims longer than their columns


@pytest.mark.parametrize(
    ("claim", "limit"),
    [("sub", USER_ID_MAX_LENGTH), ("tenant", TENANT_ID_MAX_LENGTH), ("app", APP_CODE_MAX_LENGTH)],
)
def test_a_claim_longer_than_its_column_is_a_401_naming_it(claim, limit):
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, token(**{claim: "x" * (limit + 1)}))
    assert (error.value.code, error.value.field, error.value.status) == (
        "TOKEN_CLAIM_TOO_LONG",
        claim,
        401,
    )
    assert f"{limit + 1} characters" in error.value.message
    assert f"at most {limit}" in error.value.message


@pytest.mark.parametrize("char", ["u", "用", "😀"])
def test_the_longest_claims_are_counted_in_characters_and_accepted(char):
    user, tenant = char * USER_ID_MAX_LENGTH, char * TENANT_ID_MAX_LENGTH
    identity = decode_token(SECRET, token(sub=user, tenant=tenant))
    assert (identity.user, identity.tenant) == (user, tenant)
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, token(sub=user + char))
    assert error.value.code == "TOKEN_CLAIM_TOO_LONG"


def test_the_columns_are_as_wide_as_the_claim_limits():
    from export_center.models import ExportAudit, ExportRequestKey, ExportTask
    from providers.sdk import BatchRequest

    tasks = ExportTask.__table__.c
    keys = ExportRequestKey.__table__.c
    assert tasks.requested_by.type.length == keys.requested_by.type.length == USER_ID_MAX_LENGTH
    assert tasks.tenant_id.type.length == keys.tenant_id.type.length == TENANT_ID_MAX_LENGTH
    assert ExportAudit.__table__.c.tenant_id.type.length == TENANT_ID_MAX_LENGTH
    assert tasks.app_code.type.length == APP_CODE_MAX_LENGTH
    # The provider SDK accepts what the export center sends.
    fields = BatchRequest.model_fields
    limits = {
        name: next(m.max_length for m in fields[name].metadata if hasattr(m, "max_length"))
        for name in ("requestedBy", "tenantId", "appCode")
    }
    assert limits == {
        "requestedBy": USER_ID_MAX_LENGTH,
        "tenantId": TENANT_ID_MAX_LENGTH,
        "appCode": APP_CODE_MAX_LENGTH,
    }


def test_a_claim_no_database_can_store_is_refused():
    forged = token(sub="alice\ud800")  # a lone surrogate: JSON allows it, UTF-8 does not
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, forged)
    assert (error.value.code, error.value.field) == ("TOKEN_INVALID", "sub")


# -- audiences


def test_without_a_configured_audience_a_token_with_aud_is_refused_and_says_what_to_set():
    for aud in ("account", ["account", "export-center"]):
        with pytest.raises(Unauthorized) as error:
            decode_token(SECRET, token(aud=aud))
        assert (error.value.code, error.value.field) == ("TOKEN_WRONG_AUDIENCE", "aud")
        assert "EXPORT_CENTER_API__JWT_AUDIENCE" in error.value.message
        assert "account" in error.value.message
    assert decode_token(SECRET, token()).user == "alice"  # no aud, none configured


@pytest.mark.parametrize(
    "aud", ["export-center", ["account", "export-center"], ["https://exports.example.com"]]
)
def test_a_token_naming_an_accepted_audience_is_accepted(aud):
    accepted = ["export-center", "https://exports.example.com"]
    assert decode_token(SECRET, token(aud=aud), audience=accepted).user == "alice"


@pytest.mark.parametrize(
    ("aud", "fragment"),
    [(None, "no aud claim"), ("account", "meant for the audience 'account'"), ([], "no aud")],
)
def test_with_a_configured_audience_it_is_required_and_must_match(aud, fragment):
    claims = {} if aud is None else {"aud": aud}
    with pytest.raises(Unauthorized) as error:
        decode_token(SECRET, token(**claims), audience=["export-center"])
    assert (error.value.code, error.value.field) == ("TOKEN_WRONG_AUDIENCE", "aud")
    assert fragment in error.value.message and "'export-center'" in error.value.message


def test_issued_tokens_carry_the_configured_audience():
    one = issue_token(SECRET, user="alice", tenant="acme", audience=["export-center"])
    assert jwt.decode(one, options={"verify_signature": False})["aud"] == "export-center"
    assert decode_token(SECRET, one, audience=["export-center"]).user == "alice"
    two = issue_token(SECRET, user="alice", tenant="acme", audience=["a", "b"])
    assert decode_token(SECRET, two, audience=["b"]).user == "alice"
    plain = issue_token(SECRET, user="alice", tenant="acme")
    assert "aud" not in jwt.decode(plain, options={"verify_signature": False})
