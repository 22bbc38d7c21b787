"""How fast the board renders with a realistic fleet and a large history, next to a baseline.

One command (PostgreSQL and Redis on this machine; nothing else to start):

    .venv/bin/python bench/bench_board.py
    .venv/bin/python bench/bench_board.py --tools 200 --workers 50 --calls 100000 --requests 200

It creates a scratch database (``--bench-db``, dropped at the end unless ``--keep``), migrates it,
and seeds it in bulk: ``--tools`` tools, ``--workers`` live workers, ``--calls`` tool calls spread
over ``--runs`` runs (some still running), worker- and run-scope transitions. The fleet state in
Redis (``--redis-url``; only its ``bp:*`` keys are touched) is made by the real services: every
tool restored from the database, some opened by real failures from two workers, some with a
streak building, two forced by an operator.

Then it requests, in this process through Django's test client (the whole view: middleware,
session, queries, Redis, template; no HTTP server), each of:

- the board page (``GET /``),
- the poll partial without ``If-None-Match`` (what a change costs: query, render),
- the poll partial with the current ETag (what an unchanged board costs: a 304, no render),
- the login page (a trivial view rendering the base template) and a bare ``SELECT 1``: the
  baselines the board is compared with, measured in the same run on the same machine.

It prints p50/p99 in ms, the ratio to the baselines and the number of SQL queries of each.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from support.scratch import (
    add_database_arguments,
    drop_database,
    recreate_database,
    with_database,
)

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Timing:
    name: str
    p50_ms: float
    p99_ms: float
    queries: int
    status: int


def setup_django(db_url: str, redis_url: str) -> None:
    os.environ.update(
        DATABASE_URL=db_url,
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=redis_url,
        DJANGO_SETTINGS_MODULE="controlplane.settings",
        # Production-like: no query log kept in memory, no debug pages.
        DEBUG="False",
        SECRET_KEY=secrets.token_urlsafe(64),
        TLS_PROXY="False",  # the test client speaks plain HTTP
        DB_CONN_MAX_AGE="600",
    )
    os.environ.pop("TEST_DATABASE_NAME", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings

    # No collectstatic here: plain static URLs instead of the production manifest's hashed ones.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


# --- seeding -------------------------------------------------------------------------------------


def seed(args: argparse.Namespace) -> None:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from breakers.fleet.rules import OperatorActionKind
    from breakers.fleet_service import (
        fleet_operator_action,
        fleet_rebuild,
        fleet_record_tool_calls,
        fleet_store,
    )
    from breakers.models import Tool
    from runs.fleet_interface import AcceptedToolCall
    from runs.models import ReportedTransition, Run, ToolCall, Worker

    now = timezone.now()
    started = time.perf_counter()
    tools = [f"tool-{i:03d}" for i in range(args.tools)]
    week_ago = now - timedelta(days=7)
    Tool.objects.bulk_create(Tool(name=name, first_seen_at=week_ago) for name in tools)
    workers = Worker.objects.bulk_create(
        Worker(worker_id=f"worker-{i:02d}", first_seen_at=week_ago, last_seen_at=now)
        for i in range(args.workers)
    )
    running = max(1, args.runs // 25)
    runs = Run.objects.bulk_create(
        Run(
            run_id=f"run-{i:06d}",
            agent=("research", "writer", "support")[i % 3],
            worker=workers[i % len(workers)],
            status="running" if i >= args.runs - running else "completed",
            started_at=now - timedelta(seconds=(args.runs - i) * 20),
            step_budget=20,
        )
        for i in range(args.runs)
    )
    per_run = max(1, args.calls // len(runs))
    batch: list[ToolCall] = []
    made = 0
    for run_index, run in enumerate(runs):
        for step in range(per_run):
            if made >= args.calls:
                break
            failed = (run_index + step) % 9 == 0
            batch.append(
                ToolCall(
                    event_id=f"tc-{made}",
                    run=run,
                    worker_id=run.worker_id,
                    ts=run.started_at + timedelta(seconds=step),
                    step=step + 1,
                    tool=tools[(run_index * 7 + step) % len(tools)],
                    outcome="retryable" if failed else "success",
                    attempts=5 if failed else 1,
                    duration_ms=31_000 if failed else 400,
                    error="ToolFailure: 503 from vendor" if failed else "",
                )
            )
            made += 1
        if len(batch) >= 10_000:
            ToolCall.objects.bulk_create(batch)
            batch = []
    ToolCall.objects.bulk_create(batch)
    transitions = []
    for i, worker in enumerate(workers):
        for j in range(4):  # each worker has reported its own breaker for a few tools
            transitions.append(
                ReportedTransition(
                    event_id=f"wt-{i}-{j}", worker=worker, ts=now - timedelta(minutes=j),
                    scope="worker", tool=tools[(i * 3 + j) % len(tools)],
                    state="open" if j % 2 == 0 else "closed", reason="5 consecutive",
                )
            )  # fmt: skip
    for i, run in enumerate(runs[-running:]):
        transitions.append(
            ReportedTransition(
                event_id=f"rt-{i}", run=run, worker_id=run.worker_id, ts=now, scope="run",
                tool=tools[i % 10], state="open", reason="5 consecutive",
            )
        )  # fmt: skip
    ReportedTransition.objects.bulk_create(transitions)
    print(f"seeded the database in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    started = time.perf_counter()
    client = fleet_store().client
    stale = list(client.scan_iter(match="bp:*", count=1000))
    if stale:
        client.delete(*stale)
    fleet_rebuild()
    ids = iter(range(10**9))

    def outcomes(tool: str, *pairs: tuple[str, str]) -> None:
        calls = [
            AcceptedToolCall(f"fleet-{next(ids)}", now, worker, "r", tool, outcome, 1, "")
            for worker, outcome in pairs
        ]
        fleet_record_tool_calls(calls=calls)

    for tool in tools[:5]:  # open: five failures from two workers
        outcomes(tool, *[(f"worker-{k % 2:02d}", "retryable") for k in range(5)])
    for tool in tools[5:35]:  # a streak building on one worker
        outcomes(tool, ("worker-03", "retryable"), ("worker-03", "retryable"))
    admin = User.objects.create_superuser("bench", password=secrets.token_urlsafe(16))
    fleet_operator_action(
        tool_name=tools[40], action=OperatorActionKind.FORCE_OPEN, reason="bench", user=admin
    )
    fleet_operator_action(
        tool_name=tools[41], action=OperatorActionKind.FORCE_CLOSE, reason="bench", user=admin
    )
    print(f"seeded the fleet in {time.perf_counter() - started:.1f} s", file=sys.stderr)


# --- measuring -----------------------------------------------------------------------------------


def timed(cases: list[tuple[str, Callable[[], Any]]], rounds: int) -> list[Timing]:
    """Time every case once per round, interleaved, so that each case and its baselines share
    the machine's load of the moment (this machine is shared); first, count each one's queries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    queries, statuses = [], []
    for _, request in cases:
        with CaptureQueriesContext(connection) as captured:
            response = request()
        # Read now: the next request's request_started signal empties the connection's log.
        queries.append(len(captured.captured_queries))
        statuses.append(getattr(response, "status_code", 0))
    samples: list[list[float]] = [[] for _ in cases]
    for _ in range(rounds):
        for index, (_, request) in enumerate(cases):
            started = time.perf_counter()
            request()
            samples[index].append((time.perf_counter() - started) * 1000)
    timings = []
    for (name, _), times, count, status in zip(cases, samples, queries, statuses, strict=True):
        cuts = statistics.quantiles(times, n=100, method="inclusive")
        timings.append(Timing(name, round(cuts[49], 2), round(cuts[98], 2), count, status))
    return timings


