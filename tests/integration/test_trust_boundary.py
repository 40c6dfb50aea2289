"""The trust boundary of the served API, over real HTTP on loopback: trusted Host names
(DNS rebinding), cross-site requests when a proxy adds Authorization, the development
sign-in's same-origin rule, no-store on every answer with a credential or a link, gzip,
the internal provider routes, and where the sample providers are mounted.

SQLite only: every rule here answers before a route reads the database
(test_claim_limits.py and test_database_outage.py cover both databases).
"""

from __future__ import annotations

import gzip
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import func, select, update

from export_center.models import ExportAudit, ExportTask
from providers.sdk import MAX_BATCH_REQUEST_BYTES
from tests.support.cases_provider import CASES_TOKEN
from tests.support.helpers import Stack, create, wait_state

T = ExportTask.__table__
A = ExportAudit.__table__
SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}
ADMIN_PERMS = ["export:orders:create", "platform:export:admin", "platform:download:all"]
BATCHES = "/internal/exports/v1/ORDERS/batches"


@pytest.fixture
def db_url(tmp_path: Path) -> Iterator[str]:
    """SQLite only (module docstring)."""
    yield f"sqlite:///{tmp_path / 'export-center.db'}"


def port_of(stack: Stack) -> int:
    return int(stack.url.rsplit(":", 1)[1])


def raw(stack: Stack, request: bytes) -> bytes:
    """Send ``request`` as it is and read the whole answer (the server closes)."""
    with socket.create_connection(("127.0.0.1", port_of(stack)), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def batch_body(**values: Any) -> bytes:
    body = {
        "taskId": "exp_01J0000000000000000000000A",
        "tenantId": "t1",
        "appCode": "PLATFORM",
        "requestedBy": "alice",
        "dispatchVersion": 1,
        "parameters": {},
        "limit": 10,
        **values,
    }
    return orjson.dumps(body)


@pytest.fixture
def served(make_stack) -> tuple[Stack, str, str]:
    """A stack with the development sign-in on and one succeeded export (id, link)."""
    stack = make_stack(api={"dev_sign_in": True})
    alice = stack.client("alice")
    done = wait_state(alice, create(alice, "csv", parameters=SEPTEMBER).json()["taskId"])
    return stack, done["taskId"], done["downloadUrl"]


# -- trusted Host names (DNS rebinding)


ROUTES = [
    ("GET", "/"),
    ("GET", "/ui"),
    ("GET", "/ui/"),
    ("GET", "/ui/app.js"),
    ("GET", "/docs"),
    ("GET", "/docs-assets/swagger-ui.css"),
    ("GET", "/openapi.json"),
    ("GET", "/healthz"),
    ("HEAD", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/api/v1/me"),
    ("GET", "/api/v1/export-types"),
    ("GET", "/api/v1/exports"),
    ("GET", "/api/v1/exports/{task}"),
    ("GET", "/api/v1/exports/{task}/download"),
    ("GET", "{link}"),
    ("GET", "/api/orders/export/{task}"),
    ("GET", "/api/v1/dev/sign-in"),
    ("POST", "/api/v1/dev/sign-in"),
    ("POST", "/api/v1/exports"),
    ("POST", "/api/v1/exports/{task}/retry"),
    ("POST", "/api/v1/exports/{task}/cancel"),
    ("POST", "/api/v1/admin/registry/reload"),
    ("GET", "/api/v1/admin/overview"),
    ("POST", BATCHES),
    ("GET", "/no/such/path"),
]


def test_every_route_refuses_a_host_that_is_not_one_of_its_names(served):
    stack, task_id, link = served
    admin = stack.client("root", perms=ADMIN_PERMS)
    body = {"user": "ops", "tenant": "t1", "role": "admin"}
    for method, template in ROUTES:
        path = template.format(task=task_id, link=link)
        for host in (f"rebound.example:{port_of(stack)}", "rebound.example", "0.0.0.0"):
            headers = {
                "host": host,
                "origin": f"http://{host}",  # the rebound page is its own origin
                "x-internal-service-token": stack.settings.internal_token,
            }
            answer = admin.request(
                method,
                path,
                headers=headers,
                content=batch_body() if path == BATCHES else orjson.dumps(body),
            )
            assert answer.status_code == 421, (method, path, host, answer.text)
            assert answer.headers["x-content-type-options"] == "nosniff"
            if method != "HEAD":
                assert answer.json()["code"] == "UNTRUSTED_HOST"
                assert "EXPORT_CENTER_API__ALLOWED_HOSTS" in answer.json()["message"]
            assert "location" not in answer.headers and "set-cookie" not in answer.headers
    with stack.runtime.engine.connect() as conn:  # nothing was changed on the way
        assert conn.execute(select(T.c.status)).scalars().all() == ["SUCCEEDED"]
        assert conn.execute(select(func.count()).select_from(A)).scalar_one() == 0


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:{port}",
        "127.0.0.1",
        "127.8.9.10:{port}",
        "localhost:{port}",
        "LOCALHOST.:{port}",
        "localhost",
        "app.localhost:{port}",
        "[::1]:{port}",
        "[0:0:0:0:0:0:0:1]",
    ],
)
def test_loopback_names_and_addresses_are_answered(stack, host):
    answer = stack.client(None).get("/healthz", headers={"host": host.format(port=port_of(stack))})
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("exports.example.com", 200),
        ("Exports.Example.COM.:443", 200),
        ("a.corp.example", 200),
        ("b.a.corp.example:8443", 200),
        ("10.20.30.40:8000", 200),  # a Kubernetes probe: the pod's address
        ("sample.internal", 200),  # the host of public_base_url
        ("corp.example", 421),  # *.corp.example is the names under it only
        ("exports.example.com.evil.example", 421),
        ("evilexports.example.com", 421),
        ("11.0.0.1", 421),
        ("[::]", 421),
        ("127.0.0.1.nip.io", 421),
    ],
)
def test_production_names_come_from_the_setting(make_stack, host, status):
    stack = make_stack(
        api={
            "allowed_hosts": ["exports.example.com", "*.corp.example", "10.0.0.0/8"],
            "public_base_url": "http://sample.internal:8000",
        }
    )
    answer = stack.client(None).get("/healthz", headers={"host": host})
    assert answer.status_code == status, answer.text
    if status == 421:
        assert answer.json()["code"] == "UNTRUSTED_HOST"


