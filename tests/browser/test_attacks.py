"""The embedded default attacked from a browser page on another origin, in Chromium: a
rebound name, cross-site forms and reads while a proxy adds Authorization, and framing.
Each gives the attacking page nothing, and nothing changes on the server.

The attacker's pages come from a real HTTP server on another loopback port, reached as
``localhost:PORT`` (another site) or ``127.0.0.1:PORT`` (another origin of the same
site). The host-proxy mode (a reverse proxy that adds ``Authorization`` to every
request to the export center) is the browser context adding the header to every request
for the export center's origin, attackers' included, exactly as the proxy would.
DNS rebinding is Chromium resolving ``rebind.test`` to 127.0.0.1 (``--host-resolver-
rules``) after the attacker's page was first answered by the attacker (the page is
fulfilled by the test, as the attacker's DNS answer would have served it); Chromium's
own Local Network Access checks are switched off there, so that the server's rule is
what is tested, as with browsers that have none.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import func, select, update

from export_center.models import ExportAudit, ExportTask
from tests.browser.conftest import CHROMIUM_ARGS, chromium_path
from tests.support.helpers import Stack, create, wait_state

pytestmark = pytest.mark.browser

T = ExportTask.__table__
A = ExportAudit.__table__
ADMIN_PERMS = ["export:orders:create", "platform:export:admin", "platform:download:all"]


class AttackerSite:
    """An HTTP server on 127.0.0.1 serving the HTML pages of ``pages`` by path."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        pages = self.pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = pages.get(self.path.split("?")[0], "<p>attacker</p>").encode()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def attacker() -> Iterator[AttackerSite]:
    site = AttackerSite()
    yield site
    site.close()


@dataclass
class Victim:
    """The embedded default as a user runs it (development sign-in on), with one
    succeeded export and its signed link, then no consumer: a new export stays queued,
    so a cancel or a retry would show."""

    stack: Stack
    link: str

    @property
    def url(self) -> str:
        return self.stack.url


@pytest.fixture
def victim(make_stack) -> Victim:
    stack = make_stack(api={"dev_sign_in": True})
    alice = stack.client("alice")
    done = create(alice, "csv", parameters={"from": "1995-09-01", "to": "1995-09-30"})
    link = wait_state(alice, done.json()["taskId"])["downloadUrl"]
    stack.runtime.consumer.stop(timeout=20)
    return Victim(stack, link)


@pytest.fixture
def proxied(browser: Any, victim: Victim) -> Iterator[Callable[[], Any]]:
    """New pages of a context whose every request to the export center carries an
    admin's Authorization (the host-proxy mode); records the export center's answers."""
    token = victim.stack.token("root", perms=ADMIN_PERMS)
    contexts: list[Any] = []

    def add_authorization(route: Any) -> None:
        route.continue_(headers={**route.request.headers, "authorization": f"Bearer {token}"})

    def new_page() -> Any:
        context = browser.new_context()
        contexts.append(context)
        context.route(f"{victim.url}/**", add_authorization)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.answers = []  # (url, status) of every answer of the export center
        page.on(
            "response",
            lambda r: r.url.startswith(victim.url) and page.answers.append((r.url, r.status)),
        )
        return page

    yield new_page
    for context in contexts:
        context.close()


def _tasks(victim: Victim) -> tuple[str, str]:
    """A queued task and a failed one (besides the succeeded one)."""
    alice = victim.stack.client("alice")
    queued = create(alice, "csv", parameters={"from": "1995-10-01"}).json()["taskId"]
    failed = create(alice, "csv", parameters={"from": "1995-11-01"}).json()["taskId"]
    with victim.stack.runtime.engine.begin() as conn:
        conn.execute(update(T).where(T.c.task_no == failed).values(status="FAILED"))
    return queued, failed


def _unchanged(victim: Victim, queued: str, failed: str) -> None:
    with victim.stack.runtime.engine.connect() as conn:
        rows = conn.execute(select(T.c.task_no, T.c.status, T.c.cancel_requested)).all()
        audit = conn.execute(select(func.count()).select_from(A)).scalar_one()
    states = {task: (status, bool(cancel)) for task, status, cancel in rows}
    assert states[queued] == ("PENDING", False) and states[failed] == ("FAILED", False)
    assert sorted(status for status, _ in states.values()) == ["FAILED", "PENDING", "SUCCEEDED"]
    assert audit == 0  # no cancel, retry or registry reload was recorded


def _form(action: str, fields: str = "") -> str:
    return (
        f'<form id="f" method="POST" action="{action}">{fields}</form>'
        '<script>document.getElementById("f").submit()</script>'
    )


