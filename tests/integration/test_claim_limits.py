"""Identity claims are refused at authentication when the columns cannot keep them whole.

A ``sub`` of 129 characters, or a tenant of 65, was a 500 on a strict MariaDB and, on a
server without strict mode, an export created under a cut id that its owner never saw
again. The limits are the column widths (auth.USER_ID_MAX_LENGTH, TENANT_ID_MAX_LENGTH);
the longest allowed values work end to end, counted in characters (4-byte emoji too).
Runs on SQLite, on MariaDB, and on MariaDB with ``sql_mode=''`` (the lax server).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from export_center.auth import TENANT_ID_MAX_LENGTH, USER_ID_MAX_LENGTH
from export_center.models import ExportRequestKey, ExportTask
from tests.conftest import _fresh_mariadb
from tests.support.helpers import create, read_csv, wait_state

T = ExportTask.__table__
K = ExportRequestKey.__table__
SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}
LONGEST_USER = "u" + "😀" * (USER_ID_MAX_LENGTH - 2) + "用"
LONGEST_TENANT = "t" + "用" * (TENANT_ID_MAX_LENGTH - 1)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("mariadb", marks=pytest.mark.mariadb),
        pytest.param("mariadb-lax", marks=pytest.mark.mariadb),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLite, a strict MariaDB database, or one whose sessions run ``sql_mode=''``."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'export-center.db'}"
        return
    url, drop = _fresh_mariadb("claims")
    if request.param == "mariadb-lax":
        # PyMySQL runs init_command on every connection: the server keeps its strict
        # default, every session of the export center is lax (it cuts long values).
        lax = make_url(url).update_query_dict({"init_command": "SET SESSION sql_mode=''"})
        url = lax.render_as_string(hide_password=False)
    try:
        yield url
    finally:
        drop()


def _count(stack) -> int:
    with stack.runtime.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(T)).scalar_one())


@pytest.mark.parametrize(
    ("user", "tenant", "claim", "limit"),
    [
        ("u" * (USER_ID_MAX_LENGTH + 1), "acme", "sub", USER_ID_MAX_LENGTH),
        ("😀" * (USER_ID_MAX_LENGTH + 1), "acme", "sub", USER_ID_MAX_LENGTH),
        ("u" * 255, "acme", "sub", USER_ID_MAX_LENGTH),  # what OIDC allows
        ("alice", "t" * (TENANT_ID_MAX_LENGTH + 1), "tenant", TENANT_ID_MAX_LENGTH),
    ],
)
def test_a_claim_longer_than_its_column_is_a_401_on_every_route(
    make_stack, user, tenant, claim, limit
):
    stack = make_stack()
    client = stack.client(user, tenant)
    if stack.settings.resolved_database_url.startswith("mysql"):
        with stack.runtime.engine.connect() as conn:
            mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar_one()
        assert ("STRICT" in mode) is ("init_command" not in stack.settings.database_url)
    answers = [
        create(client, "csv", parameters=SEPTEMBER),
        client.get("/api/v1/exports"),
        client.get("/api/v1/me"),
        client.get("/api/orders/export/exp_01J0000000000000000000000A"),
    ]
    for answer in answers:
        assert answer.status_code == 401, answer.text
        assert answer.json()["code"] == "TOKEN_CLAIM_TOO_LONG"
        assert answer.json()["field"] == claim
        assert f"at most {limit}" in answer.json()["message"]
        assert answer.headers["www-authenticate"].startswith("Bearer")
    assert _count(stack) == 0  # nothing was written, neither whole nor cut


def test_the_longest_claims_work_end_to_end(make_stack):
    stack = make_stack()
    owner = stack.client(LONGEST_USER, LONGEST_TENANT)
    assert len(LONGEST_USER) == USER_ID_MAX_LENGTH and len(LONGEST_TENANT) == TENANT_ID_MAX_LENGTH
    created = create(owner, "csv", parameters=SEPTEMBER, requestId="k" * 128)
    assert created.status_code == 202, created.text
    task_id = created.json()["taskId"]
    done = wait_state(owner, task_id)
    assert done["state"] == "succeeded" and done["processed"] > 0
    listed = owner.get("/api/v1/exports").json()["items"]
    assert [t["taskId"] for t in listed] == [task_id]
    assert owner.get(f"/api/v1/exports/{task_id}").json()["taskId"] == task_id
    assert owner.get("/api/v1/me").json()["user"] == LONGEST_USER
    signed = read_csv(stack.client(None).get(done["downloadUrl"]).content)
    bearer = owner.get(f"/api/v1/exports/{task_id}/download", follow_redirects=True)
    assert bearer.status_code == 200 and read_csv(bearer.content) == signed
    assert len(signed) == done["processed"] + 1  # header + rows
    # Stored whole: the owner and tenant columns hold every character.
    with stack.runtime.engine.connect() as conn:
        row = conn.execute(select(T.c.requested_by, T.c.tenant_id)).one()
        key = conn.execute(select(K.c.requested_by, K.c.tenant_id)).one()
    assert tuple(row) == tuple(key) == (LONGEST_USER, LONGEST_TENANT)
    # A second export, cancelled (written to the audit trail with the caller), and the
    # replayed idempotency key: no 500 anywhere.
    second = create(owner, "csv", parameters={"from": "1995-10-01"}, requestId="k" * 128)
    assert second.status_code in (200, 409), second.text  # same key: replay or conflict
    other = create(owner, "xlsx", parameters={"from": "1995-10-01"})
    assert other.status_code == 202, other.text
    cancelled = owner.post(f"/api/v1/exports/{other.json()['taskId']}/cancel")
    assert cancelled.status_code in (202, 409), cancelled.text
    # Another user of the same tenant, one character shorter, sees none of it.
    neighbour = stack.client(LONGEST_USER[:-1], LONGEST_TENANT)
    assert neighbour.get("/api/v1/exports").json()["items"] == []
    assert neighbour.get(f"/api/v1/exports/{task_id}").status_code == 404
