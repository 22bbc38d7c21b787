"""Logging in and being kept out, in a real browser."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def test_anonymous_user_lands_on_the_login_page(page: Page) -> None:
    page.goto("/runs/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/runs/$"))
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    expect(page.get_by_role("link", name="Audit log")).to_have_count(0)


def test_user_logs_in_with_the_form_and_out_again(page: Page, viewer: User) -> None:
    page.goto("/runs/")
    page.get_by_label("Username").fill("viewer")
    page.get_by_label("Password").fill("viewer-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/runs/$"))
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    expect(page.locator(".session .user")).to_have_text("viewer")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))
    page.goto("/runs/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


def test_wrong_password_is_refused(page: Page, viewer: User) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill("viewer")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("enter a correct username and password")