@pytest.mark.parametrize("attacker_host", ["localhost", "127.0.0.1"])
def test_cross_site_forms_cancel_retry_and_reload_nothing(victim, attacker, proxied, attacker_host):
    queued, failed = _tasks(victim)
    base = victim.url
    forms = {
        "/cancel": _form(f"{base}/api/v1/exports/{queued}/cancel"),
        "/retry": _form(f"{base}/api/v1/exports/{failed}/retry"),
        "/reload": _form(f"{base}/api/v1/admin/registry/reload"),
        "/admin-cancel": _form(
            f"{base}/api/v1/admin/tasks/{queued}/cancel",
            '<input name="reason" value="pwned">',
        ),
        "/sign-in": _form(
            f"{base}/api/v1/dev/sign-in",
            '<input name="user" value="ops"><input name="tenant" value="t1">',
        ),
    }
    attacker.pages.update(forms)
    for path in forms:
        page = proxied()
        with page.expect_navigation(url=f"{base}/**"):
            page.goto(f"http://{attacker_host}:{attacker.port}{path}")
        text = page.locator("body").inner_text()
        assert '"code":"CROSS_SITE_REQUEST"' in text, (path, text)
        assert page.answers and all(status == 403 for _, status in page.answers), page.answers
    _unchanged(victim, queued, failed)
    # The same action without another site's page works (the token is a real one).
    alice = victim.stack.client("alice")
    assert alice.post(f"/api/v1/exports/{queued}/cancel").status_code == 202


READER = """
<script>
window.loot = (async () => {
  const base = %(base)r, out = {};
  for (const [name, path] of [["list", "/api/v1/exports"], ["me", "/api/v1/me"],
                              ["link", %(link)r]]) {
    try {
      const r = await fetch(base + path, {credentials: "include"});
      out[name] = await r.text();
    } catch (e) { out[name] = "blocked: " + e.name; }
    try {
      const r = await fetch(base + path, {credentials: "include", mode: "no-cors"});
      out[name + " no-cors"] = r.type + " " + r.status + " " + (await r.text());
    } catch (e) { out[name + " no-cors"] = "blocked: " + e.name; }
  }
  await fetch(base + "/api/v1/exports/%(queued)s/cancel",
              {method: "POST", mode: "no-cors", credentials: "include", body: "x"})
    .catch(() => null);
  await fetch(base + "/api/v1/dev/sign-in", {method: "POST", mode: "no-cors",
              body: JSON.stringify({user: "ops", tenant: "t1", role: "admin"})})
    .catch(() => null);
  await new Promise(done => {
    const img = new Image(); img.onload = img.onerror = done; img.src = base + %(link)r;
  });
  await new Promise(done => {
    const s = document.createElement("script"); s.onload = s.onerror = done;
    s.src = base + "/api/v1/exports"; document.body.appendChild(s);
  });
  return out;
})();
</script>
"""


def test_fetch_with_credentials_reads_nothing_and_changes_nothing(victim, attacker, proxied):
    queued, failed = _tasks(victim)
    attacker.pages["/read"] = "<body>" + READER % {
        "base": victim.url,
        "link": victim.link,
        "queued": queued,
    }
    page = proxied()
    page.goto(f"http://localhost:{attacker.port}/read")
    loot = page.evaluate("window.loot")
    for name, value in loot.items():
        assert value.startswith(("blocked:", "opaque 0 ")), (name, value)
        assert value in ("blocked: TypeError", "opaque 0 "), (name, value)
    # The export center refused them itself (not only the browser's CORS): each kind of
    # request reached it and got 403.
    reached = {url.removeprefix(victim.url).split("?")[0] for url, _ in page.answers}
    assert reached >= {
        "/api/v1/exports",
        "/api/v1/me",
        victim.link.split("?")[0],
        f"/api/v1/exports/{queued}/cancel",
        "/api/v1/dev/sign-in",
    }, reached
    assert all(status == 403 for _, status in page.answers), page.answers
    _unchanged(victim, queued, failed)


