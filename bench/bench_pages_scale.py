"""Do the board, a run page and a tool page stay fast as tool calls pile up in one run?

    .venv/bin/python bench/bench_pages_scale.py --sizes 100000,1000000
    .venv/bin/python bench/bench_pages_scale.py --sizes 100000,10000000 --reuse   # build once

Each size gets a scratch database of its own (``<--bench-db>_<size>``): 20 tools, 10 workers,
500 small runs, and ONE run with that many tool calls (inserted by PostgreSQL itself with
generate_series, then ANALYZE, as autovacuum would). ``--reuse`` keeps the databases and, on the
next run, uses any that a finished build left (the big run's total is written last, so a build
cut short is rebuilt); pending migrations are applied to it, so a new index is measured on the
same rows. Without ``--reuse`` (or ``--keep``) they are dropped at the end.

Every round requests the three pages through Django's test client on every size, interleaved
with two baselines (the login page, SELECT 1), switching the database between sizes, so the
sizes share the load of the moment instead of being measured minutes apart. Printed: p50/p99
per page and size, each page's p50 at every size as a ratio to its p50 at the first size, and
the same ratio divided by the login page's (what the load of the moment does to a trivial view).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_board import Timing, setup_django  # bench/ is not a package: found through sys.path
from support.scratch import drop_database, recreate_database, with_database

TOOLS = [f"tool-{i:02d}" for i in range(20)]
BIG_TOOL = TOOLS[0]


def seed_base() -> dict[str, int]:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from breakers.models import Tool
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


RECENT_RUN_CALLS = 10_000


def ensure_recent_run() -> None:
    """A run that started after the whole history and has reported ``RECENT_RUN_CALLS`` calls.

    Its page is the case a time-only index gets wrong: asked for the run's first calls in time
    order, PostgreSQL may walk the history's time index from its oldest row, filtering for the
    run, through every older call (9 s at 10 M without the (run, ts) index). Added to a reused
    database when missing, so older builds get it too.
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM runs_run WHERE run_id = 'recent-run'")
        if cursor.fetchone():
            return
        cursor.execute(
            """
            INSERT INTO runs_run (run_id, agent, worker_id, status, degraded, started_at,
                step_budget, tool_calls, steps, model_calls, model_spend_usd, input_tokens,
                output_tokens, tool_attempts, tool_failures, source, cost_estimated,
                conversation_id)
            SELECT 'recent-run', 'research', worker_id, 'running', false,
                   (SELECT max(ts) FROM runs_toolcall) + interval '1 minute', 10000000,
                   %(n)s, %(n)s, 0, 0, 0, 0, %(n)s, 0, 'sdk', false, ''
            FROM runs_run WHERE run_id = 'the-long-run'
            RETURNING id, worker_id, started_at
            """,
            {"n": RECENT_RUN_CALLS},
        )
        run_pk, worker_pk, started = cursor.fetchone()
        cursor.execute(
            """
            INSERT INTO runs_toolcall
                (event_id, run_id, worker_id, ts, step, tool, outcome, attempts, duration_ms, error)
            SELECT 'recent-' || n, %(run)s, %(worker)s, %(start)s + n * interval '100 milliseconds',
                   n, 'tool-' || lpad((n %% 20)::text, 2, '0'), 'success', 1, 400, ''
            FROM generate_series(1, %(n)s) AS n
            """,
            {"run": run_pk, "worker": worker_pk, "start": started, "n": RECENT_RUN_CALLS},
        )
        cursor.execute("ANALYZE runs_toolcall")
        cursor.execute("ANALYZE runs_run")


def delete_fleet_keys() -> None:
    """The ``bp:*`` keys only: a Celery broker may share the database."""
    from breakers.fleet_service import fleet_store

    client = fleet_store().client
    stale = list(client.scan_iter(match="bp:*", count=1000))
    if stale:
        client.delete(*stale)


