"""Ingest throughput and latency through a real HTTP server, next to a raw COPY of the same rows.

One command (PostgreSQL on this machine; nothing else to start):

    .venv/bin/python bench/bench_ingest.py
    .venv/bin/python bench/bench_ingest.py --batch-sizes 100 --seconds 20 --workers 4

Environment: DATABASE_URL names the PostgreSQL server (default the local one), REDIS_URL the Redis
database the fleet counters go to (default db 15, the test database; it is not flushed).

It creates a scratch database (``--bench-db``, dropped at the end unless ``--keep``), migrates it,
issues an agent token, starts gunicorn on a free port (DEBUG off), and for each batch size runs
``--clients`` closed-loop senders, each one worker posting the events of scripted runs (18 events
a run: start, 8 model calls, 8 tool calls, finish) in batches of that size. Every reply is checked:
all events accepted, none rejected or duplicate. Then the same number of rows, of the same shape,
is written with PostgreSQL ``COPY`` into the same tables over one connection, which is the floor
no HTTP ingest can beat. Results are printed as a markdown table (``--json`` writes them too).

The load generator runs on the same 2 cores as gunicorn and PostgreSQL, so it takes its share.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from support.scratch import (
    add_database_arguments,
    drop_database,
    free_port,
    manage,
    recreate_database,
    with_database,
)

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
STEPS_PER_RUN = 8
EVENTS_PER_RUN = 2 + 2 * STEPS_PER_RUN
T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


@dataclass
class Result:
    batch_size: int
    requests: int
    events: int
    seconds: float
    events_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float


# --- workload ----------------------------------------------------------------------------------


def run_events(prefix: str, run_no: int) -> list[dict[str, Any]]:
    """The events of one scripted run: the search tool fails every third call."""
    run_id = f"{prefix}-r{run_no}"
    start = T0 + timedelta(seconds=run_no)

    def ts(step: int) -> str:
        return (start + timedelta(seconds=step)).isoformat()

    events: list[dict[str, Any]] = [
        {"id": f"{run_id}-s", "type": "run.started", "ts": ts(0), "run_id": run_id,
         "agent": "research", "step_budget": 20},
    ]  # fmt: skip
    for step in range(1, STEPS_PER_RUN + 1):
        failed = step % 3 == 0
        events.append(
            {"id": f"{run_id}-m{step}", "type": "model.call", "ts": ts(step), "run_id": run_id,
             "step": step, "model": "gpt-bench", "input_tokens": 5200, "output_tokens": 310,
             "cost_usd": 0.061, "duration_ms": 2300}
        )  # fmt: skip
        events.append(
            {"id": f"{run_id}-t{step}", "type": "tool.call", "ts": ts(step), "run_id": run_id,
             "step": step, "tool": "web_search", "outcome": "retryable" if failed else "success",
             "attempts": 5 if failed else 1, "duration_ms": 31000 if failed else 400,
             "error": "ToolFailure: 503 from vendor" if failed else ""}
        )  # fmt: skip
    events.append(
        {"id": f"{run_id}-f", "type": "run.finished", "ts": ts(STEPS_PER_RUN + 1),
         "run_id": run_id, "status": "completed", "degraded": False, "steps": STEPS_PER_RUN}
    )  # fmt: skip
    return events


def batches(worker_id: str, prefix: str, batch_size: int) -> Iterator[bytes]:
    """Endless pre-encoded bodies for one worker, its runs' events in order."""
    pending: list[dict[str, Any]] = []
    run_no = 0
    while True:
        while len(pending) < batch_size:
            pending += run_events(prefix, run_no)
            run_no += 1
        chunk, pending = pending[:batch_size], pending[batch_size:]
        yield json.dumps({"worker_id": worker_id, "events": chunk}).encode()


# --- server and database -----------------------------------------------------------------------


def start_gunicorn(
    env: dict[str, str], port: int, args: argparse.Namespace
) -> subprocess.Popen[bytes]:
    command = [
        GUNICORN, "controlplane.wsgi", "--bind", f"127.0.0.1:{port}", "--workers",
        str(args.workers), "--worker-class", args.worker_class, "--threads", str(args.threads),
        "--log-level", "warning", "--timeout", "60",
    ]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            # Unauthenticated on purpose: a 401 from the API proves the whole stack is up.
            conn.request("POST", "/api/v1/events", body=b"{}")
            if conn.getresponse().status == 401:
                return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("gunicorn did not answer within 30 s")