def test_a_missing_or_malformed_host_is_a_400(stack):
    # HTTP/1.0 may omit Host; no browser does.
    answer = raw(stack, b"GET /healthz HTTP/1.0\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert orjson.loads(body)["code"] == "HOST_REQUIRED"
    assert raw(stack, b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").startswith(
        b"HTTP/1.1 200"
    )
    for host in ("a..b", "127.0.0.1:99999", "user@127.0.0.1", "[::1", "127.0.0.1 x"):
        answer = stack.client(None).get("/healthz", headers={"host": host})
        assert answer.status_code == 400, host
        assert answer.json()["code"] == "HOST_REQUIRED"
    # Two Host headers: refused (by h11 itself, or by the guard), never answered.
    two = raw(stack, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n")
    assert two.startswith(b"HTTP/1.1 400"), two


# -- cross-site requests (a proxy adds Authorization: the browser's requests are signed in)


def _queued_and_failed(stack: Stack) -> tuple[str, str]:
    alice = stack.client("alice")
    queued = create(alice, "csv", parameters={"from": "1995-10-01"}).json()["taskId"]
    failed = create(alice, "csv", parameters={"from": "1995-11-01"}).json()["taskId"]
    with stack.runtime.engine.begin() as conn:
        conn.execute(update(T).where(T.c.task_no == failed).values(status="FAILED"))
    return queued, failed


FOREIGN = [
    {"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
    {"origin": "http://evil.example"},  # a browser without Fetch Metadata
    {"sec-fetch-site": "cross-site"},
    {"origin": "null", "sec-fetch-site": "cross-site"},  # a sandboxed frame
    {"origin": "null"},
    {"origin": "http://127.0.0.1:1", "sec-fetch-site": "same-site"},  # another port
    {"origin": "http://localhost:{port}", "sec-fetch-site": "cross-site"},
]


@pytest.mark.parametrize("headers", FOREIGN)
def test_a_form_another_site_posts_changes_nothing(make_stack, headers):
    stack = make_stack(consumer={"enabled": False}, api={"dev_sign_in": True})
    queued, failed = _queued_and_failed(stack)
    admin = stack.client("root", perms=ADMIN_PERMS)
    form = {
        "content-type": "application/x-www-form-urlencoded",
        **{k: v.format(port=port_of(stack)) for k, v in headers.items()},
    }
    posts = [
        f"/api/v1/exports/{queued}/cancel",
        f"/api/v1/exports/{failed}/retry",
        "/api/v1/admin/registry/reload",
        f"/api/v1/admin/tasks/{queued}/cancel",
        f"/api/v1/admin/tasks/{failed}/retry",
        "/api/v1/exports",
        "/api/orders/export",
        "/api/v1/dev/sign-in",
    ]
    for path in posts:
        for content in (b"", b"reason=x"):
            answer = admin.post(path, content=content, headers=form)
            assert answer.status_code == 403, (path, answer.text)
            assert answer.json()["code"] == "CROSS_SITE_REQUEST", path
    with stack.runtime.engine.connect() as conn:
        states = dict(conn.execute(select(T.c.task_no, T.c.status)).all())
        audit = conn.execute(select(func.count()).select_from(A)).scalar_one()
    assert states == {queued: "PENDING", failed: "FAILED"} and audit == 0


def test_the_page_itself_and_scripts_still_change_things(make_stack):
    stack = make_stack(consumer={"enabled": False})
    own = {"origin": stack.url, "sec-fetch-site": "same-origin"}
    for headers in (own, {"origin": stack.url}, {}):
        queued, failed = _queued_and_failed(stack)
        alice = stack.client("alice")
        cancelled = alice.post(f"/api/v1/exports/{queued}/cancel", headers=headers)
        assert cancelled.status_code == 202 and cancelled.json()["state"] == "cancelled"
        retried = alice.post(f"/api/v1/exports/{failed}/retry", headers=headers)
        assert retried.status_code == 202, retried.text
    admin = stack.client("root", perms=ADMIN_PERMS)
    assert admin.post("/api/v1/admin/registry/reload", headers=own).status_code == 200


def test_another_site_reads_nothing_but_its_links_open(served):
    stack, task_id, link = served
    alice = stack.client("alice")
    for dest, mode in (("empty", "cors"), ("empty", "no-cors"), ("image", "no-cors")):
        headers = {"sec-fetch-site": "cross-site", "sec-fetch-mode": mode, "sec-fetch-dest": dest}
        for path in ("/api/v1/exports", f"/api/v1/exports/{task_id}", link, "/api/v1/me"):
            answer = alice.get(path, headers=headers)
            assert answer.status_code == 403, (path, answer.text)
            assert answer.json()["code"] == "CROSS_SITE_REQUEST"
            assert task_id not in answer.text
    navigate = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    opened = stack.client(None).get(link, headers={**navigate, "sec-fetch-dest": "document"})
    assert opened.status_code == 200 and opened.content.startswith(b"\xef\xbb\xbf")
    page = stack.client(None).get("/ui/", headers={**navigate, "sec-fetch-dest": "document"})
    assert page.status_code == 200


# -- the development sign-in answers its own page only


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"origin": "{url}"}, 200, None),
        ({"sec-fetch-site": "same-origin"}, 200, None),
        ({"origin": "{url}", "sec-fetch-site": "same-origin"}, 200, None),
        ({}, 403, "SAME_ORIGIN_REQUIRED"),  # proves no origin: curl has export-center token
        ({"sec-fetch-site": "none"}, 403, "SAME_ORIGIN_REQUIRED"),
        ({"origin": "http://localhost:{port}"}, 403, "CROSS_SITE_REQUEST"),
        ({"origin": "http://127.0.0.1:1"}, 403, "CROSS_SITE_REQUEST"),
        ({"origin": "null"}, 403, "CROSS_SITE_REQUEST"),
        ({"sec-fetch-site": "same-site"}, 403, "CROSS_SITE_REQUEST"),
        ({"sec-fetch-site": "cross-site"}, 403, "CROSS_SITE_REQUEST"),
        ({"origin": "{url}", "sec-fetch-site": "same-site"}, 403, "CROSS_SITE_REQUEST"),
    ],
)
def test_the_development_sign_in_needs_a_same_origin_request(make_stack, headers, status, code):
    stack = make_stack(api={"dev_sign_in": True})
    sent = {k: v.format(url=stack.url, port=port_of(stack)) for k, v in headers.items()}
    answer = stack.client(None).post(
        "/api/v1/dev/sign-in", json={"user": "ops", "tenant": "t1", "role": "admin"}, headers=sent
    )
    assert answer.status_code == status, answer.text
    if code is None:
        assert answer.json()["token"].count(".") == 2
        assert answer.headers["cache-control"] == "no-store"
        assert "content-encoding" not in answer.headers  # a secret: never compressed
    else:
        assert answer.json()["code"] == code and "token" not in answer.json()


