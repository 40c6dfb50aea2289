"""The "New export" form: what it checks before sending (incomplete dates, the date
range), every mistake at once and cleared as soon as it is fixed, the server's refusals
in the page's language, the time-zone choice, an unreachable server, and the name an
unnamed export gets."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.helpers import create, wait_state

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture then skips (locally) or fails (CI)
    expect = None

pytestmark = pytest.mark.browser

LATIN = re.compile(r"[A-Za-z]{3,}")  # an English word (zone names aside)


@pytest.fixture
def stack(make_stack):
    return make_stack(api={"dev_sign_in": True})


def _posts(page) -> list:
    sent: list = []
    page.on(
        "request",
        lambda r: r.method == "POST" and r.url.endswith("/api/v1/exports") and sent.append(r),
    )
    return sent


def test_an_incomplete_date_is_an_error_in_the_form_and_creates_nothing(stack, ui):
    view = ui(stack).open().sign_in()
    page = view.page
    sent = _posts(page)
    view.new_export(name="Half a date", params={"to": "1995-09-30"})
    page.focus("#c-param-from")
    page.keyboard.type("0901", delay=50)  # month and day, no year: the field shows 09/01/yyyy
    assert page.eval_on_selector("#c-param-from", "el => [el.value, el.validity.badInput]") == [
        "",
        True,
    ]
    page.click("#create-submit")
    error = page.locator("#c-param-from-error")
    expect(error).to_have_text(
        "This date is incomplete. Enter day, month and year, or clear the field."
    )
    expect(page.locator("#c-param-from")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#c-param-from")).to_be_focused()
    expect(page.locator("#create")).to_be_visible()
    page.wait_for_timeout(300)
    assert sent == [] and stack.client("alice").get("/api/v1/exports").json()["items"] == []
    # Typing the year completes the date: the error goes at once, before any submit.
    page.keyboard.press("Tab")  # the focus came back to the month: Tab walks to the year
    page.keyboard.press("Tab")
    page.keyboard.type("1995", delay=50)
    expect(error).to_be_hidden()
    expect(page.locator("#c-param-from")).not_to_have_attribute("aria-invalid", "true")
    page.click("#create-submit")
    expect(view.row("Half a date")).to_have_count(1)
    [task] = stack.client("alice").get("/api/v1/exports").json()["items"]
    assert task["parameters"] == {"from": "1995-09-01", "to": "1995-09-30"}


def test_every_mistake_shows_at_once_before_sending_and_each_clears_when_fixed(stack, ui):
    view = ui(stack, locale="zh-CN").open().sign_in()
    page = view.page
    sent = _posts(page)
    view.new_export(name="两处错误")
    for field in ("#c-param-from", "#c-param-to"):
        page.focus(field)
        page.keyboard.type("09", delay=30)  # the first part of the date only
    page.click("#create-submit")
    incomplete = "日期不完整，请填写完整的年、月、日，或清空此项。"
    expect(page.locator("#c-param-from-error")).to_have_text(incomplete)
    expect(page.locator("#c-param-to-error")).to_have_text(incomplete)
    expect(page.locator("#c-param-from")).to_be_focused()  # the first mistake
    # Fixing one clears that one only, as soon as it is fixed.
    page.fill("#c-param-from", "1995-10-01")
    expect(page.locator("#c-param-from-error")).to_be_hidden()
    expect(page.locator("#c-param-to-error")).to_have_text(incomplete)
    page.fill("#c-param-to", "1995-09-01")  # complete now, but before the start
    expect(page.locator("#c-param-to-error")).to_be_hidden()
    page.click("#create-submit")
    expect(page.locator("#c-param-from-error")).to_have_text("开始日期不能晚于结束日期。")
    page.wait_for_timeout(300)
    assert sent == []  # caught in the page: no round trip, no 422 in the console
    page.fill("#c-param-to", "1995-10-31")
    expect(page.locator("#c-param-from-error")).to_be_hidden()
    page.click("#create-submit")
    expect(view.row("两处错误")).to_have_count(1)
    assert len(sent) == 1


def test_a_refusal_of_the_server_is_shown_at_its_field_in_the_page_language(stack, ui):
    view = ui(stack, locale="zh-CN").open().sign_in()
    view.allow(422)
    page = view.page

    def unknown_zone(route):  # what the page cannot send itself: a zone outside the list
        body = json.loads(route.request.post_data)
        route.continue_(post_data=json.dumps({**body, "timeZone": "Mars/Olympus"}))

    page.route("**/api/v1/exports", unknown_zone)
    view.new_export(name="火星时间", params={"from": "1995-09-01", "to": "1995-09-30"})
    with page.expect_response(lambda r: r.url.endswith("/api/v1/exports")) as answer:
        page.click("#create-submit")
    assert answer.value.status == 422 and answer.value.json()["code"] == "INVALID_TIME_ZONE"
    error = page.locator("#c-tz-error")
    expect(error).to_have_text("请从列表中选择时区。")  # not "timeZone must be an IANA…"
    expect(page.locator("#create-form")).not_to_contain_text("服务器返回")
    expect(page.locator("#c-tz")).to_be_focused()
    # Choosing a zone makes the server's objection stale: it goes at once.
    page.select_option("#c-tz", "Asia/Tokyo")
    expect(error).to_be_hidden()
    page.unroute("**/api/v1/exports")
    page.click("#create-submit")
    expect(view.row("火星时间")).to_have_count(1)
    [task] = stack.client("alice").get("/api/v1/exports").json()["items"]
    assert task["timeZone"] == "Asia/Tokyo"


def test_every_error_code_and_failure_code_has_a_sentence_in_both_languages(stack, ui):
    from export_center.api.openapi import CATALOGUE

    failures = [
        "PROVIDER_UNAVAILABLE", "PROVIDER_TOO_SLOW", "PROVIDER_REJECTED", "SNAPSHOT_EXPIRED",
        "PROVIDER_REDIRECTED", "PROVIDER_CONTRACT", "SCHEMA_CHANGED", "ROW_LIMIT_EXCEEDED",
        "FILE_TOO_LARGE", "STORAGE_ERROR", "DEADLINE_PASSED", "WORKER_LOST",
        "COMMAND_CORRUPTED", "INTERNAL_ERROR", "INVALID_VALUE", "UNKNOWN_EXPORT_TYPE",
        "UNKNOWN_FORMAT",
    ]  # fmt: skip
    page = ui(stack).open().page
    page.locator("#signin").wait_for()
    answer = page.evaluate(
        """async ([codes, fields, failures]) => {
          const i18n = await import('./i18n.js');
          const keys = codes.map((c, i) => i18n.errorKey(c, fields[i]));
          return {
            unmapped: codes.filter((c, i) => !keys[i]),
            lacking: i18n.lacking([...keys.filter(Boolean), ...failures.map((f) => `fail.${f}`)]),
          };
        }""",
        [list(CATALOGUE), [f for _, f in CATALOGUE.values()], failures],
    )
    assert answer == {"unmapped": [], "lacking": []}


def test_the_time_zone_is_a_choice_of_common_zones_with_chinese_names(stack, ui):
    view = ui(stack, locale="zh-CN").open().sign_in()
    page = view.page
    view.new_export(name="纽约时间的订单", params={"from": "1995-09-01", "to": "1995-09-30"})
    zone = page.locator("#c-tz")
    assert zone.evaluate("el => el.tagName") == "SELECT"
    expect(zone).to_have_value("Asia/Shanghai")  # the browser's own zone first
    expect(zone.locator("option:checked")).to_have_text("北京时间（UTC+8，Asia/Shanghai）")
    labels = zone.locator("option").all_inner_texts()
    assert "协调世界时（UTC）" in labels and any(x.startswith("纽约时间（") for x in labels)
    page.select_option("#c-tz", label=next(x for x in labels if x.startswith("纽约时间")))
    page.click("#create-submit")
    expect(view.row("纽约时间的订单")).to_have_count(1)
    [task] = stack.client("alice").get("/api/v1/exports").json()["items"]
    assert task["timeZone"] == "America/New_York"


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_a_create_while_the_server_is_out_of_reach_says_nothing_was_created(stack, ui, locale):
    view = ui(stack, locale=locale).open().sign_in()
    page = view.page
    view.new_export(name="Offline", params={"from": "1995-09-01", "to": "1995-09-30"})
    page.route("**/api/v1/**", lambda route: route.abort("connectionrefused"))
    page.click("#create-submit")
    error = page.locator("#create-error")
    expected = {
        "en-US": "The export center could not be reached, so no export was created. Check your "
        "connection, then press “Create export” again.",
        "zh-CN": "无法连接导出中心，导出任务未创建。请检查网络后再点一次“创建导出”。",
    }[locale]
    expect(error).to_have_text(expected)  # one sentence: no "null", no "Retrying by itself"
    expect(page.locator("#create")).not_to_contain_text("null")
    expect(page.locator("#banner")).to_be_visible()
    # The server is back: the page notices by itself within a few seconds.
    page.unroute("**/api/v1/**")
    expect(page.locator("#banner")).to_be_hidden(timeout=7_000)
    page.click("#create-submit")  # the same form, sent again, creates it
    expect(view.row("Offline")).to_have_count(1)
    assert len(stack.client("alice").get("/api/v1/exports").json()["items"]) == 1
    view.errors[:] = [e for e in view.errors if "net::ERR_CONNECTION_REFUSED" not in e]


def test_an_unnamed_export_gets_the_name_its_placeholder_shows(stack, ui):
    alice = stack.client("alice")
    first = create(alice, "csv", taskName="订单 1995-10-01 – 1995-10-31",
                   parameters={"from": "1995-10-01", "to": "1995-10-31"})  # fmt: skip
    wait_state(alice, first.json()["taskId"])
    view = ui(stack).open().sign_in()
    page = view.page
    view.new_export(params={"from": "1995-09-01", "to": "1995-09-30"})
    name = page.locator("#c-name")
    expect(name).to_have_attribute("placeholder", "Orders 1995-09-01 – 1995-09-30")
    page.fill("#c-param-from", "")
    page.fill("#c-param-to", "")
    expect(page.locator("#c-name")).to_have_attribute("placeholder", "Orders, all dates")
    page.fill("#c-param-from", "1995-09-01")
    expect(page.locator("#c-name")).to_have_attribute("placeholder", "Orders from 1995-09-01")
    page.click("#create-submit")
    expect(view.row("Orders from 1995-09-01")).to_have_count(1)
    # "Export again" of an export named by the page: the name follows the new dates.
    view.row("订单 1995-10-01 – 1995-10-31").get_by_role("button", name=re.compile("again")).click()
    expect(page.locator("#c-name")).to_have_value("")
    page.fill("#c-param-to", "1995-10-15")
    expect(name).to_have_attribute("placeholder", "Orders 1995-10-01 – 1995-10-15")


def test_enum_values_read_as_words_in_the_form_and_the_list(stack, ui):
    view = ui(stack, locale="zh-CN").open().sign_in()
    page = view.page
    view.new_export(name="已完成的订单", params={"from": "1995-09-01", "to": "1995-09-30"})
    options = page.locator("#c-param-status option").all_inner_texts()
    assert options == ["不限", "未完成", "已完成", "部分完成"]
    page.select_option("#c-param-status", label="已完成")
    page.select_option("#c-param-priority", label="紧急")
    page.click("#create-submit")
    row = view.row("已完成的订单")
    expect(row.locator(".params")).to_have_text(
        "1995-09-01 – 1995-09-30 · 订单状态：已完成 · 优先级：紧急"
    )
    [task] = stack.client("alice").get("/api/v1/exports").json()["items"]
    assert task["parameters"] == {
        "from": "1995-09-01",
        "to": "1995-09-30",
        "status": "F",
        "priority": "1-URGENT",
    }  # the codes travel; the words are for people
    page.click("#lang-switch")
    expect(row.locator(".params")).to_have_text(
        "1995-09-01 – 1995-09-30 · Order status: Fulfilled · Priority: Urgent"
    )
