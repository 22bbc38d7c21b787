"""Slack bot mode latency: an alert's card posted after the opening commits, and the card
updated after a press in Slack (press -> signed request -> Celery -> chat.update).

One command (PostgreSQL and Redis on this machine; nothing else to start):

    REDIS_URL=redis://127.0.0.1:6379/15 .venv/bin/python bench/bench_slack_actions.py

It creates a scratch database (dropped at the end), starts the Slack stand-in
(``scripts/slack_standin.py``: the Web API ``slack_sdk`` calls, and signed presses), serves
``POST /slack/actions`` from this process (Django's WSGI app on a threaded wsgiref server) and
starts one real Celery worker on a queue of its own with bot mode pointed at the stand-in.

Per round a fresh tool opens (five retryable failures from two workers, one transaction); the
clock starts right after COMMIT and stops when the stand-in has the card (``chat.postMessage``).
Then the linked operator presses Acknowledge in the stand-in: the clock starts before the signed
request is sent and stops when the stand-in has the amber card (``chat.update``). The same-run
baseline is one ``chat.update`` straight through ``SlackBot`` to the stand-in. All stamps are
``time.monotonic()`` in this process (the stand-in runs in a thread here).
"""

from __future__ import annotations

import argparse
import itertools
import os
import secrets
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from support.scratch import add_database_arguments, scratch_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOOL_PREFIX = "slackbench-"
TOKEN = "xoxb-bench"
SECRET = secrets.token_hex(16)
AMBER = "#ECB22E"


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def row(label: str, samples: list[float], base: float | None) -> str:
    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
    ratio = f"{p50 / base:.1f}x" if base else "-"
    return f"| {label} | {len(samples)} | {p50:.1f} | {p99:.1f} | {max(samples):.1f} | {ratio} |"


def wait(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)


def measure(rounds: int, db_url: str) -> list[str]:
    from scripts.slack_standin import TEAM_ID, SlackStandIn

    queue = f"slack-bench-{secrets.token_hex(3)}"
    standin = SlackStandIn(signing_secret=SECRET, bot_token=TOKEN).start()
    bot_env = {
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_CHANNEL": "#agent-tools",
        "SLACK_API_URL": standin.api_url,
        "SLACK_TASK_QUEUE": queue,
    }
    # DB_CONN_MAX_AGE=0: each request thread of the wsgiref server closes its connection.
    os.environ.update(
        bot_env, DATABASE_URL=db_url, SECRET_KEY=secrets.token_urlsafe(64), DB_CONN_MAX_AGE="0"
    )
    os.environ.pop("TEST_DATABASE_NAME", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import transaction

    from breakers.access.operators import operators_group
    from breakers.fleet_service import fleet_record_tool_calls, fleet_store
    from breakers.models import Incident, SlackUser
    from breakers.transports.slack_bot import PostedMessage, SlackBot
    from breakers.transports.slack_messages import SlackMessage
    from scripts.testing.fleet_calls import fleet_call
    from scripts.testing.processes import CeleryWorkerProcess, declare_celery_queues

    user = User.objects.create_user("bench-operator")
    user.groups.add(operators_group())
    SlackUser.objects.create(team_id=TEAM_ID, slack_user_id="U0OPERATOR", user=user)
    web = make_server("127.0.0.1", 0, WSGIHandler(), _ThreadingWSGIServer, _Quiet)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    standin.actions_url = f"http://127.0.0.1:{web.server_port}/slack/actions"
    declare_celery_queues()
    worker = CeleryWorkerProcess(pool="threads", concurrency=4, queues=(queue,), env=bot_env)
    worker.start()
    ids: Iterator[int] = itertools.count()
    run = secrets.token_hex(3)
    posted_ms: list[float] = []
    updated_ms: list[float] = []
    answered_ms: list[float] = []
    baseline_ms: list[float] = []
    bot = SlackBot(TOKEN, base_url=standin.api_url, timeout=5)
    try:
        for i in range(rounds + 3):  # three warm-up rounds, not counted
            tool = f"{TOOL_PREFIX}{run}-{i}"
            stamps: list[float] = []
            with transaction.atomic():
                transaction.on_commit(lambda s=stamps: s.append(time.monotonic()))
                calls = [
                    fleet_call(f"sb-{next(ids)}", tool, f"w{k % 2}", "retryable") for k in range(5)
                ]
                assert [r.to_state for r in fleet_record_tool_calls(calls=calls)] == ["open"]
            before = len(standin.bot_messages())
            wait(lambda n=before: len(standin.bot_messages()) > n, "the card")
            card = standin.bot_messages()[-1]
            incident = Incident.objects.get(tool__name=tool)
            started = time.monotonic()
            status, _, _ = standin.press(
                ts=card.ts, action_id="bp_acknowledge", value=str(incident.pk), user_id="U0OPERATOR"
            )
            answered = time.monotonic()
            assert status == 200, status
            wait(lambda c=card: c.color == AMBER, "the acknowledged card")
            message = SlackMessage(text="baseline", blocks=(), color="#8D8D8D")
            base_start = time.monotonic()
            bot.update(PostedMessage(channel="C0AGENTS01", ts=card.ts), message)
            history = list(card.history)
            if i < 3:
                continue
            posted_ms.append((history[0][0] - stamps[0]) * 1000)
            acked = next(at for at, color in history if color == AMBER)
            updated_ms.append((acked - started) * 1000)
            answered_ms.append((answered - started) * 1000)
            baseline_ms.append((history[-1][0] - base_start) * 1000)
        worker.wait_idle()
    finally:
        worker.stop()
        web.shutdown()
        standin.stop()
        store = fleet_store()
        keys = list(store.client.scan_iter(match="bp:{" + TOOL_PREFIX + "*", count=1000))
        if keys:
            store.client.delete(*keys)
        ours = [name for name in store.tools() if name.startswith(TOOL_PREFIX)]
        if ours:
            store.client.srem(store.tools_key, *ours)
    base = percentile(baseline_ms, 0.5)
    return [
        f"{rounds} incidents, each opened, posted, acknowledged from the stand-in and updated",
        "",
        "| path | n | p50 ms | p99 ms | max ms | p50 ratio |",
        "|---|---|---|---|---|---|",
        row("baseline: one `chat.update` through `SlackBot` -> stand-in has it", baseline_ms, base),
        row("alert: opening COMMIT -> card posted (`chat.postMessage`)", posted_ms, base),
        row("press: signed request -> `/slack/actions` answered", answered_ms, base),
        row("press -> card updated in place (`chat.update`, amber)", updated_ms, base),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add_database_arguments(parser, "slack_actions", redis_url=False)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    if args.rounds < 100:
        parser.error("p99 needs at least 100 rounds")
    if not os.environ.get("REDIS_URL"):
        parser.error("set REDIS_URL to a Redis database the benchmark may use (own keys only)")
    with scratch_database(args.database_url, args.bench_db) as db_url:
        env = os.environ | {"DATABASE_URL": db_url, "SECRET_KEY": secrets.token_urlsafe(64)}
        import subprocess

        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
            cwd=ROOT, env=env, check=True, timeout=300,
        )  # fmt: skip
        try:
            report = measure(args.rounds, db_url)
        finally:
            from django.db import connections

            connections.close_all()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print("\n".join(report))


if __name__ == "__main__":
    main()
