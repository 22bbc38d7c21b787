"""Benchmark: SDK workers sending as fast as agents do, beside the control plane, for two SDK trees.

    .venv/bin/python bench/bench_load.py --baseline-tree DIR [--workers 8] [--seconds 60]
        [--rounds 2]

DIR is a checkout of the tree to compare with (e.g. ``git -C /work/main archive main | tar -x -C
DIR``). One gunicorn (this tree's server, production settings: 3 gevent workers) runs on a scratch
database. Each round starts ``--workers`` processes of each tree in turn (the order alternating by
round); each process is one default ``ControlPlane`` (fleet long-poll on) playing a run of 10 tool
and 10 model calls every 50 ms, as fast as an agent records, for ``--seconds``, then closes
(flushes). Reported per tree and round: events recorded, dropped (SDK buffer full), accepted/s,
batch p50/p99 (ms per ``POST /api/v1/events`` as the sender sees it), events per batch, and the
server's CPU per 1,000 accepted events (gunicorn's processes and the scratch database's
PostgreSQL backends, from /proc; Redis is shared and not counted). Load average beside each.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from scratch import free_port, manage, scratch_database  # bench/scratch.py

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def client(url: str, token: str, tree: str, seconds: float) -> None:
    """The child: one worker of `tree`'s SDK; prints its figures as JSON."""
    sys.path.insert(0, str(Path(tree) / "sdk/python/src"))
    from breaker_panel import ControlPlane
    from breaker_panel.client import transport

    assert transport.__file__.startswith(tree), transport.__file__
    plane = ControlPlane(url, token=token, worker_id=f"load-{os.getpid()}")
    times: list[float] = []
    sizes: list[int] = []
    request = plane.transport.request

    def timed(method: str, path: str, body: bytes | None, *args: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        answer = request(method, path, body, *args, **kw)
        if path == "/api/v1/events" and answer[0] == 200:
            times.append((time.perf_counter() - started) * 1000)
            sizes.append(body.count(b'"id"') if body else 0)
        return answer

    plane.transport.request = timed  # type: ignore[method-assign]
    recorded = 0
    end = time.monotonic() + seconds
    tick = time.monotonic()
    while tick < end:
        run = plane.start_run(agent="load")
        for _ in range(10):
            run.record_success("web_search")
            run.record_model_call(input_tokens=100, output_tokens=20, cost_usd=0.001)
        run.finish()
        recorded += 22
        tick += 0.05
        time.sleep(max(0.0, tick - time.monotonic()))
    flushed = plane.close(timeout=60)
    stats = plane.stats
    print(json.dumps({"recorded": recorded, "dropped": stats.dropped, "accepted": stats.accepted,
                      "flushed": flushed, "times": times, "sizes": sizes}))  # fmt: skip


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """Each process's CPU so far (user + system), for those still there."""
    seconds = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            seconds[pid] = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
    return seconds


def server_pids(master: int, db_url: str, db_name: str) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (db_name,),
        ).fetchall()
    return [master, *map(int, children), *(row[0] for row in rows)]


@contextlib.contextmanager
def gunicorn(name: str) -> Iterator[tuple[str, str, int, str]]:
    admin = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    with scratch_database(admin, name) as db_url, tempfile.TemporaryDirectory() as prom:
        port = free_port()
        env = os.environ | {
            "DATABASE_URL": db_url, "DEBUG": "False", "SECRET_KEY": secrets.token_urlsafe(48),
            "LOG_LEVEL": "ERROR", "GUNICORN_BIND": f"127.0.0.1:{port}",
            "PROMETHEUS_MULTIPROC_DIR": prom, "TLS_PROXY": "False",
        }  # fmt: skip
        manage(env, "migrate", "--verbosity", "0")
        token = manage(env, "create_agent_token", "load").strip().splitlines()[-1]
        command = [str(ROOT / ".venv/bin/gunicorn"), "-c", "python:controlplane.gunicorn_conf",
                   "--no-control-socket", "--log-level", "warning",
                   "controlplane.wsgi"]  # fmt: skip
        server = subprocess.Popen(command, cwd=ROOT, env=env)
        try:
            wait_for_api(port)
            yield f"http://127.0.0.1:{port}", token, server.pid, db_url
        finally:
            server.terminate()
            server.wait(timeout=30)


def wait_for_api(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("POST", "/api/v1/events", body=b"{}")
            if connection.getresponse().status == 401:
                return
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer within 60 s")


def one_round(
    url: str, token: str, tree: Path, args: argparse.Namespace, server: tuple[int, str, str]
) -> dict[str, Any]:
    command = [sys.executable, __file__, "--client", url, "--token", token, "--tree", str(tree),
               "--seconds", str(args.seconds)]  # fmt: skip
    cpu_before = cpu_seconds(server_pids(*server))
    started = time.monotonic()
    children = [
        subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(args.workers)
    ]
    results = [json.loads(child.communicate(timeout=args.seconds + 120)[0]) for child in children]
    took = time.monotonic() - started
    # A PostgreSQL backend opened during the round counts from 0; one closed during it is lost
    # (Django keeps them 60 s, so few are).
    cpu_after = cpu_seconds(server_pids(*server))
    cpu = sum(after - cpu_before.get(pid, 0.0) for pid, after in cpu_after.items())
    times = sorted(t for r in results for t in r["times"])
    sizes = [s for r in results for s in r["sizes"]]
    accepted = sum(r["accepted"] for r in results)
    return {
        "recorded": sum(r["recorded"] for r in results),
        "dropped": sum(r["dropped"] for r in results),
        "accepted": accepted,
        "unflushed": sum(not r["flushed"] for r in results),
        "per_s": accepted / took,
        "drain": took - args.seconds,
        "p50": times[len(times) // 2] if times else 0.0,
        "p99": times[int(len(times) * 0.99)] if times else 0.0,
        "batch": statistics.mean(sizes) if sizes else 0.0,
        "cpu_ms_per_1k": cpu * 1000 / (accepted / 1000) if accepted else 0.0,
        "load": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-tree", type=Path)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--client")
    parser.add_argument("--token")
    parser.add_argument("--tree")
    args = parser.parse_args()
    if args.client:
        client(args.client, args.token, args.tree, args.seconds)
        return 0
    if args.baseline_tree is None:
        parser.error("--baseline-tree is required")
    trees = {"this": ROOT, "baseline": args.baseline_tree.resolve()}
    name = os.environ.get("TEST_DATABASE_NAME", "bp") + "_bench_load"
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print("| round | tree | recorded | dropped | accepted/s | batch p50 ms | batch p99 ms "
          "| events/batch | server CPU ms / 1k events | drain s | load 1 min |\n"
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)  # fmt: skip
    with gunicorn(name) as (url, token, master, db_url):
        for n in range(args.rounds):
            for tree in list(trees) if n % 2 == 0 else list(reversed(trees)):
                r = one_round(url, token, trees[tree], args, (master, db_url, name))
                print(f"| {n + 1} | {tree} | {r['recorded']:,} | {r['dropped']:,} "
                      f"| {r['per_s']:,.0f} | {r['p50']:.0f} | {r['p99']:.0f} | {r['batch']:.0f} "
                      f"| {r['cpu_ms_per_1k']:.0f} | {r['drain']:.1f} | {r['load']:.2f} |",
                      flush=True)  # fmt: skip
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
