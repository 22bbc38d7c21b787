"""The per-channel Slack send rate, shared through real Redis."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from pytest_django.fixtures import Settings

from breakers.alerts.ratelimit import ChannelRateLimiter, limiter_from_settings

CHANNEL = "https://hooks.slack.com/services/T0/B0/XXXXXXXXXXXXXXXXXXXXsecret"


class FakeClock:
    """Seconds that only move when a test says so."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _client() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=settings.REDIS_SOCKET_TIMEOUT,
        socket_connect_timeout=settings.REDIS_SOCKET_TIMEOUT,
    )


@pytest.fixture
def clients(redis_client: redis.Redis) -> Iterator[list[redis.Redis]]:
    """Separate connections, as separate worker processes would hold (db flushed by
    ``redis_client``)."""
    made = [_client() for _ in range(8)]
    yield made
    for client in made:
        client.close()


def test_the_first_message_goes_at_once_and_the_next_waits_a_second(
    redis_client: redis.Redis, clock: FakeClock
) -> None:
    limiter = ChannelRateLimiter(redis_client, clock=clock)
    assert limiter.try_acquire(CHANNEL) == 0.0
    assert limiter.try_acquire(CHANNEL) == 1.0
    clock.advance(0.4)
    assert limiter.try_acquire(CHANNEL) == pytest.approx(0.6)
    clock.advance(0.6)
    assert limiter.try_acquire(CHANNEL) == 0.0
    assert limiter.try_acquire(CHANNEL) == 1.0


def test_a_refused_attempt_does_not_push_the_next_slot_back(
    redis_client: redis.Redis, clock: FakeClock
) -> None:
    limiter = ChannelRateLimiter(redis_client, clock=clock)
    limiter.try_acquire(CHANNEL)
    for _ in range(5):
        assert limiter.try_acquire(CHANNEL) == 1.0
    clock.advance(1.0)
    assert limiter.try_acquire(CHANNEL) == 0.0


def test_a_hold_pushes_the_next_slot_back_and_never_shortens_a_longer_one(
    redis_client: redis.Redis, clock: FakeClock
) -> None:
    limiter = ChannelRateLimiter(redis_client, clock=clock)
    other = ChannelRateLimiter(redis_client, clock=clock)  # another worker process
    assert limiter.hold(CHANNEL, 2.0) == 2.0
    assert other.try_acquire(CHANNEL) == 2.0
    assert limiter.hold(CHANNEL, 0.5) == 2.0
    clock.advance(1.5)
    assert other.try_acquire(CHANNEL) == pytest.approx(0.5)
    clock.advance(0.5)
    assert other.try_acquire(CHANNEL) == 0.0
    assert other.try_acquire(CHANNEL) == 1.0
    assert limiter.try_acquire("https://hooks.slack.com/services/T0/B1/other") == 0.0


def test_two_processes_share_one_limit(clients: list[redis.Redis], clock: FakeClock) -> None:
    first = ChannelRateLimiter(clients[0], clock=clock)
    second = ChannelRateLimiter(clients[1], clock=clock)
    assert first.try_acquire(CHANNEL) == 0.0
    assert second.try_acquire(CHANNEL) == 1.0
    clock.advance(1.0)
    assert second.try_acquire(CHANNEL) == 0.0
    assert first.try_acquire(CHANNEL) == 1.0


def test_racing_senders_get_exactly_one_slot(clients: list[redis.Redis], clock: FakeClock) -> None:
    limiters = [ChannelRateLimiter(client, clock=clock) for client in clients]
    start = threading.Barrier(len(limiters))
    waits: list[float] = []
    lock = threading.Lock()

    def send(limiter: ChannelRateLimiter) -> None:
        start.wait(timeout=5)
        wait = limiter.try_acquire(CHANNEL)
        with lock:
            waits.append(wait)

    threads = [threading.Thread(target=send, args=(limiter,)) for limiter in limiters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(waits) == [0.0] + [1.0] * (len(limiters) - 1)


def test_channels_are_paced_independently(redis_client: redis.Redis, clock: FakeClock) -> None:
    limiter = ChannelRateLimiter(redis_client, clock=clock)
    assert limiter.try_acquire("channel-a") == 0.0
    assert limiter.try_acquire("channel-b") == 0.0
    assert limiter.try_acquire("channel-a") == 1.0


def test_a_burst_goes_at_once_then_the_rate_holds(
    redis_client: redis.Redis, clock: FakeClock
) -> None:
    limiter = ChannelRateLimiter(redis_client, burst=3, interval=1.0, clock=clock)
    assert [limiter.try_acquire(CHANNEL) for _ in range(4)] == [0.0, 0.0, 0.0, 1.0]
    clock.advance(1.0)
    assert limiter.try_acquire(CHANNEL) == 0.0
    assert limiter.try_acquire(CHANNEL) == 1.0


def test_the_interval_is_configurable(redis_client: redis.Redis, clock: FakeClock) -> None:
    limiter = ChannelRateLimiter(redis_client, interval=0.25, clock=clock)
    assert limiter.try_acquire(CHANNEL) == 0.0
    assert limiter.try_acquire(CHANNEL) == 0.25


def test_keys_expire_and_do_not_reveal_the_webhook(
    redis_client: redis.Redis, clock: FakeClock
) -> None:
    limiter = ChannelRateLimiter(redis_client, clock=clock)
    limiter.try_acquire(CHANNEL)
    [raw_key] = redis_client.keys("*")
    key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
    assert key == limiter.key_for(CHANNEL)
    assert "secret" not in key and "hooks" not in key
    assert 0 < redis_client.pttl(key) <= 1000


def test_without_a_clock_redis_time_paces_real_senders(clients: list[redis.Redis]) -> None:
    first, second = (ChannelRateLimiter(client) for client in clients[:2])
    assert first.try_acquire(CHANNEL) == 0.0
    wait = second.try_acquire(CHANNEL)
    assert 0.0 < wait <= 1.0


def test_an_unreachable_redis_lets_the_alert_go_quickly(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens there any more.
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    settings.REDIS_SOCKET_TIMEOUT = 0.5
    limiter = limiter_from_settings()
    started = time.monotonic()
    assert limiter.try_acquire(CHANNEL) == 0.0
    assert time.monotonic() - started < 1.5
    assert any("unavailable" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("interval", "burst"), [(0, 1), (-1, 1), (1, 0), (1, 1.5), (1, True)])
def test_bad_settings_are_refused(redis_client: redis.Redis, interval: float, burst: int) -> None:
    with pytest.raises(ValueError):
        ChannelRateLimiter(redis_client, interval=interval, burst=burst)


def test_the_settings_limiter_uses_the_project_redis_with_timeouts(
    redis_client: redis.Redis, settings: Settings
) -> None:
    settings.REDIS_SOCKET_TIMEOUT = 1.5
    limiter = limiter_from_settings()
    try:
        kwargs = limiter.client.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == 1.5
        assert kwargs["socket_connect_timeout"] == 1.5
        assert limiter.try_acquire(CHANNEL) == 0.0
        # Same database as the test's own client: the key is visible there.
        assert redis_client.exists(limiter.key_for(CHANNEL)) == 1
    finally:
        limiter.client.close()
