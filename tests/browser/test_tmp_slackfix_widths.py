from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from breakers.access.operators import operators_group
from tests.browser.test_layout_widths import axe_source, page_problems, replay_like  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.mark.timeout(600)
@pytest.mark.parametrize("width", [390, 1440])
def test_tmp(browser: Any, live_server: Any, replay_like: dict[str, int], width: int) -> None:  # noqa: F811
    axe = axe_source()
    context = browser.new_context(base_url=live_server.url, viewport={"width": width, "height": 844})
    context.set_default_timeout(60_000)
    page = context.new_page()
    user = User.objects.create_user("ops", password="ops-pass-1234567", is_staff=True)
    user.groups.add(operators_group())
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    found = {}
    for path in ["/", f"/tools/{replay_like['tool']}/"]:
        page.goto(path, wait_until="load")
        assert page.locator("[data-silenced], #silence").count() >= 1, path
        found[path] = page_problems(page, width=width, axe=axe)
    context.close()
    assert found == {"/": [], f"/tools/{replay_like['tool']}/": []}
