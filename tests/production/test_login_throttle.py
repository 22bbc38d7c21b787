"""Wrong passwords are throttled per username and per address; the right one waits too."""

from __future__ import annotations

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

pytestmark = pytest.mark.django_db

PASSWORD = "the-right-pass-123"


@pytest.fixture
def operator(redis_client: redis.Redis) -> User:
    return User.objects.create_user("ops", password=PASSWORD)


def _login(client: Client, username: str, password: str, address: str = "127.0.0.1") -> int:
    response = client.post(
        "/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address
    )
    return response.status_code


def test_the_right_password_is_refused_after_too_many_wrong_ones(
    client: Client, operator: User, settings: Settings
) -> None:
    settings.LOGIN_MAX_FAILURES = 5
    for _ in range(5):
        assert _login(client, "ops", "wrong") == 200  # the form again, with its error
    response = client.post("/accounts/login/", {"username": "ops", "password": PASSWORD})
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # The lock is on that username ("OPS" is the same one), not on everyone.
    assert _login(client, "OPS ", PASSWORD) == 429
    User.objects.create_user("other", password=PASSWORD)
    assert _login(Client(), "other", PASSWORD) == 302


def test_one_address_guessing_many_usernames_is_throttled(
    client: Client, operator: User, settings: Settings
) -> None:
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 4
    for n in range(4):
        _login(client, f"guess-{n}", "wrong", address="198.51.100.7")
    assert _login(client, "ops", PASSWORD, address="198.51.100.7") == 429
    assert _login(Client(), "ops", PASSWORD, address="198.51.100.8") == 302


def test_a_successful_login_before_the_limit_works(client: Client, operator: User) -> None:
    for _ in range(3):
        _login(client, "ops", "wrong")
    assert _login(client, "ops", PASSWORD) == 302
