"""SlackTransport against a real local HTTP server playing Slack, through slack_sdk's client."""

from __future__ import annotations

import logging
import math
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from pytest_django.fixtures import Settings

from breakers.transports import TransportError
from breakers.transports.slack import (
    MAX_RETRY_AFTER_SECONDS,
    SlackTransport,
    parse_retry_after,
)
from breakers.transports.slack_messages import OpenedAlert, SlackMessage, build_opened_message
from scripts.testing.fake_slack import (
    CHANNEL_ARCHIVED,
    DEFAULT_WEBHOOK_PATH,
    DROP,
    INVALID_PAYLOAD,
    INVALID_TOKEN,
    NO_SERVICE,
    OK,
    SERVER_ERROR,
    FakeSlackServer,
    Reply,
    rate_limited,
    slow,
)

SECRET = DEFAULT_WEBHOOK_PATH.rsplit("/", 1)[1]


def _message() -> SlackMessage:
    return build_opened_message(
        OpenedAlert(
            tool="web_search",
            state="open",
            reason="5 consecutive retryable failures",
            since=datetime(2026, 11, 29, 9, 12, 4, tzinfo=UTC),
            consecutive_failures=5,
            workers=("research-worker-3", "research-worker-7"),
            runs_affected=14,
            incident_url="https://panel.example/incidents/42",
        )
    )


def _transport(server: FakeSlackServer, timeout: float = 2.0) -> SlackTransport:
    return SlackTransport(server.webhook_url, timeout=timeout)


def _failure(server: FakeSlackServer, reply: Reply, timeout: float = 2.0) -> TransportError:
    server.enqueue(reply)
    with pytest.raises(TransportError) as info:
        _transport(server, timeout).notify(_message())
    return info.value


def test_ok_answer_delivers_the_message_once(slack_server: FakeSlackServer) -> None:
    message = _message()
    _transport(slack_server).notify(message)

    [request] = slack_server.wait_for_requests(1)
    assert request.method == "POST"
    assert request.path == DEFAULT_WEBHOOK_PATH
    assert request.json == message.as_payload()
    assert request.header("Content-Type") == "application/json;charset=utf-8"
    assert request.reply == OK


def test_429_is_retryable_after_the_retry_after_header(slack_server: FakeSlackServer) -> None:
    error = _failure(slack_server, rate_limited(7))
    assert not error.permanent
    assert not error.channel_broken
    assert error.retry_after == 7.0
    assert error.code == "rate_limited"
    # slack_sdk's own 429 handler would have slept and retried inside notify(): it must not.
    assert len(slack_server.requests) == 1


def test_429_retry_after_as_an_http_date(slack_server: FakeSlackServer) -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    error = _failure(slack_server, rate_limited(format_datetime(when, usegmt=True)))
    assert error.retry_after is not None
    assert 25 <= error.retry_after <= 31


def test_429_without_retry_after_leaves_the_wait_to_the_caller(
    slack_server: FakeSlackServer,
) -> None:
    error = _failure(slack_server, Reply(429, "rate_limited"))
    assert not error.permanent
    assert error.retry_after is None


def test_429_with_an_absurd_retry_after_is_capped(slack_server: FakeSlackServer) -> None:
    error = _failure(slack_server, rate_limited(10**9))
    assert error.retry_after == MAX_RETRY_AFTER_SECONDS


@pytest.mark.parametrize(
    "reply",
    [SERVER_ERROR, Reply(502, "bad gateway"), Reply(503, ""), Reply(504, "x"), Reply(408, "")],
    ids=["500", "502", "503", "504", "408"],
)
def test_server_errors_are_retryable(slack_server: FakeSlackServer, reply: Reply) -> None:
    error = _failure(slack_server, reply)
    assert not error.permanent
    assert not error.channel_broken
    assert error.retry_after is None
    assert error.code == f"http_{reply.status}"
    assert str(reply.status) in error.message
    assert len(slack_server.requests) == 1


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (NO_SERVICE, "no_service"),
        (INVALID_TOKEN, "invalid_token"),
        (CHANNEL_ARCHIVED, "channel_is_archived"),
        (Reply(404, "channel_not_found"), "channel_not_found"),
        (Reply(403, "action_prohibited"), "action_prohibited"),
        (Reply(400, "no_service_id"), "no_service_id"),
        (Reply(404, "<html>Not Found</html>"), "http_404"),
    ],
    ids=lambda value: value if isinstance(value, str) else f"{value.status}",
)
def test_a_dead_webhook_is_permanent_and_breaks_the_channel(
    slack_server: FakeSlackServer, reply: Reply, code: str
) -> None:
    error = _failure(slack_server, reply)
    assert error.permanent
    assert error.channel_broken
    assert error.code == code
    assert str(reply.status) in error.message


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (INVALID_PAYLOAD, "invalid_payload"),
        (Reply(400, "invalid_blocks"), "invalid_blocks"),
        (Reply(413, "request_too_large"), "request_too_large"),
    ],
    ids=["invalid_payload", "invalid_blocks", "413"],
)
def test_a_rejected_message_is_permanent_but_the_channel_is_fine(
    slack_server: FakeSlackServer, reply: Reply, code: str
) -> None:
    error = _failure(slack_server, reply)
    assert error.permanent
    assert not error.channel_broken
    assert error.code == code