def built_size(admin_url: str, name: str) -> int | None:
    """The size a finished build left in database ``name``, or None (absent, or cut short)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    if not found:
        return None
    try:
        with psycopg.connect(with_database(admin_url, name), autocommit=True) as conn:
            row = conn.execute(
                "SELECT tool_calls FROM runs_run WHERE run_id = 'the-long-run'"
            ).fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


_WRAPPERS: dict[str, Any] = {}


def use_database(name: str) -> None:
    """Point Django's default connection at ``name``: one persistent connection per database,
    swapped in, so no request pays for a new backend process (its catalog caches are warm)."""
    from django.db import connections
    from django.db.utils import load_backend

    wrapper = _WRAPPERS.get(name)
    if wrapper is None:
        settings_dict = {**connections.settings["default"], "NAME": name}
        wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, "default")
        _WRAPPERS[name] = wrapper
    connections["default"] = wrapper
    wrapper.ensure_connection()


def close_databases() -> None:
    for wrapper in _WRAPPERS.values():
        wrapper.close()


def page_ids() -> dict[str, int]:
    from breakers.models import Tool
    from runs.models import Run

    return {
        "run": Run.objects.get(run_id="the-long-run").pk,
        "recent": Run.objects.get(run_id="recent-run").pk,
        "tool": Tool.objects.get(name=BIG_TOOL).pk,
    }


def measure(
    names: dict[int, str], rounds: int
) -> tuple[dict[int, list[Any]], dict[int, list[list[float]]]]:
    """Every case on every size once per round, the sizes' order alternating between rounds."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    def select_one() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return int(cursor.fetchone()[0])

    cases: dict[int, list[tuple[str, Any]]] = {}
    for size, name in names.items():
        use_database(name)
        ids = page_ids()
        client = Client()  # sessions live in each database: one signed-in client per size
        client.force_login(User.objects.get(username="bench"))
        anonymous = Client()
        cases[size] = [
            ("board (GET /)", lambda c=client: c.get("/")),
            ("run page of the big run", lambda c=client, i=ids: c.get(f"/runs/{i['run']}/")),
            (
                f"run page of a recent {RECENT_RUN_CALLS:,}-call run",
                lambda c=client, i=ids: c.get(f"/runs/{i['recent']}/"),
            ),
            (
                "tool page of one of its tools",
                lambda c=client, i=ids: c.get(f"/tools/{i['tool']}/"),
            ),
            ("baseline: login page", lambda a=anonymous: a.get("/accounts/login/")),
            ("baseline: SELECT 1", select_one),
        ]
    results: dict[int, list[Any]] = {}
    counts: dict[int, list[int]] = {}
    samples: dict[int, list[list[float]]] = {size: [[] for _ in cases[size]] for size in names}
    for size, name in names.items():
        use_database(name)
        counts[size] = []
        for case, request in cases[size]:
            with CaptureQueriesContext(connection) as captured:
                response = request()  # also warms templates and the plan cache
            counts[size].append(len(captured.captured_queries))
            status = getattr(response, "status_code", 200)
            assert status == 200, f"{case} at {size:,} answered {status}"
    order = list(names)
    for round_ in range(rounds):
        for size in order if round_ % 2 == 0 else order[::-1]:
            use_database(names[size])
            for index, (_, request) in enumerate(cases[size]):
                started = time.perf_counter()
                request()
                samples[size][index].append((time.perf_counter() - started) * 1000)
    for size in names:
        results[size] = []
        for (case, _), times, count in zip(cases[size], samples[size], counts[size], strict=True):
            cuts = statistics.quantiles(times, n=100, method="inclusive")
            results[size].append(Timing(case, round(cuts[49], 2), round(cuts[98], 2), count, 200))
    return results, samples


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--database-url", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument("--bench-db", default="bp_bench_pages_scale", help="name prefix")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--requests", type=int, default=30, help="rounds")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument(
        "--reuse", action="store_true", help="use databases a finished build left; keep them"
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    names = {size: f"{args.bench_db}_{size}" for size in sizes}

    reused = {size for size, name in names.items()
              if args.reuse and built_size(args.database_url, name) == size}  # fmt: skip
    for size in sizes:
        if size not in reused:
            recreate_database(args.database_url, names[size])
    table: dict[int, list[Any]] = {}
    samples: dict[int, list[list[float]]] = {}
    try:
        setup_django(with_database(args.database_url, names[sizes[0]]), args.redis_url)
        from django.core.management import call_command

        from breakers.fleet_service import fleet_rebuild

        for size in sizes:
            use_database(names[size])
            started = time.perf_counter()
            call_command("migrate", verbosity=0)  # on a reused database: only what is new
            if size in reused:
                ensure_recent_run()
                print(f"reused {names[size]} ({size:,} calls; migrate and top-up "
                      f"{time.perf_counter() - started:.0f} s)", file=sys.stderr)  # fmt: skip
                continue
            started = time.perf_counter()
            ids = seed_base()
            grow(ids["run"], 0, size)
            ensure_recent_run()
            print(f"built {names[size]} ({size:,} calls) in {time.perf_counter() - started:.0f} s; "
                  f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)  # fmt: skip
        # The fleet state in Redis: the same 20 tools in every database, rebuilt once.
        delete_fleet_keys()
        fleet_rebuild()
        load_before = ", ".join(f"{value:.2f}" for value in os.getloadavg())
        table, samples = measure(names, args.requests)
    finally:
        from django.db import connections

        if "breakers.fleet_service" in sys.modules:
            # A Redis database left with keys counts as in use for scripts/own_services.py.
            delete_fleet_keys()

        connections.close_all()
        close_databases()
        if not (args.keep or args.reuse):
            for name in names.values():
                drop_database(args.database_url, name)

    first = sizes[0]
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"\n{args.requests} rounds, sizes interleaved; {os.cpu_count()} cores, PostgreSQL and "
          f"Redis on localhost; load average before: {load_before}; after: {load}\n")  # fmt: skip
    heads = [f"p50 / p99 ms at {s:,}" for s in sizes]
    heads += [f"p50 vs {first:,} at {s:,}" for s in sizes[1:]]
    print("| request | " + " | ".join(heads) + " | queries |")
    print("|---|" + "---:|" * (2 * len(sizes)))
    for index, row in enumerate(table[first]):
        cells = [f"{table[s][index].p50_ms} / {table[s][index].p99_ms}" for s in sizes]
        ratios = [
            f"{table[s][index].p50_ms / row.p50_ms:.2f}x" if row.p50_ms else "-" for s in sizes[1:]
        ]
        counts = "/".join(sorted({str(table[s][index].queries) for s in sizes}))
        print(f"| {row.name} | " + " | ".join(cells + ratios) + f" | {counts} |")
    # The machine is shared. Paired: each round requests a page at every size within a second or
    # so, so the median over rounds of (that round's time at a size / its time at the first size)
    # leaves out most of the load that moves between rounds.
    pages = len(table[first]) - 2
    print(f"\npaired (median over rounds of the page's time at a size / at {first:,} that round):")
    for index, row in enumerate(table[first][:pages]):
        paired = [
            statistics.median(
                b / a for a, b in zip(samples[first][index], samples[s][index], strict=True)
            )
            for s in sizes[1:]
        ]
        print(
            f"  {row.name}: "
            + ", ".join(f"{a:.2f}x at {s:,}" for a, s in zip(paired, sizes[1:], strict=True))
        )
    login = pages  # the login page: a view with no query at all
    print("load-adjusted (p50 / login page p50 at that size, as a ratio to the first size):")
    for index, row in enumerate(table[first][:pages]):
        base = row.p50_ms / table[first][login].p50_ms
        adjusted = [(table[s][index].p50_ms / table[s][login].p50_ms) / base for s in sizes[1:]]
        print(
            f"  {row.name}: "
            + ", ".join(f"{a:.2f}x at {s:,}" for a, s in zip(adjusted, sizes[1:], strict=True))
        )


if __name__ == "__main__":
    main()
