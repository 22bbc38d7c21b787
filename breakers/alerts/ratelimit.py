"""A per-channel send rate shared by every process through Redis (GCRA, one Lua script): it
returns the wait instead of sleeping, and ``hold`` pushes a whole channel back after a 429.
Why: docs/adr/0011-per-channel-gcra-rate-limit-in.md.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = ("ChannelRateLimiter", "limiter_from_settings")

logger = logging.getLogger(__name__)

# KEYS[1] channel key; ARGV: now in ms ("" = Redis TIME), emission interval ms, burst size.
# Returns 0 when the slot was taken, else the milliseconds to wait before it can be.
_GCRA = """
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local interval = tonumber(ARGV[2])
local tolerance = (tonumber(ARGV[3]) - 1) * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait > 0 then return wait end
local next_tat = tat + interval
redis.call('SET', KEYS[1], next_tat, 'PX', next_tat - now)
return 0
"""


# KEYS[1] channel key; ARGV: now in ms ("" = Redis TIME), hold ms, emission interval ms, burst.
# Moves the next slot to now + hold unless it is already later; returns the resulting wait in ms.
_HOLD = """
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local hold = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local tolerance = (tonumber(ARGV[4]) - 1) * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
local held = now + hold + tolerance
if tat < held then
  tat = held
  redis.call('SET', KEYS[1], tat, 'PX', tat - now)
end
local wait = tat - tolerance - now
if wait < 0 then return 0 end
return wait
"""


class ChannelRateLimiter:
    """At most ``burst`` messages at once, then one per ``interval`` seconds, per channel."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        interval: float = 1.0,
        burst: int = 1,
        clock: Callable[[], float] | None = None,
        prefix: str = "bp:slack:rate:",
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be positive, got {interval!r}")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be a positive integer, got {burst!r}")
        self.client = client
        self.interval_ms = max(1, round(interval * 1000))
        self.burst = burst
        self.clock = clock
        self.prefix = prefix
        self._script = client.register_script(_GCRA)
        self._hold = client.register_script(_HOLD)

    def key_for(self, channel: str) -> str:
        # Hashed: a channel may be named by its webhook URL, and that is a secret.
        digest = hashlib.sha256(channel.encode()).hexdigest()[:32]
        return f"{self.prefix}{digest}"

    def try_acquire(self, channel: str) -> float:
        """Take the channel's next send slot: 0.0 if taken, else seconds to wait and ask again.

        If Redis cannot be reached this answers 0.0 (send now) and logs it: an alert about an
        outage matters more than pacing, and Slack's own 429 + Retry-After is the backstop.
        """
        now = "" if self.clock is None else str(int(self.clock() * 1000))
        try:
            wait_ms = self._script(
                keys=[self.key_for(channel)], args=[now, self.interval_ms, self.burst]
            )
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            logger.warning("Slack rate limiter unavailable, sending unpaced: %s", exc)
            return 0.0
        return int(wait_ms) / 1000

    def hold(self, channel: str, seconds: float) -> float:
        """Let nothing be sent on ``channel`` for ``seconds`` (Slack said 429 + Retry-After).

        The next slot only ever moves later, so a shorter hold never shortens a longer one.
        Returns the channel's wait in seconds afterwards; 0.0 if Redis cannot be reached (the
        caller still waits itself, and Slack answers 429 again if others came too early).
        """
        if not seconds > 0:
            return 0.0
        now = "" if self.clock is None else str(int(self.clock() * 1000))
        hold_ms = max(1, math.ceil(seconds * 1000))
        try:
            wait_ms = self._hold(
                keys=[self.key_for(channel)], args=[now, hold_ms, self.interval_ms, self.burst]
            )
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            logger.warning("Slack rate limiter unavailable, channel not held: %s", exc)
            return 0.0
        return int(wait_ms) / 1000


def limiter_from_settings(*, interval: float = 1.0, burst: int = 1) -> ChannelRateLimiter:
    """A limiter on the project's Redis, with the configured socket timeouts.

    redis-py 8 retries a failed command 10 times with exponential backoff by default, which
    would turn a dead Redis into seconds of stall per alert whatever the socket timeout; one
    immediate retry (for a pooled connection the server closed) is enough here.
    """
    from django.conf import settings

    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=settings.REDIS_SOCKET_TIMEOUT,
        socket_connect_timeout=settings.REDIS_SOCKET_TIMEOUT,
        retry=Retry(NoBackoff(), 1),
    )
    return ChannelRateLimiter(client, interval=interval, burst=burst)
