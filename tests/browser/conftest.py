"""Fixtures of the browser tests: Debian's Chromium driven by Playwright for Python.

Each test gets a stack on loopback (``make_stack``, SQLite: the page is the subject here,
the databases are covered by the integration suite) and one or more pages of a fresh
browser context. Every page records console errors and uncaught exceptions; at teardown
the test fails if any appeared, except Chromium's "Failed to load resource: the server
responded with a status of N" lines for the statuses the test declared it provokes
(``ui.allow(422)``). Each page leaves a screenshot in ``test-artifacts/screenshots/``.

Without Chromium (or Playwright) the tests skip locally and FAIL in CI.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import Stack

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
_STATUS = re.compile(r"^Failed to load resource: the server responded with a status of (\d{3})")


def in_ci() -> bool:
    """``CI`` set to anything but an empty or false value (as scripts/test.sh reads it)."""
    return os.environ.get("CI", "") not in ("", "0", "false", "False", "FALSE", "no")


def chromium_path() -> str | None:
    """``EXPORT_CENTER_TEST_CHROMIUM``, else Debian's ``chromium`` on PATH."""
    for candidate in (
        os.environ.get("EXPORT_CENTER_TEST_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _missing(what: str) -> None:
    if in_ci():
        pytest.fail(f"{what}: browser tests must run in CI (scripts/test.sh installs it)")
    pytest.skip(f"{what} (scripts/test.sh installs it)")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One Chromium for the session."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed")
    path = chromium_path()
    if path is None:
        _missing("Chromium is not installed (Debian package chromium)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(params=["sqlite"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLite only: the browser tests test the page, not the database."""
    yield f"sqlite:///{tmp_path / 'export-center.db'}"


@dataclass
class Ui:
    """A page of the download center and what its console said."""

    page: Any
    stack: Stack
    errors: list[str] = field(default_factory=list)
    allowed: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        return self.stack.url + "/"

    def allow(self, *statuses: int) -> None:
        """Statuses this test provokes on purpose (Chromium logs each one as an error)."""
        self.allowed.update(statuses)

    def unexpected(self) -> list[str]:
        out = []
        for line in self.errors:
            match = _STATUS.match(line)
            if match and int(match.group(1)) in self.allowed:
                continue
            out.append(line)
        return out

    # -- common steps

    def open(self) -> Ui:
        self.page.goto(self.url)
        return self

    def sign_in(self, user: str = "alice", tenant: str = "t1", *, role: str = "user") -> Ui:
        """The development sign-in, as a person fills it in."""
        page = self.page
        page.locator("#dev-form").wait_for()
        page.fill("#dev-user", user)
        page.fill("#dev-tenant", tenant)
        page.check(f'#dev-form input[name="role"][value="{role}"]')
        page.click('#dev-form button[type="submit"]')
        page.locator("#center").wait_for()
        return self

    def row(self, name: str) -> Any:
        """The table row of the task named ``name``."""
        name_cell = self.page.locator(".task-name", has_text=name)
        return self.page.locator("#tasks-body tr", has=name_cell)

    def new_export(
        self,
        *,
        export_type: str = "ORDERS",
        name: str | None = None,
        fmt: str = "csv",
        params: dict[str, str] | None = None,
    ) -> None:
        page = self.page
        page.click("#new-export")
        page.locator("#create").wait_for()
        page.select_option("#c-type", export_type)
        if name is not None:
            page.fill("#c-name", name)
        page.check(f'input[name="format"][value="{fmt}"]')
        for key, value in (params or {}).items():
            field_ = page.locator(f"#c-param-{key}")
            if field_.evaluate("el => el.tagName") == "SELECT":
                field_.select_option(value)
            else:
                field_.fill(value)


@pytest.fixture
def ui(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Ui]]:
    """``ui(stack, viewport=(w, h), locale=..., **context_options)`` opens a new page."""
    opened: list[Ui] = []
    contexts: list[Any] = []

    def factory(
        stack: Stack,
        *,
        viewport: tuple[int, int] = (1280, 800),
        locale: str = "en-US",
        timezone_id: str = "Asia/Shanghai",
        **options: Any,
    ) -> Ui:
        context = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]},
            locale=locale,
            timezone_id=timezone_id,
            accept_downloads=True,
            **options,
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        session = Ui(page, stack)
        page.on("console", lambda m: m.type == "error" and session.errors.append(m.text))
        page.on("pageerror", lambda e: session.errors.append(f"uncaught: {e}"))
        opened.append(session)
        return session

    yield factory
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    problems = []
    for i, session in enumerate(opened):
        suffix = f"-{i + 1}" if i else ""
        if session.page.is_closed():
            problems += session.unexpected()
            continue
        try:
            session.page.screenshot(path=str(SCREENSHOTS / f"{stem}{suffix}.png"))
        except Exception as exc:  # a crashed page still reports its console below
            problems.append(f"screenshot failed: {exc}")
        problems += session.unexpected()
    for context in contexts:
        context.close()
    assert not problems, f"console errors on the page: {problems}"