# --- load --------------------------------------------------------------------------------------


def sender(
    port: int, token: str, bodies: Iterator[bytes], batch_size: int, stop_at: float,
    latencies: list[float], errors: list[str],
) -> None:  # fmt: skip
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.monotonic() < stop_at:
        body = next(bodies)
        started = time.perf_counter()
        conn.request("POST", "/api/v1/events", body=body, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        latencies.append(time.perf_counter() - started)
        if response.status != 200:
            errors.append(f"{response.status}: {payload[:200]!r}")
            return
        reply = json.loads(payload)
        if reply["accepted"] != batch_size or reply["rejected"] or reply["duplicates"]:
            errors.append(f"unexpected reply: {str(reply)[:300]}")
            return


def measure(
    port: int, token: str, batch_size: int, args: argparse.Namespace, db_url: str
) -> Result:
    tag = secrets.token_hex(3)
    # A short warm-up on separate workers fills connection pools and imports.
    warm_stop = time.monotonic() + 1.0
    warm_threads = [
        threading.Thread(
            target=sender,
            args=(
                port,
                token,
                batches(f"warm-{tag}-{i}", f"w{tag}{i}", batch_size),
                batch_size,
                warm_stop,
                [],
                [],
            ),
        )
        for i in range(args.clients)
    ]
    for thread in warm_threads:
        thread.start()
    for thread in warm_threads:
        thread.join()
    # Autovacuum analyzes a table that receives events within about a minute; a 10 s run on a
    # fresh database would be measured without statistics, where the planner looked the child
    # rows' runs up through (worker, started_at) and read every run of the worker for each row
    # (docs/benchmarks.md, "Ingest after issue 10").
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ANALYZE")

    per_client: list[list[float]] = [[] for _ in range(args.clients)]
    errors: list[str] = []
    started = time.monotonic()
    stop_at = started + args.seconds
    threads = [
        threading.Thread(
            target=sender,
            args=(
                port,
                token,
                batches(f"bench-{tag}-{i}", f"b{tag}{i}", batch_size),
                batch_size,
                stop_at,
                per_client[i],
                errors,
            ),
        )
        for i in range(args.clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    if errors:
        raise SystemExit(f"batch size {batch_size}: {errors[0]}")
    latencies = sorted(lat for client in per_client for lat in client)
    events = len(latencies) * batch_size
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return Result(
        batch_size=batch_size,
        requests=len(latencies),
        events=events,
        seconds=round(elapsed, 2),
        events_per_s=round(events / elapsed),
        p50_ms=round(quantiles[49] * 1000, 1),
        p99_ms=round(quantiles[98] * 1000, 1),
        max_ms=round(latencies[-1] * 1000, 1),
    )


# --- COPY baseline -----------------------------------------------------------------------------


def copy_baseline(db_url: str, events: int) -> tuple[int, float]:
    """COPY the rows ``events`` ingested events leave behind into the same tables; events/s."""
    runs = max(1, events // EVENTS_PER_RUN)
    tag = secrets.token_hex(3)
    now = datetime.now(UTC)
    with psycopg.connect(db_url) as conn:
        worker_pk = conn.execute(
            "INSERT INTO runs_worker (worker_id, first_seen_at, last_seen_at)"
            " VALUES (%s, %s, %s) RETURNING id",
            (f"copy-{tag}", now, now),
        ).fetchone()[0]  # type: ignore[index]
        conn.commit()
        started = time.perf_counter()
        run_pks = _copy_runs(conn, tag, runs, worker_pk)
        ledger: list[tuple[Any, ...]] = []
        tool_rows: list[tuple[Any, ...]] = []
        model_rows: list[tuple[Any, ...]] = []
        for run_no, run_pk in enumerate(run_pks):
            for event in run_events(f"copy-{tag}", run_no):
                ledger.append((event["id"], worker_pk, now))
                if event["type"] == "tool.call":
                    tool_rows.append((
                        event["id"], run_pk, worker_pk, event["ts"], event["step"],
                        event["tool"], event["outcome"], event["attempts"],
                        event["duration_ms"], event["error"],
                    ))  # fmt: skip
                elif event["type"] == "model.call":
                    model_rows.append((
                        event["id"], run_pk, event["ts"], event["step"], event["model"],
                        event["input_tokens"], event["output_tokens"],
                        Decimal(repr(event["cost_usd"])), event["duration_ms"],
                    ))  # fmt: skip
        with conn.cursor() as cur:
            _copy(cur, "runs_ingestedevent (event_id, worker_id, received_at)", ledger)
            _copy(cur, "runs_toolcall (event_id, run_id, worker_id, ts, step, tool, outcome,"
                       " attempts, duration_ms, error)", tool_rows)  # fmt: skip
            _copy(cur, "runs_modelcall (event_id, run_id, ts, step, model, input_tokens,"
                       " output_tokens, cost_usd, duration_ms)", model_rows)  # fmt: skip
        conn.commit()
        elapsed = time.perf_counter() - started
    return runs * EVENTS_PER_RUN, elapsed


def _copy(cur: psycopg.Cursor[Any], target: str, rows: list[tuple[Any, ...]]) -> None:
    with cur.copy(f"COPY {target} FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _copy_runs(conn: psycopg.Connection[Any], tag: str, runs: int, worker_pk: int) -> list[int]:
    rows = []
    for run_no in range(runs):
        start = T0 + timedelta(seconds=run_no)
        rows.append((
            f"copy-{tag}-r{run_no}", "research", worker_pk, 20, "completed", False,
            STEPS_PER_RUN, start, start + timedelta(seconds=STEPS_PER_RUN + 1),
            (STEPS_PER_RUN + 1) * 1000, STEPS_PER_RUN, Decimal("0.488"), 5200 * STEPS_PER_RUN,
            310 * STEPS_PER_RUN, STEPS_PER_RUN, 18, 2,
        ))  # fmt: skip
    with conn.cursor() as cur:
        _copy(cur, "runs_run (run_id, agent, worker_id, step_budget, status, degraded, steps,"
                   " started_at, finished_at, duration_ms, model_calls, model_spend_usd,"
                   " input_tokens, output_tokens, tool_calls, tool_attempts, tool_failures)",
              rows)  # fmt: skip
        cur.execute("SELECT id FROM runs_run WHERE run_id LIKE %s ORDER BY id", (f"copy-{tag}-%",))
        return [row[0] for row in cur.fetchall()]


# --- main --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    # Accepted tool calls also update the fleet counters: --redis-url keeps them out of the dev
    # database.
    add_database_arguments(parser, "ingest")
    parser.add_argument("--batch-sizes", default="1,10,100,500")
    parser.add_argument("--seconds", type=float, default=10.0, help="per batch size")
    parser.add_argument("--clients", type=int, default=4, help="concurrent senders (workers)")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn worker processes")
    parser.add_argument("--worker-class", default="sync")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    db_url = with_database(args.database_url, args.bench_db)
    recreate_database(args.database_url, args.bench_db)
    env = os.environ | {
        "DATABASE_URL": db_url,
        "REDIS_URL": args.redis_url,
        "CELERY_BROKER_URL": args.redis_url,
        "DEBUG": "False",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "TLS_PROXY": "False",  # plain HTTP on loopback
        "DB_CONN_MAX_AGE": "600",
        "LOG_LEVEL": "WARNING",
    }
    server = None
    try:
        manage(env, "migrate", "--verbosity", "0")
        token = manage(env, "create_agent_token", "bench").strip().splitlines()[-1]
        port = free_port()
        server = start_gunicorn(env, port, args)
        results = [
            measure(port, token, int(size), args, db_url) for size in args.batch_sizes.split(",")
        ]
        copy_events = max(r.events for r in results)
        copied, copy_s = copy_baseline(db_url, copy_events)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if not args.keep:
            drop_database(args.database_url, args.bench_db)

    copy_rate = copied / copy_s
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"\ngunicorn {args.workers} x {args.worker_class} (threads {args.threads}), "
        f"{args.clients} closed-loop senders, {args.seconds:g} s per batch size, "
        f"{os.cpu_count()} cores, PostgreSQL on localhost, load average after: {load}\n"
    )
    print("| batch size | requests | events | events/s | p50 ms | p99 ms | max ms | vs COPY |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r.batch_size} | {r.requests} | {r.events} | {r.events_per_s:,} | {r.p50_ms} "
            f"| {r.p99_ms} | {r.max_ms} | {r.events_per_s / copy_rate:.1%} |"
        )
    print(f"| COPY (1 connection) | - | {copied} | {copy_rate:,.0f} | - | - | - | 100% |")
    if args.json:
        payload = {"results": [asdict(r) for r in results], "copy_events_per_s": copy_rate,
                   "args": {k: str(v) for k, v in vars(args).items()}}  # fmt: skip
        args.json.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
