"""Run a command with a Redis database and a PostgreSQL test database name of its own.

Test sessions and benchmark runs share one Redis server and one PostgreSQL server with other runs
on the same machine. Each claims a free Redis database number (a key in database 0, taken with
SET NX and a time limit, so a crashed run frees it by itself) and derives its test database name
from it. An unclaimed database holding keys is passed by, unless every key in it has been
untouched for STALE_SECONDS (what a killed run leaves): then it is emptied and taken. Explicit
TEST_REDIS_URL / TEST_DATABASE_NAME in the environment win.

    scripts/own_services.py -- pytest -q
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from itertools import islice
from urllib.parse import urlsplit, urlunsplit

import redis

CLAIM_SECONDS = 4 * 3600  # longer than any test session or benchmark run
STALE_SECONDS = 30 * 60  # a live run (claimed or started by hand) touches its keys more often
SERVER_URL = os.environ.get("TEST_REDIS_SERVER", "redis://127.0.0.1:6379/0")


def _claim(client: redis.Redis, owner: str) -> int:
    # From the top down: databases given by hand (tests run with TEST_REDIS_URL=.../1) sit low.
    # A database that holds keys is in use by a run that did not claim it: pass it by.
    for number in range(15, 0, -1):
        key = f"breaker-panel:db-claim:{number}"
        if client.set(key, owner, nx=True, ex=CLAIM_SECONDS):
            if not _in_use(number):
                return number
            client.delete(key)
    sys.exit("error: every Redis database 1-15 is claimed or in use by another run")


def _in_use(number: int) -> bool:
    other = redis.Redis.from_url(_with_db(SERVER_URL, number), socket_timeout=5)
    try:
        keys = list(islice(other.scan_iter(count=500), 1001))
        if not keys:
            return False
        if len(keys) > 1000:
            return True
        with other.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.object("idletime", key)
            idle = [seconds for seconds in pipe.execute() if seconds is not None]
        if idle and min(idle) < STALE_SECONDS:
            return True
        print(
            f"own_services: Redis database {number} held {len(keys)} keys untouched for "
            f"{STALE_SECONDS // 60}+ min and no claim: emptied and taken",
            file=sys.stderr,
        )
        other.flushdb()
        return False
    finally:
        other.close()


def _with_db(url: str, number: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{number}"))


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    if not command:
        sys.exit("usage: own_services.py -- COMMAND [ARGS...]")
    env = dict(os.environ)
    client = None
    number = None
    owner = f"{os.uname().nodename}:{os.getpid()}"
    if env.get("TEST_REDIS_URL"):
        env["REDIS_URL"] = env["TEST_REDIS_URL"]
    else:
        client = redis.Redis.from_url(SERVER_URL, socket_timeout=5, socket_connect_timeout=5)
        number = _claim(client, owner)
        env["REDIS_URL"] = _with_db(SERVER_URL, number)
        redis.Redis.from_url(env["REDIS_URL"], socket_timeout=5).flushdb()
    env.setdefault("TEST_DATABASE_NAME", f"test_bp_{number if number is not None else os.getpid()}")
    child = subprocess.Popen(command, env=env)
    signal.signal(signal.SIGINT, lambda *_: child.send_signal(signal.SIGINT))
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    try:
        return child.wait()
    finally:
        if client is not None and number is not None:
            key = f"breaker-panel:db-claim:{number}"
            if client.get(key) == owner.encode():
                # Leave it empty: a database holding keys looks in use to the next run.
                redis.Redis.from_url(env["REDIS_URL"], socket_timeout=5).flushdb()
                client.delete(key)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
