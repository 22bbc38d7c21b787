"""Is a request Slack's, now, and new? Against the real Redis; the clock is passed in."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from breakers.slack.verify import RequestRefused, verify_slack_request
from scripts.slack_standin import sign
from scripts.testing.processes import free_port

SECRET = "verify-secret"
NOW = 1_764_838_800.0
BODY = b"payload=%7B%22type%22%3A%22block_actions%22%7D"


def headers(timestamp: str, body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": sign(secret, timestamp, body),
    }


def verify(seen: redis.Redis, head: dict[str, str], body: bytes = BODY, now: float = NOW) -> None:
    verify_slack_request(body=body, headers=head, signing_secret=SECRET, seen=seen, now=lambda: now)


def refused(seen: redis.Redis, head: dict[str, str], **kwargs: object) -> RequestRefused:
    with pytest.raises(RequestRefused) as caught:
        verify(seen, head, **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_a_fresh_signed_request_passes_once(fleet_redis: redis.Redis) -> None:
    head = headers(str(int(NOW)))
    verify(fleet_redis, head)
    again = refused(fleet_redis, head)
    assert (again.status, again.why) == (401, "this request was already received (a replay)")


def test_the_window_is_five_minutes_either_way(fleet_redis: redis.Redis) -> None:
    verify(fleet_redis, headers(str(int(NOW) - 299)))
    verify(fleet_redis, headers(str(int(NOW) + 299)))
    for skew in (-301, 301):
        why = refused(fleet_redis, headers(str(int(NOW) + skew)))
        assert (why.status, why.why) == (401, "the request's timestamp is more than 5 minutes off")


def test_a_changed_body_or_another_secret_is_refused(fleet_redis: redis.Redis) -> None:
    stamp = str(int(NOW))
    assert refused(fleet_redis, headers(stamp), body=BODY + b"x").status == 401
    assert "does not match" in refused(fleet_redis, headers(stamp, secret="other")).why


@pytest.mark.parametrize("stamp", ["", "abc", "-5", "1e9", "9" * 40])
def test_a_malformed_timestamp_is_a_400(fleet_redis: redis.Redis, stamp: str) -> None:
    head = {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": "v0=00"}
    assert refused(fleet_redis, head).status in ((401,) if stamp == "" else (400,))


def test_without_redis_a_replay_cannot_be_ruled_out_so_it_is_refused() -> None:
    dead = redis.Redis(
        port=free_port(),
        socket_connect_timeout=0.2,
        socket_timeout=0.2,
        retry=Retry(NoBackoff(), 0),
    )
    why = refused(dead, headers(str(int(NOW))))
    assert why.status == 503 and "Redis" in why.why