def measure(args: argparse.Namespace) -> tuple[float, list[Timing]]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from controlplane.dashboard.board import BoardFilters, fleet_board

    client = Client()
    client.force_login(User.objects.get(username="bench"))
    anonymous = Client()
    # The first board of this process: templates not compiled yet, nothing cached.
    started = time.perf_counter()
    client.get("/")
    cold_ms = (time.perf_counter() - started) * 1000
    htmx = {"HX-Request": "true"}
    etag = client.get("/", headers=htmx)["ETag"]

    def select_one() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return int(cursor.fetchone()[0])

    board = client.get("/").content.decode()
    rows = board.count('class="tool-row')
    assert rows == args.tools, f"the board shows {rows} tools, expected {args.tools}"
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("board page (GET /)", lambda: client.get("/")),
        ("poll partial, changed (200)", lambda: client.get("/", headers=htmx)),
        ("poll partial, unchanged (304)",
         lambda: client.get("/", headers={**htmx, "If-None-Match": etag})),
        ("its data alone: fleet_board() (6 queries + 1 Redis pipeline)",
         lambda: fleet_board(filters=BoardFilters())),
        ("baseline: login page (base template)", lambda: anonymous.get("/accounts/login/")),
        ("baseline: SELECT 1", select_one),
    ]  # fmt: skip
    results = timed(cases, args.requests)
    assert results[2].status == 304, "the unchanged poll must be a 304"
    return cold_ms, results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add_database_arguments(parser, "board")
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--requests", type=int, default=200, help="rounds (one request per case)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()

    admin_url = args.database_url
    recreate_database(admin_url, args.bench_db)
    try:
        setup_django(with_database(admin_url, args.bench_db), args.redis_url)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        seed(args)
        cold_ms, results = measure(args)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(admin_url, args.bench_db)

    page = results[0]
    base, select = results[4], results[5]
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"\n{args.tools} tools, {args.workers} live workers, {args.calls:,} tool calls in "
        f"{args.runs:,} runs; {args.requests} rounds of one request per case, interleaved, "
        "in-process test client; "
        f"{os.cpu_count()} cores, PostgreSQL and Redis on localhost; load average after: {load}\n"
    )
    print("| request | p50 ms | p99 ms | SQL queries | p50 vs login page |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        ratio = r.p50_ms / base.p50_ms if base.p50_ms else 0
        print(f"| {r.name} | {r.p50_ms} | {r.p99_ms} | {r.queries} | {ratio:.1f}x |")
    print(
        f"\nfirst board page of the process (cold): {cold_ms:.1f} ms; "
        f"board page p50 = {page.p50_ms / select.p50_ms:.0f}x a SELECT 1 round trip; "
        f"an unchanged poll costs {results[2].p50_ms / results[1].p50_ms:.0%} of a changed one"
    )


if __name__ == "__main__":
    main()
