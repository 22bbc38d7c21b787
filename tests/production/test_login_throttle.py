"""Wrong passwords are throttled per username and per address; the right one waits too."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db import connection
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


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_concurrent_logins_checks_at_most_the_limit(
    redis_client: redis.Redis, settings: Settings
) -> None:
    """Issue 23, finding 3: wrong passwords at once, then the right one; each from its own
    address, so only the per-username limit applies. Checked passwords are counted by Django's
    own signals (a failed and a successful authenticate), from real threads and real Redis.
    20 at once, not the issue's 100: each thread holds a connection of the shared PostgreSQL."""
    settings.LOGIN_MAX_FAILURES = 5
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 1000
    User.objects.create_user("ops", password=PASSWORD)
    checked: list[str] = []
    lock = threading.Lock()

    def count(**kwargs: object) -> None:
        with lock:
            checked.append("checked")

    user_login_failed.connect(count, dispatch_uid="burst-test-failed")
    user_logged_in.connect(count, dispatch_uid="burst-test-ok")
    burst = 20
    start = threading.Barrier(burst)

    def wrong(n: int) -> int:
        start.wait(timeout=60)
        try:
            return _login(Client(), "ops", f"wrong-{n}", address=f"198.51.100.{n + 1}")
        finally:
            connection.close()  # this thread's database connection

    try:
        with ThreadPoolExecutor(max_workers=burst) as pool:
            statuses = list(pool.map(wrong, range(burst)))
        right = _login(Client(), "ops", PASSWORD, address="203.0.113.1")
    finally:
        user_login_failed.disconnect(dispatch_uid="burst-test-failed")
        user_logged_in.disconnect(dispatch_uid="burst-test-ok")
    assert len(checked) <= settings.LOGIN_MAX_FAILURES, len(checked)
    assert statuses.count(200) == len(checked)  # the form again: its password was checked
    assert statuses.count(429) == burst - len(checked)
    assert right == 429