def test_blocks_that_slack_would_refuse_are_a_permanent_failure(
    slack_server: FakeSlackServer,
) -> None:
    # Built by hand past the header limit: the stand-in validates with slack_sdk's models.
    too_long = SlackMessage(
        text="x", blocks=({"type": "header", "text": {"type": "plain_text", "text": "h" * 151}},)
    )
    with pytest.raises(TransportError) as info:
        _transport(slack_server).notify(too_long)
    assert info.value.permanent
    assert info.value.code == "invalid_blocks"


def test_a_2xx_that_is_not_slack_is_permanent(slack_server: FakeSlackServer) -> None:
    error = _failure(slack_server, Reply(200, "<html>captive portal</html>"))
    assert error.permanent
    assert not error.channel_broken
    assert error.code == "http_200"


@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_is_never_taken_for_delivery(slack_server: FakeSlackServer, status: int) -> None:
    # urllib turns a POST that gets 302 into a body-less GET (our stand-in answers 405) and
    # refuses to re-POST on 307: either way the message was not delivered, and retrying the
    # same URL cannot change that.
    error = _failure(slack_server, Reply(status, "", {"Location": "/moved"}))
    assert error.permanent
    assert not error.channel_broken


def test_a_slow_answer_times_out_as_retryable(slack_server: FakeSlackServer) -> None:
    started = time.monotonic()
    error = _failure(slack_server, slow(10), timeout=0.3)
    elapsed = time.monotonic() - started

    assert error.code == "timeout"
    assert not error.permanent
    assert 0.25 <= elapsed < 2.0
    assert len(slack_server.requests) == 1  # it arrived; only the answer was too late


def test_the_timeout_defaults_to_the_setting(
    slack_server: FakeSlackServer, settings: Settings
) -> None:
    settings.SLACK_TIMEOUT_SECONDS = 0.25
    transport = SlackTransport(slack_server.webhook_url)
    assert transport.timeout == 0.25
    assert transport.client.timeout == 0.25

    slack_server.enqueue(slow(10))
    started = time.monotonic()
    with pytest.raises(TransportError, match="did not answer"):
        transport.notify(_message())
    assert time.monotonic() - started < 2.0


def test_a_dropped_connection_is_retryable_and_not_retried_inside(
    slack_server: FakeSlackServer,
) -> None:
    error = _failure(slack_server, DROP)
    assert error.code == "connection"
    assert not error.permanent
    # slack_sdk retries a reset connection once by default; retries are the task's job.
    assert len(slack_server.requests) == 1


def test_a_refused_connection_is_retryable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more.
    transport = SlackTransport(f"http://127.0.0.1:{port}/services/T/B/secret", timeout=1)
    with pytest.raises(TransportError) as info:
        transport.notify(_message())
    assert info.value.code == "connection"
    assert not info.value.permanent


@pytest.mark.parametrize(
    "reply", [NO_SERVICE, SERVER_ERROR, rate_limited(1), slow(10), DROP, INVALID_PAYLOAD]
)
def test_the_webhook_secret_never_reaches_errors_or_logs(
    slack_server: FakeSlackServer, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    error = _failure(slack_server, reply, timeout=0.3)
    transport = _transport(slack_server)
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert SECRET not in repr(transport)
    assert SECRET not in caplog.text


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf])
def test_a_bad_timeout_is_refused(slack_server: FakeSlackServer, timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout"):
        SlackTransport(slack_server.webhook_url, timeout=timeout)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.slack.com/services/T/B/x",
        "http://hooks.slack.com/services/T/B/x",
        "https://user:pw@hooks.slack.com/services/T/B/x",
        "https://hooks.slack.com",
        "https://hooks.slack.com:abc/services/T/B/x",
        "not a url",
        "",
    ],
)
def test_a_bad_webhook_url_is_refused_before_any_request(
    slack_server: FakeSlackServer, url: str
) -> None:
    with pytest.raises(ValueError):
        SlackTransport(url, timeout=1)
    assert slack_server.requests == []


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-5", 0.0),
        ("0", 0.0),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("", None),
        (None, None),
        ("Sun, 29 Nov 2026 09:12:34 GMT", 30.0),
        ("Sun, 29 Nov 2026 09:11:00 GMT", 0.0),
    ],
)
def test_retry_after_parsing(header: str | None, expected: float | None) -> None:
    now = datetime(2026, 11, 29, 9, 12, 4, tzinfo=UTC)
    assert parse_retry_after(header, now=now) == expected
