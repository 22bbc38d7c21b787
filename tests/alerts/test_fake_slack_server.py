"""The local Slack stand-in itself: what it records and how its script answers."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any
from urllib.error import HTTPError, URLError

import pytest

from scripts.testing.fake_slack import (
    DEFAULT_WEBHOOK_PATH,
    NO_SERVICE,
    OK,
    SERVER_ERROR,
    FakeSlackServer,
    rate_limited,
    slow,
)


def post(url: str, body: bytes | dict[str, Any], timeout: float = 5.0) -> tuple[int, str, dict]:
    """A plain urllib client, independent of the transport under test elsewhere."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def test_it_records_each_request_in_order(slack_server: FakeSlackServer) -> None:
    before = time.monotonic()
    post(slack_server.webhook_url, {"text": "one"})
    post(slack_server.url_for("/services/T1/B1/other"), {"text": "two"})

    first, second = slack_server.wait_for_requests(2)
    assert (first.method, first.path, first.json) == ("POST", DEFAULT_WEBHOOK_PATH, {"text": "one"})
    assert (second.path, second.json) == ("/services/T1/B1/other", {"text": "two"})
    assert first.header("content-type") == "application/json"
    assert first.body == b'{"text": "one"}'
    assert before <= first.received_at <= second.received_at <= time.monotonic()
    assert slack_server.requests_for(DEFAULT_WEBHOOK_PATH) == [first]


def test_it_answers_path_scripts_then_shared_scripts_then_the_default(
    slack_server: FakeSlackServer,
) -> None:
    other = "/services/T1/B1/other"
    slack_server.enqueue(NO_SERVICE, path=other)
    slack_server.enqueue(rate_limited(3), SERVER_ERROR)

    assert post(slack_server.url_for(other), {"text": "a"})[:2] == (404, "no_service")
    status, body, headers = post(slack_server.webhook_url, {"text": "b"})
    assert (status, body, headers["Retry-After"]) == (429, "rate_limited", "3")
    assert post(slack_server.url_for(other), {"text": "c"})[:2] == (500, "rollup_error")
    assert post(slack_server.webhook_url, {"text": "d"})[:2] == (200, "ok")
    slack_server.default = NO_SERVICE
    assert post(slack_server.webhook_url, {"text": "e"})[:2] == (404, "no_service")
    assert [r.reply.status for r in slack_server.requests] == [404, 429, 500, 200, 404]


@pytest.mark.parametrize(
    ("body", "answer"),
    [
        (b"not json", "invalid_payload"),
        (b"[1, 2]", "invalid_payload"),
        (b"{}", "no_text"),
        (
            json.dumps(
                {"blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}]}
            ).encode(),
            "invalid_blocks",
        ),
        (
            json.dumps({"text": "x", "blocks": [{"type": "divider"}] * 51}).encode(),
            "invalid_blocks",
        ),
    ],
)
def test_it_refuses_what_slack_refuses_whatever_the_script(
    slack_server: FakeSlackServer, body: bytes, answer: str
) -> None:
    slack_server.enqueue(OK)
    assert post(slack_server.webhook_url, body)[:2] == (400, answer)
    assert slack_server.pending_replies() == 1  # the scripted reply is still there


def test_block_validation_can_be_turned_off() -> None:
    too_long = {"blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}]}
    with FakeSlackServer(validate_blocks=False) as server:
        assert post(server.webhook_url, too_long)[:2] == (200, "ok")


def test_a_slow_reply_is_held_back(slack_server: FakeSlackServer) -> None:
    slack_server.enqueue(slow(0.3))
    started = time.monotonic()
    assert post(slack_server.webhook_url, {"text": "x"})[:2] == (200, "ok")
    assert time.monotonic() - started >= 0.3


def test_stopping_does_not_wait_for_slow_replies() -> None:
    server = FakeSlackServer().start()
    server.enqueue(slow(60))
    outcome: list[object] = []

    def client() -> None:
        try:
            outcome.append(post(server.webhook_url, {"text": "x"}, timeout=10))
        except (URLError, ConnectionError) as error:  # closed unanswered, as intended
            outcome.append(error)

    thread = threading.Thread(target=client)
    thread.start()
    server.wait_for_requests(1)
    started = time.monotonic()
    server.stop()
    thread.join(timeout=10)
    assert time.monotonic() - started < 3
    assert not thread.is_alive()
    assert len(outcome) == 1 and not isinstance(outcome[0], tuple)


def test_waiting_for_requests_that_never_come_fails_with_a_deadline(
    slack_server: FakeSlackServer,
) -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match="expected 1 request"):
        slack_server.wait_for_requests(1, timeout=0.1)
    assert time.monotonic() - started < 1
