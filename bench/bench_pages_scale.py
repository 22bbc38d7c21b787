"""Do the board, a run page and a tool page stay fast as tool calls pile up in one run?

    .venv/bin/python bench/bench_pages_scale.py --sizes 100000,1000000
    .venv/bin/python bench/bench_pages_scale.py --sizes 100000,10000000   # ~15+ min on 2 cores

A scratch database (``--bench-db``, dropped unless ``--keep``) gets 20 tools, 10 workers, 500
small runs, and ONE run that grows to each size in ``--sizes`` (tool calls inserted by
PostgreSQL itself with generate_series, then ANALYZE, as autovacuum would). At each size the
three pages are requested through Django's test client, interleaved with two baselines (the
login page, SELECT 1) so that every case shares the load of the moment. Printed: p50/p99 per
page and size, and each page's p50 at every size as a ratio to its p50 at the first size.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_board import setup_django, timed  # bench/ is not a package: found through sys.path
from scratch import drop_database, recreate_database, with_database

TOOLS = [f"tool-{i:02d}" for i in range(20)]
BIG_TOOL = TOOLS[0]


def seed_base() -> dict[str, int]:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from breakers.models import Tool
    from breakers.services import fleet_rebuild, fleet_store
    from runs.models import Run, ToolCall, Worker

    now = timezone.now()
    Tool.objects.bulk_create(Tool(name=name) for name in TOOLS)
    workers = Worker.objects.bulk_create(
        Worker(worker_id=f"research-worker-{i:02d}", last_seen_at=now) for i in range(10)
    )
    small = Run.objects.bulk_create(
        Run(run_id=f"run-{i:05d}", agent="research", worker=workers[i % 10], status="completed",
            started_at=now - timezone.timedelta(minutes=i), step_budget=20, tool_calls=5)
        for i in range(500)
    )  # fmt: skip
    ToolCall.objects.bulk_create(
        ToolCall(event_id=f"small-{r.pk}-{s}", run=r, worker_id=r.worker_id,
                 ts=r.started_at + timezone.timedelta(seconds=s), step=s + 1,
                 tool=TOOLS[(r.pk + s) % 20], outcome="success", duration_ms=400)
        for r in small for s in range(5)
    )  # fmt: skip
    big = Run.objects.create(
        run_id="the-long-run", agent="research", worker=workers[0], status="running",
        started_at=now - timezone.timedelta(days=1), step_budget=10**9,
    )  # fmt: skip
    User.objects.create_superuser("bench", password="bench-pass-not-secret-123")
    client = fleet_store().client
    stale = list(client.scan_iter(match="bp:*", count=1000))
    if stale:
        client.delete(*stale)
    fleet_rebuild()
    return {"run": big.pk, "tool": Tool.objects.get(name=BIG_TOOL).pk}


def grow(run_pk: int, have: int, want: int) -> None:
    """Insert tool calls ``have+1..want`` into the big run, in chunks, then ANALYZE."""
    from django.db import connection

    chunk = 1_000_000
    with connection.cursor() as cursor:
        cursor.execute("SELECT worker_id, started_at FROM runs_run WHERE id = %s", [run_pk])
        worker_pk, started = cursor.fetchone()
        for low in range(have + 1, want + 1, chunk):
            high = min(want, low + chunk - 1)
            cursor.execute(
                """
                INSERT INTO runs_toolcall
                    (event_id, run_id, worker_id, ts, step, tool, outcome, attempts,
                     duration_ms, error)
                SELECT 'big-' || n, %(run)s, %(worker)s,
                       %(start)s + n * interval '5 milliseconds', n,
                       'tool-' || lpad((n %% 20)::text, 2, '0'),
                       CASE WHEN n %% 9 = 0 THEN 'retryable' ELSE 'success' END,
                       CASE WHEN n %% 9 = 0 THEN 5 ELSE 1 END,
                       CASE WHEN n %% 9 = 0 THEN 31000 ELSE 400 END,
                       CASE WHEN n %% 9 = 0 THEN 'ToolFailure: 503 from vendor' ELSE '' END
                FROM generate_series(%(low)s, %(high)s) AS n
                """,
                {"run": run_pk, "worker": worker_pk, "start": started, "low": low, "high": high},
            )
        cursor.execute(
            "UPDATE runs_run SET tool_calls = %s, steps = %s WHERE id = %s", [want, want, run_pk]
        )
        cursor.execute("ANALYZE runs_toolcall")
        cursor.execute("ANALYZE runs_run")


def measure(ids: dict[str, int], rounds: int) -> list[Any]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username="bench"))
    anonymous = Client()

    def select_one() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return int(cursor.fetchone()[0])

    cases = [
        ("board (GET /)", lambda: client.get("/")),
        ("run page of the big run", lambda: client.get(f"/runs/{ids['run']}/")),
        ("tool page of one of its tools", lambda: client.get(f"/tools/{ids['tool']}/")),
        ("baseline: login page", lambda: anonymous.get("/accounts/login/")),
        ("baseline: SELECT 1", select_one),
    ]
    results = timed(cases, rounds)
    for result in results[:3]:
        assert result.status == 200, f"{result.name} answered {result.status}"
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--database-url", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument("--bench-db", default="bp_bench_pages_scale")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--requests", type=int, default=30, help="rounds per size")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))

    recreate_database(args.database_url, args.bench_db)
    table: dict[int, list[Any]] = {}
    try:
        setup_django(with_database(args.database_url, args.bench_db), args.redis_url)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        ids = seed_base()
        have = 0
        for size in sizes:
            started = time.perf_counter()
            grow(ids["run"], have, size)
            have = size
            print(f"grew the run to {size:,} calls in {time.perf_counter() - started:.0f} s; "
                  f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)  # fmt: skip
            table[size] = measure(ids, args.requests)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(args.database_url, args.bench_db)

    first = sizes[0]
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"\n{args.requests} rounds per size, interleaved; {os.cpu_count()} cores, "
          f"PostgreSQL and Redis on localhost; load average after: {load}\n")  # fmt: skip
    heads = [f"p50 / p99 ms at {s:,}" for s in sizes]
    heads += [f"p50 vs {first:,} at {s:,}" for s in sizes[1:]]
    print("| request | " + " | ".join(heads) + " | queries |")
    print("|---|" + "---:|" * (2 * len(sizes)))
    for index, row in enumerate(table[first]):
        cells = [f"{table[s][index].p50_ms} / {table[s][index].p99_ms}" for s in sizes]
        ratios = [
            f"{table[s][index].p50_ms / row.p50_ms:.2f}x" if row.p50_ms else "-" for s in sizes[1:]
        ]
        print(f"| {row.name} | " + " | ".join(cells + ratios) + f" | {row.queries} |")
    # The machine is shared: the same page's cost in login pages cancels the load of the moment.
    print("\nload-adjusted (p50 / login page p50 at that size, as a ratio to the first size):")
    for index, row in enumerate(table[first][:3]):
        base = row.p50_ms / table[first][3].p50_ms
        adjusted = [(table[s][index].p50_ms / table[s][3].p50_ms) / base for s in sizes[1:]]
        print(
            f"  {row.name}: "
            + ", ".join(f"{a:.2f}x at {s:,}" for a, s in zip(adjusted, sizes[1:], strict=True))
        )


if __name__ == "__main__":
    main()