def test_a_rebound_page_cannot_sign_in_even_as_its_own_origin(make_stack):
    stack = make_stack(api={"dev_sign_in": True})
    rebound = f"rebound.example:{port_of(stack)}"
    answer = stack.client(None).post(
        "/api/v1/dev/sign-in",
        json={"user": "ops", "tenant": "t1", "role": "admin"},
        headers={"host": rebound, "origin": f"http://{rebound}", "sec-fetch-site": "same-origin"},
    )
    assert answer.status_code == 421 and "token" not in answer.text


@pytest.mark.parametrize("name", ["exports.example.com", "10.1.2.3", "192.0.2.2"])
def test_a_proxy_on_the_same_host_does_not_make_a_remote_browser_local(make_stack, name):
    # A reverse proxy on this machine connects from 127.0.0.1 for every remote browser:
    # the production name (or address) it is reached by says the browser is elsewhere.
    stack = make_stack(
        api={"dev_sign_in": True, "allowed_hosts": [name, "10.0.0.0/8", "192.0.2.0/24"]}
    )
    site = f"{name}:{port_of(stack)}"
    own = {"host": site, "origin": f"http://{site}", "sec-fetch-site": "same-origin"}
    client = stack.client(None)
    answer = client.post(
        "/api/v1/dev/sign-in", json={"user": "x", "tenant": "t1", "role": "admin"}, headers=own
    )
    assert answer.status_code == 403 and answer.json()["code"] == "NOT_LOOPBACK", answer.text
    offered = client.get("/api/v1/dev/sign-in", headers={"host": site})
    assert offered.json() == {"available": False}
    # The same machine, by its loopback name, still signs in.
    local = client.post(
        "/api/v1/dev/sign-in", json={"user": "x", "tenant": "t1"}, headers={"origin": stack.url}
    )
    assert local.status_code == 200 and client.get("/api/v1/dev/sign-in").json()["available"]


