"""Webhook URLs: what is accepted, and how one is shown without its secret."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from breakers.transports.slack import mask_webhook_url, validate_webhook_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXxyz",
            "https://hooks.slack.com/services/T0000/B0000/…xyz",
        ),
        ("https://hooks.slack.com/services/T0/B0/abc", "https://hooks.slack.com/services/T0/B0/…"),
        (
            "https://u:pw@hooks.slack.com/services/T/B/secretsecretsecret?token=abc#frag",
            "https://hooks.slack.com/services/T/B/…ret",
        ),
        (
            "http://127.0.0.1:8080/services/T/B/secretsecret123",
            "http://127.0.0.1:8080/services/T/B/…123",
        ),
        ("https://hooks.slack.com/", "https://hooks.slack.com/…"),
        ("https://hooks.slack.com", "https://hooks.slack.com/…"),
        ("", "…"),
        ("not a url", "…"),
        ("https://host:abc/x", "…"),
        ("https://[::1/x", "…"),
    ],
)
def test_a_masked_url_keeps_where_it_goes_and_hides_the_secret(url: str, shown: str) -> None:
    assert mask_webhook_url(url) == shown


@given(
    secret=st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        min_size=12,
        max_size=64,
    )
)
def test_no_more_than_three_characters_of_a_secret_are_ever_shown(secret: str) -> None:
    masked = mask_webhook_url(f"https://hooks.slack.com/services/T0/B0/{secret}")
    assert masked == f"https://hooks.slack.com/services/T0/B0/…{secret[-3:]}"
    assert secret[:-3] not in masked


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com/services/T0/B0/secret",
        "  https://hooks.slack.com/services/T0/B0/secret  ",
        "http://127.0.0.1:9999/services/T0/B0/secret",
        "http://localhost/hook",
        "http://[::1]:8000/hook",
    ],
)
def test_webhook_urls_that_are_accepted(url: str) -> None:
    assert validate_webhook_url(url) == url.strip()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://hooks.slack.com/services/T/B/x", "https://"),
        ("hooks.slack.com/services/T/B/x", "https://"),
        ("http://hooks.slack.com/services/T/B/x", "loopback"),
        ("http://10.0.0.8/services/T/B/x", "loopback"),
        ("https://user:pw@hooks.slack.com/services/T/B/x", "user name or password"),
        ("https://hooks.slack.com/", "needs its path"),
        ("https://hooks.slack.com:99999/services/T/B/x", "not a URL"),
    ],
)
def test_webhook_urls_that_are_refused_say_why(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        validate_webhook_url(url)
