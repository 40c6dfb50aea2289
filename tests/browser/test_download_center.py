"""The download center in Chromium: sign in, create, watch, download; the language, the
phone layout, keyboard-only use, what an admin sees, errors at their field."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.helpers import create, read_csv, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

SEPTEMBER = {"from": "1995-09-01", "to": "1995-09-30"}


@pytest.fixture
def stack(make_stack):
    return make_stack(api={"dev_sign_in": True})


def test_sign_in_create_watch_the_bar_reach_100_and_download(stack, ui, tmp_path):
    view = ui(stack).open()
    view.sign_in("alice", "t1")
    page = view.page
    expect(page.locator("#list-title")).to_have_text("My exports")
    expect(page.locator("#empty")).to_contain_text("No exports yet")
    view.new_export(name="September orders", fmt="csv", params=SEPTEMBER)
    page.click("#create-submit")
    expect(page.locator("#create")).to_be_hidden()
    expect(page.locator("#toasts")).to_contain_text("September orders")
    row = view.row("September orders")
    expect(row.locator(".badge")).to_have_text("Completed", timeout=30_000)
    expect(row.locator(".pct")).to_have_text("100%")
    assert row.locator("progress").evaluate("el => el.value / el.max") == 1
    rows_text = row.locator(".rows").inner_text()  # "191 rows"
    shown_rows = int(re.sub(r"\D", "", rows_text))
    expect(row.locator("td.c-type")).to_contain_text("Orders")
    expect(row.locator("td.c-type")).to_contain_text("CSV")
    expect(row.locator("td.c-times")).to_contain_text("Finished")
    expect(row.locator("td.c-file")).to_contain_text("Download until")
    expect(row.locator("td.c-state .attempt")).to_have_count(0)  # the first attempt: no count
    with page.expect_download() as caught:
        row.get_by_role("link", name="Download September orders").click()
    download = caught.value
    assert download.suggested_filename == "September orders.csv"
    saved = tmp_path / "got.csv"
    download.save_as(saved)
    rows = read_csv(Path(saved).read_bytes())
    assert rows[0][:3] == ["Order key", "Customer key", "Customer name"]
    dates = [r[rows[0].index("Order date")] for r in rows[1:]]
    assert len(dates) == shown_rows > 100
    assert all("1995-09-01" <= d <= "1995-09-30" for d in dates)
    # The task was created with the browser's time zone and the page's own name.
    detail = stack.client("alice").get("/api/v1/exports").json()["items"][0]
    assert (detail["timeZone"], detail["taskName"]) == ("Asia/Shanghai", "September orders")
    # Nothing is active: the page stops polling.
    asked = []
    page.on("request", lambda r: "/api/v1/exports?" in r.url and asked.append(r.url))
    page.wait_for_timeout(4500)
    assert asked == []


def test_the_token_stays_in_session_storage_and_headers(stack, ui):
    view = ui(stack)
    requests = []
    view.page.on("request", lambda r: requests.append(r))
    view.open().sign_in()
    sent = [(r.url, r.all_headers().get("authorization")) for r in requests]
    token = view.page.evaluate("sessionStorage.getItem('ec.token')")
    assert token and token.count(".") == 2
    assert view.page.evaluate("Object.keys(localStorage)").count("ec.token") == 0
    assert view.page.context.cookies() == []
    assert token not in view.page.content()
    api_calls = [(u, a) for u, a in sent if "/api/v1/" in u and "dev/sign-in" not in u]
    assert api_calls and all(a == f"Bearer {token}" for _, a in api_calls)
    assert all(token not in u for u, _ in sent)
    # Sign out forgets it; a reload then asks to sign in again.
    view.page.click("#sign-out")
    expect(view.page.locator("#signin-notice")).to_have_text("You have signed out.")
    assert view.page.evaluate("sessionStorage.getItem('ec.token')") is None


def test_a_double_click_creates_one_task(stack, ui):
    view = ui(stack).open().sign_in()
    page = view.page
    bodies = []
    page.on(
        "request",
        lambda r: r.method == "POST" and r.url.endswith("/api/v1/exports") and bodies.append(r),
    )
    view.new_export(name="Twice", params=SEPTEMBER)
    page.locator("#create-submit").dblclick()
    expect(view.row("Twice")).to_have_count(1)
    page.wait_for_timeout(500)
    items = stack.client("alice").get("/api/v1/exports").json()["items"]
    assert [t["taskName"] for t in items] == ["Twice"]
    request_ids = {r.post_data_json["requestId"] for r in bodies}
    assert len(request_ids) == 1 and uuid.UUID(request_ids.pop()).version == 4
    # The next submission of the form gets a fresh key.
    view.new_export(name="Again", params={"from": "1995-10-01", "to": "1995-10-31"})
    page.click("#create-submit")
    expect(view.row("Again")).to_have_count(1)
    assert len({r.post_data_json["requestId"] for r in bodies}) == 2


def test_language_switch_is_remembered_and_follows_the_browser(stack, ui):
    alice = stack.client("alice")
    task = create(alice, "xlsx", taskName="九月订单", parameters=SEPTEMBER).json()["taskId"]
    wait_state(alice, task)
    view = ui(stack).open().sign_in()
    page = view.page
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(view.row("九月订单").locator(".badge")).to_have_text("Completed")
    page.click("#lang-switch")
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.locator("#list-title")).to_have_text("我的导出")
    expect(page.locator("#new-export")).to_have_text("新建导出")
    row = view.row("九月订单")
    expect(row.locator(".badge")).to_have_text("已完成")
    expect(row.get_by_role("link", name="下载「九月订单」")).to_have_text("下载")
    expect(row.get_by_role("button", name="再次导出「九月订单」")).to_be_visible()
    expect(row.locator(".rows")).to_have_text(re.compile(r"^共 [\d,]+ 条$"))
    expect(page.locator("#tz-note")).to_have_text("时间按你所在的时区（Asia/Shanghai）显示。")
    page.reload()
    expect(page.locator("#list-title")).to_have_text("我的导出")
    expect(page.locator("#lang-switch")).to_have_text("English")
    # A browser that prefers Chinese starts in Chinese.
    chinese = ui(stack, locale="zh-CN").open()
    expect(chinese.page.locator("#signin-title")).to_have_text("登录下载中心")
    expect(chinese.page.locator('#dev-form button[type="submit"]')).to_have_text("登录")


def test_the_phone_layout_has_no_sideways_scroll_and_reachable_actions(stack, ui):
    alice = stack.client("alice")
    task = create(alice, "csv", taskName="On the phone", parameters=SEPTEMBER).json()["taskId"]
    wait_state(alice, task)
    view = ui(stack, viewport=(390, 844), is_mobile=True, has_touch=True).open().sign_in()
    page = view.page
    row = view.row("On the phone")
    expect(row.locator(".badge")).to_have_text("Completed")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    link = row.get_by_role("link", name="Download On the phone")
    link.scroll_into_view_if_needed()
    box = link.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert box["height"] >= 40  # a thumb-sized target
    with page.expect_download() as caught:
        link.tap()
    assert caught.value.suggested_filename == "On the phone.csv"
    # The form fits the screen too.
    page.click("#new-export")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    submit = page.locator("#create-submit")
    submit.scroll_into_view_if_needed()
    box = submit.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390


def test_an_admin_sees_every_users_task_and_a_user_only_their_own(stack, ui):
    bob = stack.client("bob")
    task = create(bob, "csv", taskName="Bob's orders", parameters=SEPTEMBER).json()["taskId"]
    wait_state(bob, task)
    admin = ui(stack).open().sign_in("olga", "t1", role="admin")
    page = admin.page
    expect(page.locator("#list-title")).to_have_text("All exports of t1")
    expect(page.locator("#who")).to_contain_text("Administrator")
    expect(page.locator("#tasks-head")).to_contain_text("Requested by")
    expect(admin.row("Bob's orders").locator("td.c-owner")).to_have_text("bob")
    page.fill("#f-owner", "carol")
    page.press("#f-owner", "Enter")
    expect(page.locator("#empty")).to_contain_text("No exports match these filters")
    page.fill("#f-owner", "bob")
    page.press("#f-owner", "Enter")
    expect(admin.row("Bob's orders")).to_have_count(1)
    user = ui(stack).open().sign_in("carol", "t1")
    expect(user.page.locator("#empty")).to_contain_text("No exports yet")
    expect(user.page.locator("#f-owner-field")).to_be_hidden()
    expect(user.page.locator("#tasks-head")).not_to_contain_text("Requested by")


def test_keyboard_only_create(stack, ui):
    view = ui(stack).open()
    page = view.page
    page.locator("#dev-form").wait_for()
    # Sign in: Tab from the top reaches the form; Enter submits.
    page.focus("#dev-user")
    page.keyboard.press("Enter")
    page.locator("#center").wait_for()
    expect(page.locator("#list-title")).to_be_focused()
    for _ in range(12):  # the first control after the title is "New export"
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "new-export":
            break
    assert page.evaluate("document.activeElement.id") == "new-export"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # focus is visible
    page.keyboard.press("Enter")
    expect(page.locator("#c-type")).to_be_focused()
    page.keyboard.type("O")  # a closed select picks the option by its first letter
    expect(page.locator("#c-type")).to_have_value("ORDERS")
    page.keyboard.press("Tab")
    expect(page.locator("#c-name")).to_be_focused()
    page.keyboard.type("Typed by keyboard")
    page.keyboard.press("Tab")  # format radios: arrow keys choose
    page.keyboard.press("ArrowRight")
    expect(page.locator('input[name="format"][value="csv"]')).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator("#c-param-from")).to_be_focused()
    page.keyboard.type("09011995", delay=60)  # en-US date field: mm dd yyyy, at a human pace
    for _ in range(4):  # Tab walks the date's own parts first
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "c-param-to":
            break
    expect(page.locator("#c-param-to")).to_be_focused()
    page.keyboard.type("09301995", delay=60)
    page.keyboard.press("Enter")
    row = view.row("Typed by keyboard")
    expect(row.locator(".badge")).to_have_text("Completed", timeout=30_000)
    items = stack.client("alice", tenant="acme").get("/api/v1/exports").json()["items"]
    assert [(t["taskName"], t["format"], t["parameters"]) for t in items] == [
        ("Typed by keyboard", "csv", SEPTEMBER)
    ]
    # The actions of the row are buttons and links reachable with Tab.
    page.focus("#refresh")
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.action") == "download":
            break
    assert page.evaluate("document.activeElement.tagName") == "A"


def test_the_api_out_of_reach_shows_a_banner_until_it_answers_again(stack, ui):
    alice = stack.client("alice")
    create(alice, "csv", taskName="Keeps running", parameters=SEPTEMBER)
    view = ui(stack).open().sign_in()
    page = view.page
    expect(view.row("Keeps running")).to_have_count(1)
    page.route("**/api/v1/**", lambda route: route.abort("connectionrefused"))
    page.click("#refresh")
    banner = page.locator("#banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("cannot be reached")
    page.unroute("**/api/v1/**")
    page.click("#banner-retry")
    expect(banner).to_be_hidden()
    expect(view.row("Keeps running")).to_have_count(1)
    # Chromium logs each refused request; nothing else may appear.
    view.errors[:] = [e for e in view.errors if "net::ERR_CONNECTION_REFUSED" not in e]


@pytest.mark.parametrize(
    ("locale", "says"),
    [("en-US", "database is not answering"), ("zh-CN", "导出中心的数据库暂时无响应")],
)
def test_a_database_outage_is_not_blamed_on_the_network(stack, ui, locale, says):
    from export_center.testing import DatabaseOutage

    alice = stack.client("alice")
    create(alice, "csv", taskName="Keeps running", parameters=SEPTEMBER)
    view = ui(stack, locale=locale).open().sign_in()
    page = view.page
    expect(view.row("Keeps running")).to_have_count(1)
    outage = DatabaseOutage(stack.runtime.engine).start(3600)
    try:
        page.click("#refresh")
        banner = page.locator("#banner")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text(says)
        assert "网络" not in banner.inner_text() and "connection" not in banner.inner_text()
    finally:
        outage.close()
    page.click("#banner-retry")
    expect(page.locator("#banner")).to_be_hidden()
    expect(view.row("Keeps running")).to_have_count(1)
    # The 503 answers are logged by Chromium; nothing else may appear.
    view.errors[:] = [e for e in view.errors if "503" not in e]


def test_an_expired_token_returns_to_sign_in_with_a_message(stack, ui):
    view = ui(stack)
    view.allow(401)
    page = view.page
    page.goto(view.url)
    page.locator("#token-box summary").click()
    page.fill("#token-input", "Bearer " + stack.token("alice", ttl=3))
    page.click('#token-form button[type="submit"]')
    expect(page.locator("#center")).to_be_visible()
    expect(page.locator("#signin-notice")).to_have_text(
        "Your sign-in has expired. Please sign in again.", timeout=10_000
    )
    expect(page.locator("#center")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('ec.token')") is None
    # A token of another installation is refused at the field, with the reason.
    page.fill("#token-input", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl")
    page.click('#token-form button[type="submit"]')
    expect(page.locator("#token-input-error")).to_contain_text(
        re.compile("issued by another Export Center|not valid")
    )


def test_a_host_application_proxy_signs_the_page_in(stack, ui):
    token = stack.token("hana", "t1")
    view = ui(stack, extra_http_headers={"Authorization": f"Bearer {token}"}).open()
    page = view.page
    expect(page.locator("#center")).to_be_visible()
    expect(page.locator("#who")).to_contain_text("hana")
    expect(page.locator("#sign-out")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('ec.token')") is None
    assert token not in page.content()


def test_the_page_and_its_files_carry_the_security_headers(stack):
    with httpx.Client(base_url=stack.url) as client:
        root = client.get("/")
        assert root.status_code == 307 and root.headers["location"] == "ui/"
        page = client.get("/ui/")
        assert page.status_code == 200 and 'data-auth="page"' in page.text
        for path in ("/ui/", "/ui/app.js", "/ui/app.css", "/ui/i18n.js", "/ui/icon.svg"):
            answer = client.get(path)
            assert answer.status_code == 200, path
            headers = answer.headers
            assert "script-src 'self';" in headers["content-security-policy"]
            assert "frame-ancestors 'none'" in headers["content-security-policy"]
            assert "unsafe-inline" not in headers["content-security-policy"]
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["referrer-policy"] == "no-referrer"
            again = client.get(path, headers={"if-none-match": headers["etag"]})
            assert again.status_code == 304
        assert client.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
        assert client.get("/ui/nope.js").status_code == 404
        assert client.get("/ui/..%2Fapp.py").status_code == 404
        # Swagger UI needs inline script: its policy only forbids framing.
        docs = client.get("/docs").headers
        assert docs["content-security-policy"] == "frame-ancestors 'none'"
        assert docs["x-frame-options"] == "DENY" and docs["x-content-type-options"] == "nosniff"
        proxied = client.get("/ui/", headers={"authorization": "Bearer x.y.z"})
        assert 'data-auth="host"' in proxied.text and "x.y.z" not in proxied.text
