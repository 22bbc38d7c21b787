"""With DEBUG off, gunicorn serves the dashboard's CSS and JS itself (whitenoise): the board loads
in Chromium styled and alive, under the Content-Security-Policy."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

from tests.browser.support import CHROMIUM_ARGS, find_chromium
from tests.production.servers import PRODUCTION_SECRET_KEY, ProductionWebServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chromium() -> Iterator[Browser]:
    executable = find_chromium()
    if executable is None:
        pytest.skip("needs Debian's chromium: apt-get install chromium")
    import os

    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable, headless=True, args=CHROMIUM_ARGS
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def _session_cookie(user: User) -> str:
    # The server signs with the production key, so the session must be made with it too.
    with override_settings(SECRET_KEY=PRODUCTION_SECRET_KEY):
        client = Client()
        client.force_login(user)
        return client.cookies[settings.SESSION_COOKIE_NAME].value


def test_the_board_loads_with_its_css_and_js(
    production_web: ProductionWebServer, chromium: Browser
) -> None:
    user = User.objects.create_user("ops", password="ops-pass-1234567")
    context = chromium.new_context(base_url=production_web.url)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": _session_cookie(user),
                "url": production_web.url,
            }
        ]
    )
    page = context.new_page()
    statics: dict[str, int] = {}
    console: list[str] = []
    errors: list[str] = []
    page.on(
        "response",
        lambda r: statics.__setitem__(r.url, r.status) if "/static/" in r.url else None,
    )
    page.on("console", lambda m: console.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    response = page.goto("/")
    assert response is not None and response.status == 200
    page.wait_for_load_state("networkidle")

    assert statics, "the page loaded no static file"
    assert all(status == 200 for status in statics.values()), statics
    # Hashed names from the manifest: they can be cached for a year.
    assert all(any(c == "." for c in url.rsplit("/", 1)[-1]) for url in statics)
    assert any(url.endswith(".css") for url in statics)
    assert page.evaluate("typeof window.htmx") == "object"
    # The stylesheet applied: the body no longer has the browser's default 8 px margin.
    margin = page.evaluate("getComputedStyle(document.body).margin")
    assert margin != "8px"
    assert not errors, errors
    assert not [text for text in console if "Content Security Policy" in text], console
    context.close()


def test_static_files_are_compressed_and_cached_for_long(
    production_web: ProductionWebServer, static_root: Any
) -> None:
    manifest = (static_root / "staticfiles.json").read_text()
    css_name = next(
        name
        for name in __import__("json").loads(manifest)["paths"].values()
        if name.endswith(".css")
    )
    request = urllib.request.Request(
        f"{production_web.url}/static/{css_name}", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Encoding"] == "gzip"
        assert "max-age=315360000" in reply.headers["Cache-Control"]


def test_pages_carry_a_content_security_policy(production_web: ProductionWebServer) -> None:
    with urllib.request.urlopen(production_web.url + "/accounts/login/", timeout=10) as reply:
        policy = reply.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
