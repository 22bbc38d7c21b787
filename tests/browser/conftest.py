"""Playwright driving Debian's chromium against pytest-django's live server.

Never ``playwright install``: no browser is downloaded. The tests use the system chromium
(``CHROMIUM`` or /usr/bin/chromium); where there is none they skip, saying how to install it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from tests.browser.support import CHROMIUM_ARGS, PageWatch, find_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    executable = find_chromium()
    if executable is None:
        pytest.skip(
            "browser tests need Debian's chromium: apt-get install chromium "
            "(`make test` runs scripts/ensure_system_packages.sh, which installs it when it can)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - playwright is in the dev dependencies
        pytest.skip("browser tests need Playwright for Python: pip install -r requirements.lock")
    # Playwright's sync API keeps an event loop in this thread, and Django refuses ORM calls
    # while one exists. The tests' own ORM calls are plain synchronous code, so allow them for
    # this package only, and put the check back afterwards.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(
                executable_path=executable, headless=True, args=CHROMIUM_ARGS
            )
            yield launched
            launched.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def watch() -> PageWatch:
    return PageWatch()


@pytest.fixture
def page(browser: Browser, live_server: Any, watch: PageWatch) -> Iterator[Page]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    # Generous: a wait is not a speed check (those are benchmarks); at load 4 on 2 cores the
    # Outages page's nine plotly charts took over 10 s to reach "load" in CI.
    context.set_default_timeout(30_000)
    new_page = context.new_page()

    def on_dialog(dialog: Any) -> None:
        watch.dialogs.append(dialog.message)
        dialog.dismiss()

    new_page.on("dialog", on_dialog)
    new_page.on("pageerror", lambda error: watch.errors.append(str(error)))
    yield new_page
    context.close()


@pytest.fixture
def log_in_as(page: Page, live_server: Any) -> Callable[[User], None]:
    """Give the browser a session for a user without going through the form (one test does)."""

    def log_in(user: User) -> None:
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        page.context.add_cookies(
            [{"name": cookie.key, "value": cookie.value, "url": live_server.url}]
        )

    return log_in


@pytest.fixture
def viewer(transactional_db: None) -> User:
    return User.objects.create_user("viewer", password="viewer-pass-123")
