"""Identifiers compare byte for byte on every database: tenant isolation under MySQL collations.

The MariaDB half runs on a database whose default collation is ``utf8mb4_unicode_ci``
(case-insensitive, PAD SPACE, accent- and width-folding): the default of many MySQL
installations, under which ``acme`` and ``ACME `` are one value. Every identity and key
column must still compare exactly, and every route must apply one visibility rule.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select, text

from export_center.access import Scope
from export_center.db import db_now, make_engine
from export_center.links import sign_download
from export_center.models import ExportOutbox, ExportTask, ExportTaskGuard
from export_center.runtime import upgrade_database
from tests.conftest import _fresh_mariadb
from tests.support.helpers import create, wait_state
from tests.support.rows import task_row

T = ExportTask.__table__
O = ExportOutbox.__table__  # noqa: E741
G = ExportTaskGuard.__table__

NFD = unicodedata.normalize("NFD", "é")
SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}


def variants(value: str) -> dict[str, str]:
    """Values a case-insensitive, PAD SPACE, accent-folding collation calls equal."""
    out = {
        "upper": value.upper(),
        "title": value[:1].upper() + value[1:],
        "trailing space": value + " ",
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value),
    }
    if "é" in value:
        out["NFD"] = value.replace("é", NFD)
        out["no accent"] = value.replace("é", "e")
    return {kind: v for kind, v in out.items() if v != value}


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database; on MariaDB its default collation is ``utf8mb4_unicode_ci``."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'export-center.db'}"
        return
    url, drop = _fresh_mariadb("ci", collation="utf8mb4_unicode_ci")
    engine = make_engine(url)
    with engine.connect() as conn:
        # The setup reproduces the danger: the database's own comparisons fold case and
        # ignore trailing spaces.
        assert conn.execute(text("SELECT 'acme' = 'ACME ', 'café' = 'CAFE'")).one() == (1, 1)
    engine.dispose()
    try:
        yield url
    finally:
        drop()


# (table, column, a base value that fits the column)
EXACT_COLUMNS = [
    (T, "task_no", "exp_01J8Z4K2AB0000000000000c"),
    (T, "export_type", "orders_é"),
    (T, "parameters_hash", "abcdef0123"),
    (T, "request_id", "key-café"),
    (T, "tenant_id", "acme-café"),
    (T, "app_code", "platform"),
    (T, "requested_by", "alice-é"),
    (T, "lease_owner", "ec-host/ab12"),
    (T, "object_key", "exports/2026/12/exp_x/abc.csv"),
    (T, "trace_id", "trace-abc"),
    (O, "event_id", "evt-abc-é"),
    (O, "message_key", "exp_01j8z4k2ab"),
    (O, "lease_owner", "ec-pub/cd34"),
]


def test_every_identity_column_compares_byte_for_byte(db_url):
    engine = make_engine(db_url)
    upgrade_database(engine)
    values = {(table.name, column): value for table, column, value in EXACT_COLUMNS}
    task = {column: value for (table, column), value in values.items() if table == T.name}
    with engine.begin() as conn:
        task_id = conn.execute(
            insert(T).values(**task_row(status="RUNNING", phase="fetch", attempt_count=1, **task))
        ).inserted_primary_key[0]
        conn.execute(
            insert(O).values(
                task_id=task_id,
                dispatch_version=1,
                topic="t",
                tag="EXPORT_TASK",
                payload_json="{}",
                status="CLAIMED",
                attempt_count=1,
                next_retry_at=db_now(),
                created_at=db_now(),
                updated_at=db_now(),
                **{c: v for (t, c), v in values.items() if t == O.name},
            )
        )
    checked = 0
    with engine.connect() as conn:
        for table, column, value in [*EXACT_COLUMNS, (G, "id", "GLOBAL_CREATE")]:
            col = table.c[column]
            count = select(func.count()).select_from(table)
            assert conn.execute(count.where(col == value)).scalar() == 1, (column, value)
            for kind, variant in variants(value).items():
                found = conn.execute(count.where(col == variant)).scalar()
                assert found == 0, f"{table.name}.{column}: {kind} variant {variant!r} matched"
                checked += 1
    engine.dispose()
    assert checked >= 4 * (len(EXACT_COLUMNS) + 1)


def test_idempotency_keys_differ_by_case_space_and_normalization(stack):
    alice = stack.client("alice")
    keys = ["Key-x", "key-x", "Key-x ", "Key-é", f"Key-{NFD}"]
    ids = []
    for month, key in enumerate(keys, start=1):
        # Different months: the same export within 60 s would be a duplicate instead.
        days = {"from": f"1995-0{month}-01", "to": f"1995-0{month}-28"}
        answer = create(alice, "csv", requestId=key, parameters=days)
        assert answer.status_code == 202, (key, answer.text)
        ids.append(answer.json()["taskId"])
    assert len(set(ids)) == len(keys)
    again = create(
        alice, "csv", requestId="Key-x", parameters={"from": "1995-01-01", "to": "1995-01-28"}
    )
    assert again.status_code == 200 and again.json()["taskId"] == ids[0]
    assert again.headers["idempotent-replayed"] == "true"
    other = alice.post(
        "/api/v1/exports",
        json={"exportType": "ORDERS", "format": "xlsx", "parameters": {}},
        headers={"Idempotency-Key": "KEY-X"},
    )
    assert other.status_code == 202 and other.json()["taskId"] not in ids
    for task_id in ids:
        wait_state(alice, task_id)


def _routes_answer_as_missing(client, task_id: str) -> None:
    """Every route answers this caller as if the task did not exist."""
    assert [t["taskId"] for t in client.get("/api/v1/exports").json()["items"]] == []
    for method, path in (
        ("GET", f"/api/v1/exports/{task_id}"),
        ("GET", f"/api/v1/exports/{task_id}/download"),
        ("POST", f"/api/v1/exports/{task_id}/cancel"),
        ("POST", f"/api/v1/exports/{task_id}/retry"),
        ("GET", f"/api/orders/export/{task_id}"),
    ):
        answer = client.request(method, path)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["code"] == "TASK_NOT_FOUND"


def test_tenant_app_and_owner_variants_see_nothing(stack):
    alice = stack.client("alice", tenant="acme-café")
    detail = wait_state(
        alice,
        create(alice, "csv", parameters={"from": "1995-09-01", "to": "1995-09-30"}).json()[
            "taskId"
        ],
    )
    assert detail["state"] == "succeeded"
    task_id = detail["taskId"]
    everything = ["platform:download:all", "platform:export:admin", "export:orders:create"]
    for tenant in variants("acme-café").values():
        admin = stack.client("root", tenant=tenant, perms=everything)
        _routes_answer_as_missing(admin, task_id)
    for kind, app in variants("PLATFORM").items():
        if kind == "upper":
            continue
        # An app claim other than exactly PLATFORM or MERCHANT is refused outright.
        refused = stack.client("alice", tenant="acme-café", app_code=app).get("/api/v1/exports")
        assert refused.status_code == 401, (kind, refused.text)
        assert refused.json()["code"] == "TOKEN_INVALID"
    for user in variants("alice").values():
        _routes_answer_as_missing(stack.client(user, tenant="acme-café"), task_id)
    # The exact tenant-wide admin sees it and its link serves the file (the control).
    admin = stack.client("root", tenant="acme-café", perms=everything)
    listed = admin.get("/api/v1/exports").json()["items"]
    assert [t["taskId"] for t in listed] == [task_id]
    served = stack.client(None).get(listed[0]["downloadUrl"])
    assert served.status_code == 200 and served.content[:3] == b"\xef\xbb\xbf"


def test_a_signed_link_serves_only_what_its_scope_sees(stack):
    alice = stack.client("alice", tenant="acme")
    detail = wait_state(
        alice,
        create(alice, "csv", parameters={"from": "1995-09-01", "to": "1995-09-30"}).json()[
            "taskId"
        ],
    )
    task_id, link = detail["taskId"], detail["downloadUrl"]
    assert "tenant=acme" in link and "app=PLATFORM" in link and "scope=own" in link
    anonymous = stack.client(None)
    assert anonymous.get(link).status_code == 200
    # Every signed field is bound: changing one breaks the signature.
    for old, new in (
        ("tenant=acme", "tenant=ACME"),
        ("tenant=acme", "tenant=acme+"),
        ("app=PLATFORM", "app=MERCHANT"),
        ("scope=own", "scope=all"),
        ("user=alice", "user=Alice"),
    ):
        answer = anonymous.get(link.replace(old, new))
        assert answer.status_code == 403 and answer.json()["code"] == "LINK_INVALID", (old, new)
    # A correctly signed link for a scope that does not see the task serves nothing:
    # the same rule as every route decides, not the signature alone.
    secret = stack.runtime.settings.download_secret
    for scope in (
        Scope(tenant_id="ACME", app_code="PLATFORM", owner=None),
        Scope(tenant_id="acme ", app_code="PLATFORM", owner=None),
        Scope(tenant_id="acme", app_code="MERCHANT", owner=None),
        Scope(tenant_id="acme", app_code="PLATFORM", owner="Alice"),
    ):
        forged = sign_download(secret, task_id, "root", scope, 60)
        answer = anonymous.get(forged)
        assert answer.status_code == 404 and answer.json()["code"] == "TASK_NOT_FOUND", scope
    # A bearer caller cannot use a link issued to someone else, even of the same name
    # in another tenant.
    refused = stack.client("alice", tenant="ACME").get(link)
    assert refused.status_code == 403 and refused.json()["code"] == "LINK_NOT_YOURS"