def test_signed_tokens_name_the_configured_audience(make_stack):
    stack = make_stack(api={"dev_sign_in": True, "jwt_audience": ["export-center"]})
    minted = stack.client(None).post(
        "/api/v1/dev/sign-in", json={"user": "ops", "tenant": "t1"}, headers={"origin": stack.url}
    )
    token = minted.json()["token"]
    me = stack.client(None).get("/api/v1/me", headers={"authorization": f"Bearer {token}"})
    assert me.status_code == 200 and me.json()["user"] == "ops"
    # The test helper's tokens carry no aud: refused once an audience is required.
    plain = stack.client("alice").get("/api/v1/me")
    assert plain.status_code == 401 and plain.json()["code"] == "TOKEN_WRONG_AUDIENCE"


# -- no-store on every answer that carries a credential, a link or one user's data


def test_every_api_answer_says_no_store(served):
    stack, task_id, link = served
    alice = stack.client("alice")
    admin = stack.client("root", perms=ADMIN_PERMS)
    anonymous = stack.client(None)
    answers = {
        "bearer download 307": alice.get(f"/api/v1/exports/{task_id}/download"),
        "signed download": anonymous.get(link),
        "detail with its signed link": alice.get(f"/api/v1/exports/{task_id}"),
        "list with signed links": alice.get("/api/v1/exports"),
        "legacy detail": alice.get(f"/api/orders/export/{task_id}"),
        "create": create(alice, "xlsx", parameters=SEPTEMBER),
        "legacy create": alice.post("/api/orders/export", json={"from": "1995-12-01"}),
        "me": alice.get("/api/v1/me"),
        "export types": alice.get("/api/v1/export-types"),
        "cancel refused": alice.post(f"/api/v1/exports/{task_id}/cancel"),
        "retry refused": alice.post(f"/api/v1/exports/{task_id}/retry"),
        "admin overview": admin.get("/api/v1/admin/overview"),
        "admin tasks": admin.get("/api/v1/admin/tasks"),
        "admin task": admin.get(f"/api/v1/admin/tasks/{task_id}"),
        "admin outbox": admin.get("/api/v1/admin/outbox"),
        "admin dead letters": admin.get("/api/v1/admin/dlq"),
        "registry reload": admin.post("/api/v1/admin/registry/reload"),
        "sign-in offered": anonymous.get("/api/v1/dev/sign-in"),
        "sign-in": anonymous.post(
            "/api/v1/dev/sign-in", json={"user": "u", "tenant": "t1"}, headers={"origin": stack.url}
        ),
        "401": anonymous.get("/api/v1/exports"),
        "404": alice.get("/api/v1/exports/exp_01J0000000000000000000000A"),
    }
    assert answers["bearer download 307"].status_code == 307
    assert "signature=" in answers["bearer download 307"].headers["location"]
    assert "signature=" in answers["detail with its signed link"].json()["downloadUrl"]
    for what, answer in answers.items():
        assert answer.status_code < 500, (what, answer.text)
        assert answer.headers.get("cache-control") == "no-store", what
        assert answer.headers["x-content-type-options"] == "nosniff", what