def test_the_page_and_the_api_docs_cannot_be_framed(victim, attacker, browser):
    attacker.pages["/frames"] = (
        f'<iframe id="ui" src="{victim.url}/ui/"></iframe>'
        f'<iframe id="docs" src="{victim.url}/docs"></iframe>'
        f'<iframe id="own" src="/own"></iframe>'
    )
    attacker.pages["/own"] = '<p id="mine">the attacker\'s own frame</p>'
    context = browser.new_context()
    try:
        page = context.new_page()
        blocked: list[str] = []
        page.on("console", lambda m: "frame" in m.text.lower() and blocked.append(m.text))
        page.goto(f"http://localhost:{attacker.port}/frames")
        page.wait_for_load_state("load")
        page.frame_locator("#own").locator("#mine").wait_for()  # frames do load here
        page.wait_for_timeout(1000)
        for frame in page.frames:
            if frame == page.main_frame:
                continue
            assert frame.evaluate("document.querySelector('#dev-form, #center')") is None
            assert frame.evaluate("document.querySelector('#swagger-ui, .swagger-ui')") is None
        assert any(
            "x-frame-options" in line.lower() or "frame-ancestors" in line.lower()
            for line in blocked
        ), blocked
    finally:
        context.close()


def test_api_answers_framed_by_another_site_show_nothing(victim, attacker, proxied):
    # The proxy adds Authorization to the frames' requests too: the list and the detail
    # (with signed links) must not be rendered inside another site's page.
    task_id = victim.stack.client("alice").get("/api/v1/exports").json()["items"][0]["taskId"]
    attacker.pages["/json-frames"] = (
        f'<iframe id="list" src="{victim.url}/api/v1/exports"></iframe>'
        f'<iframe id="detail" src="{victim.url}/api/v1/exports/{task_id}"></iframe>'
        f'<iframe id="me" src="{victim.url}/api/v1/me"></iframe>'
    )
    page = proxied()
    blocked: list[str] = []
    page.on("console", lambda m: "frame" in m.text.lower() and blocked.append(m.text))
    page.goto(f"http://localhost:{attacker.port}/json-frames")
    page.wait_for_load_state("load")
    page.wait_for_timeout(1000)
    for frame in page.frames:
        if frame == page.main_frame:
            continue
        text = frame.evaluate("document.body ? document.body.innerText : ''")
        assert task_id not in text and "downloadUrl" not in text and '"user"' not in text
    assert (
        len(
            [
                line
                for line in blocked
                if "x-frame-options" in line.lower() or "frame-ancestors" in line.lower()
            ]
        )
        >= 3
    ), blocked


@pytest.fixture
def rebinding_browser(browser: Any) -> Iterator[Any]:
    """A second Chromium that resolves rebind.test to 127.0.0.1 (the rebound answer)."""
    args = [
        *CHROMIUM_ARGS,
        "--host-resolver-rules=MAP rebind.test 127.0.0.1",
        "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessSendPreflights,"
        "PrivateNetworkAccessRespectPreflightResults,BlockInsecurePrivateNetworkRequests",
    ]
    chromium = browser.browser_type.launch(executable_path=chromium_path(), args=args)
    yield chromium
    chromium.close()


REBOUND = """
<script>
window.loot = (async () => {
  const out = {};
  const tries = [
    ["sign-in", "/api/v1/dev/sign-in", {method: "POST",
      headers: {"content-type": "application/json"},
      body: JSON.stringify({user: "ops", tenant: "t1", role: "admin"})}],
    ["offered", "/api/v1/dev/sign-in", {}],
    ["list", "/api/v1/exports", {}], ["ui", "/ui/", {}], ["docs", "/docs", {}],
    ["openapi", "/openapi.json", {}], ["health", "/healthz", {}], ["ready", "/readyz", {}],
    ["metrics", "/metrics", {}], ["download", %(link)r, {}],
  ];
  for (const [name, path, init] of tries) {
    try { const r = await fetch(path, init); out[name] = [r.status, await r.text()]; }
    catch (e) { out[name] = [0, "blocked: " + e.name]; }
  }
  return out;
})();
</script>
"""


def test_a_rebound_name_gets_nothing(victim, rebinding_browser):
    link = victim.link  # relative: it works through any name the page has
    port = victim.url.rsplit(":", 1)[1]
    origin = f"http://rebind.test:{port}"
    context = rebinding_browser.new_context()
    try:
        page = context.new_page()
        # The first answer for rebind.test was the attacker's: its page.
        page.route(
            f"{origin}/attack",
            lambda route: route.fulfill(
                status=200, content_type="text/html", body="<body>" + REBOUND % {"link": link}
            ),
        )
        page.goto(f"{origin}/attack")
        loot = page.evaluate("window.loot")
        for name, (status, text) in loot.items():
            assert status == 421, (name, status, text[:200])
            assert '"code":"UNTRUSTED_HOST"' in text, name
            assert "token" not in text and "taskId" not in text and "ORDERS" not in text
        opened = page.goto(f"{origin}/ui/")
        assert opened is not None and opened.status == 421
        assert page.locator("#dev-form").count() == 0
    finally:
        context.close()
    with victim.stack.runtime.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(A)).scalar_one() == 0
