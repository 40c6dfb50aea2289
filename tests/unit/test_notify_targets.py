"""The ``notify`` targets of a create or a schedule: shape, channels, allowed e-mail
domains, registered robots, events, and the stored form."""

from __future__ import annotations

from typing import Any

import pytest

from export_center.errors import ValidationFailed
from export_center.notify.targets import (
    DEFAULT_EVENTS,
    MAX_TARGETS,
    Target,
    parse_targets,
    targets_from_json,
    targets_json,
)
from export_center.settings_notify import NotifySettings

SETTINGS = NotifySettings(
    smtp_host="127.0.0.1",
    email_allowed_domains=["example.com", "Corp.CN"],
    robots={
        "ops": {"kind": "dingtalk", "url": "https://oapi.dingtalk.com/robot/send?access_token=t"},
        "team": {"kind": "feishu", "url": "https://open.feishu.cn/open-apis/bot/v2/hook/x"},
    },
)


def test_each_channel_parses_with_its_address_and_default_events() -> None:
    targets = parse_targets(
        [
            {"channel": "page"},
            {"channel": "email", "to": "ops@example.com", "events": ["export.failed"]},
            {"channel": "email"},
            {"channel": "dingtalk", "robot": "ops"},
            {"channel": "feishu", "robot": "team", "events": ["export.failed", "export.succeeded"]},
        ],
        SETTINGS,
    )
    assert targets == (
        Target("page", None, DEFAULT_EVENTS),
        Target("email", "ops@example.com", ("export.failed",)),
        Target("email", None, DEFAULT_EVENTS),
        Target("dingtalk", "ops", DEFAULT_EVENTS),
        # Events come back in the canonical order, whatever order they were given in.
        Target("feishu", "team", ("export.succeeded", "export.failed")),
    )
    assert targets_from_json(targets_json(targets)) == targets
    # None is "the defaults"; [] is "tell nobody", stored as such.
    assert parse_targets(None, SETTINGS) is None and targets_json(None) is None
    assert parse_targets([], SETTINGS) == () and targets_json(()) == "[]"
    assert targets_from_json("[]") == () and targets_from_json(None) is None


def test_allowed_domains_compare_without_case_and_exactly() -> None:
    (target,) = parse_targets([{"channel": "email", "to": "Li.Lei@CORP.cn"}], SETTINGS)
    assert target.to == "Li.Lei@CORP.cn"  # the address is kept as given
    with pytest.raises(ValidationFailed) as caught:
        parse_targets([{"channel": "email", "to": "a@mail.example.com"}], SETTINGS)
    assert caught.value.code == "RECIPIENT_NOT_ALLOWED"
    assert caught.value.field == "notify[0].to"
    assert "mail.example.com" in caught.value.message


@pytest.mark.parametrize(
    ("value", "code", "field"),
    [
        ("page", "INVALID_NOTIFY", "notify"),
        ([{"channel": "page"}] * (MAX_TARGETS + 1), "INVALID_NOTIFY", "notify"),
        (["page"], "INVALID_NOTIFY", "notify[0]"),
        ([{"channel": "sms"}], "INVALID_NOTIFY", "notify[0].channel"),
        ([{"channel": "webhook"}], "INVALID_NOTIFY", "notify[0].channel"),
        ([{"channel": "page", "to": "x@example.com"}], "INVALID_NOTIFY", "notify[0]"),
        ([{"channel": "email", "robot": "ops"}], "INVALID_NOTIFY", "notify[0]"),
        ([{"channel": "email", "to": "not an address"}], "INVALID_NOTIFY", "notify[0].to"),
        ([{"channel": "email", "to": "a@@example.com"}], "INVALID_NOTIFY", "notify[0].to"),
        ([{"channel": "email", "to": 7}], "INVALID_NOTIFY", "notify[0].to"),
        ([{"channel": "email", "to": "a@evil.com"}], "RECIPIENT_NOT_ALLOWED", "notify[0].to"),
        ([{"channel": "dingtalk", "robot": "nobody"}], "UNKNOWN_ROBOT", "notify[0].robot"),
        # A robot of another platform is not a robot of this one.
        ([{"channel": "wecom", "robot": "ops"}], "UNKNOWN_ROBOT", "notify[0].robot"),
        ([{"channel": "page", "events": []}], "INVALID_NOTIFY", "notify[0].events"),
        ([{"channel": "page", "events": ["export.done"]}], "INVALID_NOTIFY", "notify[0].events"),
        ([{"channel": "page"}, {"channel": "page"}], "INVALID_NOTIFY", "notify[1]"),
        (
            [
                {"channel": "email", "to": "a@example.com"},
                {"channel": "email", "to": "A@Example.com"},
            ],
            "INVALID_NOTIFY",
            "notify[1]",
        ),
    ],
)
def test_bad_targets_are_refused_with_a_code_and_the_field(
    value: Any, code: str, field: str
) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_targets(value, SETTINGS)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert caught.value.message


def test_email_needs_a_configured_smtp_server() -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_targets([{"channel": "email", "to": "a@example.com"}], NotifySettings())
    assert caught.value.code == "EMAIL_NOT_CONFIGURED"
    assert parse_targets([{"channel": "page"}], NotifySettings()) == (Target("page", None),)
