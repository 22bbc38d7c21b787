"""Well-behaved ingest beside 200 clients that trickle their bodies (issue 23, finding 2).

    .venv/bin/python bench/bench_trickling_bodies.py [--tricklers 200 --seconds 10 --rounds 2]

Starts gunicorn the production way (``controlplane.gunicorn_conf``: 3 gevent workers) on a
scratch database and runs ``--senders`` closed-loop agents posting batches of 10 events, in
phases that alternate: alone, then beside ``--tricklers`` authenticated POSTs (half
``/api/v1/events``, half ``/v1/traces``) that promise 100 kB and send one byte per client every
200 ms. Per phase: batches, p50/p99 latency, errors, and the most PostgreSQL backends on the
scratch database (sampled every 100 ms). A real Celery worker and beat run on the same scratch
database throughout (the fleet tick every ``BREAKER_TICK_SECONDS``, 1 s): per phase, the tasks
that succeeded and those that failed, read from the worker's log. Read the ratios: the machine is
shared.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

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
ROUTES = ("/api/v1/events", "/v1/traces")


def start_server(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    prom = tempfile.mkdtemp(prefix="bp-prom-")  # gunicorn_conf empties it at start
    command = [sys.executable, "-m", "gunicorn", "-c", "python:controlplane.gunicorn_conf",
               "controlplane.wsgi:application"]  # fmt: skip
    server = subprocess.Popen(
        command, cwd=ROOT,
        env=env | {"GUNICORN_BIND": f"127.0.0.1:{port}", "PROMETHEUS_MULTIPROC_DIR": prom},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("gunicorn did not answer within 60 s")


def start_celery(env: dict[str, str], log: Path) -> list[subprocess.Popen[bytes]]:
    """A Celery worker (threads, as the demo runs it) and beat, logging to ``log``."""
    out = log.open("ab")
    celery = [sys.executable, "-m", "celery", "-A", "controlplane"]
    schedule = log.with_name("celerybeat-schedule")
    return [
        subprocess.Popen(
            [*celery, "worker", "--loglevel=INFO", "--pool=threads", "--concurrency=2",
             "--without-heartbeat", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [*celery, "beat", "--loglevel=WARNING", "--schedule", str(schedule)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        ),
    ]  # fmt: skip


def celery_tasks(log: Path, start: int) -> tuple[int, int, int]:
    """(tasks succeeded, tasks failed, the log's size) in the worker's log from ``start``."""
    with log.open("rb") as handle:
        handle.seek(start)
        text = handle.read().decode("utf-8", "replace")
    succeeded = text.count("] succeeded in ")
    failed = text.count("] raised unexpected") + text.count("] retry: ")
    return succeeded, failed, start + len(text.encode())


def batch(worker_id: str) -> bytes:
    events = [
        {"id": uuid.uuid4().hex, "type": "run.started", "ts": "2026-12-01T10:00:00Z",
         "run_id": uuid.uuid4().hex, "agent": "bench", "step_budget": 20}
        for _ in range(10)
    ]  # fmt: skip
    return json.dumps({"worker_id": worker_id, "events": events}).encode()


def sender(
    port: int, token: str, n: int, stop: threading.Event, out: list[float], errors: list[str]
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    while not stop.is_set():
        body = batch(f"agent-{n}")
        started = time.perf_counter()
        try:
            conn.request("POST", "/api/v1/events", body=body, headers=headers)
            reply = conn.getresponse()
            reply.read()
        except OSError as exc:
            errors.append(type(exc).__name__)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            continue
        if reply.status != 200:
            errors.append(str(reply.status))
        else:
            out.append(time.perf_counter() - started)
    conn.close()


def open_tricklers(port: int, token: str, count: int) -> list[socket.socket]:
    sockets = []
    for n in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(
            f"POST {ROUTES[n % 2]} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}"
            "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{".encode()
        )
        sockets.append(sock)
    return sockets


def trickle(sockets: list[socket.socket], stop: threading.Event) -> None:
    while not stop.wait(0.2):
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.sendall(b" ")


def backends(db_url: str, name: str, stop: threading.Event, out: list[int]) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        while not stop.wait(0.1):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            ).fetchone()
            out.append(int(row[0]) if row else 0)


def phase(
    port: int, token: str, args: argparse.Namespace, db_url: str, tricklers: int, log: Path
) -> dict[str, float]:
    _, _, log_start = celery_tasks(log, 0)
    stop = threading.Event()
    latencies: list[float] = []
    errors: list[str] = []
    seen: list[int] = []
    sockets = open_tricklers(port, token, tricklers)
    threads = [threading.Thread(target=trickle, args=(sockets, stop))]
    threads.append(threading.Thread(target=backends, args=(db_url, args.bench_db, stop, seen)))
    threads += [
        threading.Thread(target=sender, args=(port, token, n, stop, latencies, errors))
        for n in range(args.senders)
    ]
    for thread in threads:
        thread.start()
    time.sleep(args.seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=90)
    for sock in sockets:
        sock.close()
    time.sleep(1.5)  # the last tick's result reaches the log
    succeeded, failed, _ = celery_tasks(log, log_start)
    ordered = sorted(latencies)
    return {
        "batches": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000 if ordered else float("nan"),
        "p99_ms": ordered[int(0.99 * (len(ordered) - 1))] * 1000 if ordered else float("nan"),
        "errors": len(errors),
        "max_backends": max(seen, default=0),
        "tasks_ok": succeeded,
        "tasks_failed": failed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_database_arguments(parser, "trickling")
    parser.add_argument("--tricklers", type=int, default=200)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0, help="per phase")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    db_url = with_database(args.database_url, args.bench_db)
    recreate_database(args.database_url, args.bench_db)
    env = os.environ | {
        "DATABASE_URL": db_url, "REDIS_URL": args.redis_url, "CELERY_BROKER_URL": args.redis_url,
        "DEBUG": "False", "SECRET_KEY": secrets.token_urlsafe(64), "TLS_PROXY": "False",
        "ALLOWED_HOSTS": "127.0.0.1", "WEB_CONCURRENCY": "3", "LOG_LEVEL": "ERROR",
    }  # fmt: skip
    server = None
    workers: list[subprocess.Popen[bytes]] = []
    log = Path(tempfile.mkdtemp(prefix="bp-trickling-")) / "celery.log"
    rows: list[tuple[str, dict[str, float]]] = []
    try:
        manage(env, "migrate", "--verbosity", "0")
        token = manage(env, "create_agent_token", "bench").strip().splitlines()[-1]
        port = free_port()
        server = start_server(env, port)
        workers = start_celery(env, log)
        deadline = time.monotonic() + 120
        while celery_tasks(log, 0)[0] < 2:  # the worker is up and beat's ticks are arriving
            if time.monotonic() > deadline:
                raise SystemExit(f"the Celery worker ran no task within 120 s: see {log}")
            time.sleep(0.5)
        for _ in range(args.rounds):  # alternated, so drift on the shared machine hits both
            rows.append(("alone", phase(port, token, args, db_url, 0, log)))
            rows.append(
                (
                    f"beside {args.tricklers} tricklers",
                    phase(port, token, args, db_url, args.tricklers, log),
                )
            )
    finally:
        for process in workers:
            process.terminate()
            process.wait(timeout=30)
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        drop_database(args.database_url, args.bench_db)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"\n{args.senders} closed-loop senders, batches of 10 events, {args.seconds:g} s per "
          f"phase, {os.cpu_count()} cores, load average after: {load}\n")  # fmt: skip
    print("| phase | batches | p50 ms | p99 ms | errors | most PostgreSQL backends "
          "| Celery tasks succeeded | Celery tasks failed |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['batches']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} "
              f"| {r['errors']:.0f} | {r['max_backends']:.0f} | {r['tasks_ok']:.0f} "
              f"| {r['tasks_failed']:.0f} |")  # fmt: skip
    print(f"\nCelery worker log: {log}")
    alone = [r for name, r in rows if name == "alone"]
    beside = [r for name, r in rows if name != "alone"]
    p99_ratio = statistics.median(b["p99_ms"] for b in beside) / statistics.median(
        a["p99_ms"] for a in alone
    )
    rate_ratio = sum(b["batches"] for b in beside) / sum(a["batches"] for a in alone)
    print(f"\np99 beside the tricklers / alone: {p99_ratio:.2f}x; batches: {rate_ratio:.2f}x")


if __name__ == "__main__":
    main()
