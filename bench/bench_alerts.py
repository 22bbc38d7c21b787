"""Slack alert latency: from the commit of a fleet breaker's opening to the message reaching the
webhook. Goal: p99 under 2 s.

One command (PostgreSQL and Redis on this machine; nothing else to start):

    REDIS_URL=redis://127.0.0.1:6379/15 .venv/bin/python bench/bench_alerts.py
    .venv/bin/python bench/bench_alerts.py --alerts 200 --pace 1.1 --channels 2

It creates a scratch database (``--bench-db``, dropped at the end), starts one real Celery worker
(``celery -A controlplane worker``, thread pool, 4 threads) on it and the fake Slack server
(``scripts/testing/fake_slack.py``, a real HTTP server on 127.0.0.1), and uses the Redis database of
``REDIS_URL`` as broker, fleet store and rate limiter (only its own keys, deleted at the end).

Per alert a fresh tool gets five retryable failures from two workers through
``fleet_record_tool_calls`` (what ingest's hook runs) inside a transaction; the breaker opens,
the transaction writes the transition and one alert row per channel, and commits. The clock
starts in the first on-commit callback (registered before anything else, so it runs right after
COMMIT and before the alerts' enqueue) and stops when the fake server has read the request body.
Both stamps are ``time.monotonic()`` (CLOCK_MONOTONIC, one clock for every process on Linux).

Openings are paced ``--pace`` seconds apart (default 1.1 s), so each channel stays inside the
real limiter of one message a second (``SLACK_MIN_INTERVAL_SECONDS``, left at its default):
what is measured is the path of one alert, not a queue behind the limiter. Between two
openings the same process posts one message straight through ``SlackTransport.notify()`` to
the same server: the same-run baseline of what the HTTP call itself costs.
"""

from __future__ import annotations

import argparse
import itertools
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from support.scratch import add_database_arguments, scratch_database

if TYPE_CHECKING:
    from scripts.testing.fake_slack import FakeSlackServer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = sys.executable
TOOL_PREFIX = "alertbench-"
BASELINE_PATH = "/services/TBASE/BBASE/baselinebaselinebaseline"


# --- scratch database ----------------------------------------------------------------------------