# -- compression


def test_page_files_and_json_arrive_gzipped_downloads_do_not(served):
    stack, task_id, link = served
    alice = stack.client("alice")
    for month in ("10", "11", "12"):
        create(alice, "csv", parameters={"from": f"1995-{month}-01"})
    wanted = {"accept-encoding": "gzip"}
    script = alice.get("/ui/app.js", headers=wanted)
    assert script.headers["content-encoding"] == "gzip"
    assert "accept-encoding" in script.headers["vary"].lower()
    shipped = (Path(__file__).parents[2] / "export_center/api/static/ui/app.js").read_bytes()
    assert script.content == shipped and script.num_bytes_downloaded < len(shipped) / 2
    listed = alice.get("/api/v1/exports", headers=wanted)
    assert listed.headers["content-encoding"] == "gzip" and len(listed.json()["items"]) == 4
    assert listed.num_bytes_downloaded < len(listed.content)
    assert alice.get("/openapi.json", headers=wanted).headers["content-encoding"] == "gzip"
    # Without Accept-Encoding: as it is.
    plain = alice.get("/ui/app.js", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == shipped
    # A download never: its Content-Length and Range count the file's own bytes.
    for url in (link, f"/api/v1/exports/{task_id}/download"):
        whole = alice.get(url, headers=wanted, follow_redirects=True)
        assert whole.status_code == 200 and "content-encoding" not in whole.headers
        assert int(whole.headers["content-length"]) == len(whole.content)
        assert whole.num_bytes_downloaded == len(whole.content)
    part = alice.get(link, headers={**wanted, "range": "bytes=0-99"})
    assert part.status_code == 206 and "content-encoding" not in part.headers
    assert part.content == whole.content[:100]
    # Nor a provider answer to a worker: deflating every page costs more CPU than it saves.
    page = stack.client(None).post(
        "/internal/exports/v1/ORDERS/batches",
        headers={**wanted, "x-internal-service-token": stack.settings.internal_token},
        json={
            "taskId": task_id,
            "tenantId": "t1",
            "appCode": "PLATFORM",
            "requestedBy": "alice",
            "dispatchVersion": 1,
            "parameters": {},
            "cursor": None,
            "snapshotToken": None,
            "limit": 100,
        },
    )
    assert page.status_code == 200 and len(page.json()["rows"]) == 100
    assert "content-encoding" not in page.headers
    # What the gzip body really is: a gzip stream of the JSON.
    with httpx.stream(
        "GET", f"{stack.url}/api/v1/exports", headers={**alice.headers, **wanted}
    ) as r:
        compressed = b"".join(r.iter_raw())
    assert orjson.loads(gzip.decompress(compressed))["items"][0]["taskId"]


# -- the internal provider routes


def _peak_rss_kb(reset: bool = False) -> int:
    """This process's peak resident memory (VmHWM), in KiB; ``reset`` starts it anew
    from the current resident memory (Linux: 5 written to /proc/self/clear_refs)."""
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_an_unauthenticated_body_is_never_read(stack):
    size = 256 * 1024 * 1024

    def body() -> Iterator[bytes]:
        chunk = b" " * 65536
        for _ in range(size // len(chunk)):
            yield chunk

    before = _peak_rss_kb(reset=True)
    for token in (None, "wrong", stack.settings.internal_token[:-1]):
        headers = {"content-type": "application/json"}
        if token is not None:
            headers["x-internal-service-token"] = token
        answer = httpx.post(stack.url + BATCHES, content=body(), headers=headers, timeout=120)
        assert answer.status_code == 401, answer.text
        assert answer.json()["code"] == "UNAUTHORIZED"
        declared = httpx.post(
            stack.url + BATCHES,
            content=b" " * (8 * 1024 * 1024),
            headers={**headers, "content-length": str(8 * 1024 * 1024)},
        )
        assert declared.status_code == 401
    # The server runs in this process: 3 x 256 MiB arrived, none of it was ever held.
    assert _peak_rss_kb() - before < 64 * 1024, (before, _peak_rss_kb())


def test_internal_bodies_are_capped_while_read(stack):
    token = {"x-internal-service-token": stack.settings.internal_token}
    over = batch_body(parameters={"pad": "x" * MAX_BATCH_REQUEST_BYTES})
    declared = httpx.post(stack.url + BATCHES, content=over, headers=token)
    assert declared.status_code == 413 and declared.json()["code"] == "REQUEST_TOO_LARGE"

    def chunked(data: bytes) -> Iterator[bytes]:
        for start in range(0, len(data), 8192):
            yield data[start : start + 8192]

    streamed = httpx.post(stack.url + BATCHES, content=chunked(over), headers=token)
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413 and streamed.json()["code"] == "REQUEST_TOO_LARGE"
    # The largest request the contract allows is read and answered.
    largest = batch_body(
        parameters={f"p{i}": "x" * 190 for i in range(20)},  # about 4 KB of parameters
        snapshotToken=None,
        timeZone="America/Argentina/ComodRivadavia",
    )
    assert len(largest) < MAX_BATCH_REQUEST_BYTES
    answered = httpx.post(stack.url + BATCHES, content=chunked(largest), headers=token)
    assert answered.status_code in (200, 400, 422), answered.text
    assert answered.json().get("code") != "REQUEST_TOO_LARGE"
    fine = httpx.post(stack.url + BATCHES, content=batch_body(), headers=token)
    assert fine.status_code == 200 and fine.json()["hasMore"] is True


def test_the_sample_providers_are_mounted_only_where_asked(make_stack, cases, tmp_path):
    registry = tmp_path / "types.yaml"  # no type of provider_url self
    registry.write_text(
        f"""
CASES:
  provider_url: {cases.url}
  provider_path: /internal/exports/v1/CASES/batches
  required_permission: export:cases:create
  app_scope: PLATFORM
  batch_size: 50
"""
    )
    off = make_stack(
        mount_sample_providers=False,
        export_types_file=str(registry),
        provider={"internal_token": CASES_TOKEN},
    )
    token = {"x-internal-service-token": off.settings.internal_token}
    answer = httpx.post(off.url + BATCHES, content=batch_body(), headers=token)
    assert answer.status_code == 404 and answer.json()["code"] == "NOT_FOUND"
    on = make_stack()  # the fixtures set mount_sample_providers (environment "test")
    token = {"x-internal-service-token": on.settings.internal_token}
    assert httpx.post(on.url + BATCHES, content=batch_body(), headers=token).status_code == 200