def migrate(db_url: str) -> None:
    env = os.environ | {"DATABASE_URL": db_url, "SECRET_KEY": secrets.token_urlsafe(64)}
    subprocess.run(
        [PYTHON, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT, env=env, check=True, timeout=300,
    )  # fmt: skip


def setup_django(db_url: str) -> None:
    os.environ["DATABASE_URL"] = db_url
    # The worker is started by scripts.testing.processes, which strips this; nothing else here
    # reads it.
    os.environ.pop("TEST_DATABASE_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()


def delete_bench_keys(channel_urls: list[str]) -> None:
    from breakers.alerts import channel_limiter
    from breakers.fleet_service import fleet_store

    store = fleet_store()
    keys = list(store.client.scan_iter(match="bp:{" + TOOL_PREFIX + "*", count=1000))
    keys += [channel_limiter().key_for(url) for url in channel_urls]
    for start in range(0, len(keys), 1000):
        store.client.delete(*keys[start : start + 1000])
    ours = [name for name in store.tools() if name.startswith(TOOL_PREFIX)]
    if ours:
        store.client.srem(store.tools_key, *ours)


# --- measuring -----------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def row(label: str, samples_ms: list[float], baseline_p50: float | None) -> str:
    p50, p99 = percentile(samples_ms, 0.5), percentile(samples_ms, 0.99)
    ratio = f"{p50 / baseline_p50:.1f}x" if baseline_p50 else "-"
    return (
        f"| {label} | {len(samples_ms)} | {p50:.1f} | {p99:.1f} | {max(samples_ms):.1f} | {ratio} |"
    )


def open_one(tool: str, ids: Iterator[int]) -> tuple[float, float]:
    """Open ``tool``'s fleet breaker in one transaction: (monotonic, wall) right after COMMIT."""
    from django.db import transaction

    from breakers.fleet_service import fleet_record_tool_calls
    from scripts.testing.fleet_calls import fleet_call

    stamps: list[tuple[float, float]] = []
    with transaction.atomic():
        # First callback: runs right after COMMIT, before the alerts' enqueue callback.
        transaction.on_commit(lambda: stamps.append((time.monotonic(), time.time())))
        calls = [fleet_call(f"ab-{next(ids)}", tool, f"w{i % 2}", "retryable") for i in range(5)]
        rows = fleet_record_tool_calls(calls=calls)
        assert [r.to_state for r in rows] == ["open"], rows
    return stamps[0]


def baseline_send(server: FakeSlackServer, ids: Iterator[int]) -> float:
    """One message straight through the transport: call -> the server has the body (ms)."""
    from datetime import UTC, datetime

    from breakers.transports.slack import SlackTransport
    from breakers.transports.slack_messages import OpenedAlert, build_opened_message

    message = build_opened_message(
        OpenedAlert(
            tool=f"baseline-{next(ids)}",
            state="open",
            reason="5 consecutive retryable failures from 2 workers",
            since=datetime.now(UTC),
            consecutive_failures=5,
            workers=["w0", "w1"],
            runs_affected=0,
            incident_url="http://127.0.0.1:8000/incidents/1/",
        )
    )
    transport = SlackTransport(server.url_for(BASELINE_PATH), timeout=5)
    before = len(server.requests_for(BASELINE_PATH))
    started = time.monotonic()
    transport.notify(message)
    received = server.requests_for(BASELINE_PATH)[before].received_at
    return (received - started) * 1000


def measure(alerts: int, pace: float, channels: int) -> list[str]:
    from breakers.models import Alert, AlertChannel, AlertState
    from scripts.testing.fake_slack import FakeSlackServer
    from scripts.testing.processes import CeleryWorkerProcess, declare_celery_queues

    ids = itertools.count()
    run = secrets.token_hex(3)
    with FakeSlackServer() as server:
        paths = [f"/services/TBENCH/B{c}/{secrets.token_hex(12)}" for c in range(channels)]
        urls = [server.url_for(p) for p in paths]
        for c, url in enumerate(urls):
            AlertChannel.objects.create(name=f"bench-{c}", webhook_url=url)
        declare_celery_queues()
        worker = CeleryWorkerProcess(pool="threads", concurrency=4).start()
        commits: dict[str, tuple[float, float]] = {}
        baseline: list[float] = []
        try:
            for _ in range(3):  # warm up: connections, worker threads, script cache
                baseline_send(server, ids)
            next_at = time.monotonic()
            for i in range(alerts):
                tool = f"{TOOL_PREFIX}{run}-{i}"
                commits[tool] = open_one(tool, ids)
                baseline.append(baseline_send(server, ids))
                next_at += pace
                time.sleep(max(0.0, next_at - time.monotonic()))
            expected = alerts * channels
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                delivered = [r for r in server.requests if r.path != BASELINE_PATH]
                if len(delivered) >= expected:
                    break
                time.sleep(0.05)
            worker.wait_idle()
        finally:
            worker.stop()
            delete_bench_keys(urls)
        delivered = [r for r in server.requests if r.path != BASELINE_PATH]
    latencies: list[float] = []
    to_claim: list[float] = []
    for request in delivered:
        tool = request.json["blocks"][0]["text"]["text"].split(": ", 1)[1]
        latencies.append((request.received_at - commits[tool][0]) * 1000)
    for alert in Alert.objects.select_related("tool"):
        if alert.claimed_at is not None:
            to_claim.append((alert.claimed_at.timestamp() - commits[alert.tool.name][1]) * 1000)
    states = dict.fromkeys(AlertState.values, 0)
    for alert in Alert.objects.all():
        states[alert.state] += 1
    base_p50 = percentile(baseline, 0.5)
    lost = alerts * channels - len(latencies)
    goal = percentile(latencies, 0.99) < 2000 if latencies else False
    return [
        f"{alerts} openings, {channels} channel(s), paced {pace:g} s apart; "
        f"{len(latencies)} messages received, {lost} missing; alert states: {states}",
        "",
        "| path | n | p50 ms | p99 ms | max ms | p50 ratio |",
        "|---|---|---|---|---|---|",
        row("baseline: `SlackTransport.notify()` -> server has the body", baseline, base_p50),
        row("alert: transition COMMIT -> server has the body", latencies, base_p50),
        row("of which COMMIT -> claimed by the worker (wall clock)", to_claim, None),
        "",
        f"goal p99 < 2000 ms: {'met' if goal else 'NOT met'}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add_database_arguments(parser, "alerts", redis_url=False)
    parser.add_argument("--alerts", type=int, default=100)
    parser.add_argument("--pace", type=float, default=1.1, help="seconds between openings")
    parser.add_argument("--channels", type=int, default=1)
    args = parser.parse_args()
    if args.alerts < 100:
        parser.error("p99 needs at least 100 alerts")
    if not os.environ.get("REDIS_URL"):
        parser.error("set REDIS_URL to a Redis database the benchmark may use (own keys only)")
    with scratch_database(args.database_url, args.bench_db) as db_url:
        migrate(db_url)
        setup_django(db_url)
        try:
            report = measure(args.alerts, args.pace, args.channels)
        finally:
            from django.db import connections

            connections.close_all()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print("\n".join(report))


if __name__ == "__main__":
    main()
