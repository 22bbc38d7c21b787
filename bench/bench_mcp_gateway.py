"""What the MCP gateway adds per call, and how fast an operator's force-open reaches a client.

One command (PostgreSQL and Redis on this machine for the second part; nothing to start):

    .venv/bin/python bench/bench_mcp_gateway.py                 # both parts
    .venv/bin/python bench/bench_mcp_gateway.py --calls 3000 --no-fleet

1. Overhead: one real `mcp` client talks to the flaky upstream (scripts/testing/mcp_upstream.py)
   over stdio directly, and a second one to the same kind of upstream through the gateway (stdio to
   the gateway, stdio from it to its upstream). Calls of `echo` alternate between the two, so
   both see the same load; the overhead is the gateway's p50/p99 minus the direct one's. The
   breaker's own share (a call's run: begin and finish, then the offered-set check on 20 tools)
   is timed in-process as well.
2. Force-open latency (`--fleet`): a scratch database, gunicorn serving the control plane, a
   gateway joined to it with `--fleet-poll-interval`; each round an operator force-opens a tool
   through the API and the client waits for `notifications/tools/list_changed`, then releases
   it and waits again. Timed from just before the POST to the notification.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.testing.mcp_servers import Flaky, Notes, connect, gateway_stdio, write_config  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


# -- part 1: overhead ------------------------------------------------------------------------------


async def overhead(calls: int, tmp: Path) -> dict[str, list[float]]:
    direct_up = Flaky(tmp / "direct.json")
    gated_up = Flaky(tmp / "gated.json")
    config = write_config(tmp / "gateway.json", {"search": gated_up.stdio()})
    params = gateway_stdio(config)
    from mcp import StdioServerParameters

    direct_params = StdioServerParameters(**direct_up.stdio())
    timings: dict[str, list[float]] = {"direct": [], "gateway": []}
    async with connect(direct_params, Notes()) as direct, connect(params, Notes()) as gated:
        for client in (direct, gated):  # warm up both paths
            for _ in range(50):
                await client.call_tool("echo", {"text": "warm"})
        for i in range(calls):
            pair = (("direct", direct), ("gateway", gated))
            for name, client in pair if i % 2 else reversed(pair):
                started = time.perf_counter()
                result = await client.call_tool("echo", {"text": "x"})
                timings[name].append(time.perf_counter() - started)
                assert not result.is_error
    return timings


def breaker_share(rounds: int) -> tuple[list[float], list[float]]:
    from breakers.sdk import WorkerBreakers
    from breakers.sdk.mcp_gateway.breaking import LocalBreakers

    breakers = LocalBreakers(WorkerBreakers())
    names = [f"tool_{i:02d}" for i in range(20)]
    call, check = [], []
    for i in range(rounds):
        name = names[i % 20]
        started = time.perf_counter()
        record = breakers.begin(name)
        record.finish(None)
        middle = time.perf_counter()
        breakers.offered(names)
        ended = time.perf_counter()
        call.append(middle - started)
        check.append(ended - middle)
    return call, check


# -- part 2: force-open latency --------------------------------------------------------------------


def setup_control_plane(database_url: str, redis_url: str, bench_db: str) -> Any:
    import psycopg

    from bench.bench_board import setup_django
    from bench.scratch import recreate_database, with_database

    recreate_database(database_url, bench_db)
    import redis

    # A fresh database needs fresh fleet state: only this Redis database's bp:* keys go.
    client = redis.Redis.from_url(redis_url)
    stale = list(client.scan_iter(match="bp:*", count=1000))
    if stale:
        client.delete(*stale)
    setup_django(with_database(database_url, bench_db), redis_url)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    _ = psycopg  # the scratch database is dropped by the caller
    from scripts.testing.processes import WebServerProcess

    return WebServerProcess(workers=2, threads=4).start()


def act(url: str, token: str, action: str) -> None:
    request = urllib.request.Request(
        f"{url}/api/v1/tools/web_search/{action}",
        data=json.dumps({"reason": "benchmark"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def tool_is_known() -> bool:
    from django.db import connection

    from breakers.models import Tool

    try:
        return Tool.objects.filter(name="web_search").exists()
    finally:
        connection.close()


async def force_open_latency(
    url: str, agent: str, operator: str, rounds: int, poll: float, tmp: Path, dephase: bool
) -> list[float]:
    upstream = Flaky(tmp / "fleet.json")
    config = write_config(tmp / "fleet-gateway.json", {"search": upstream.stdio()})
    params = gateway_stdio(
        config,
        *("--control-plane", url, "--token", agent, "--worker-id", "bench-gateway"),
        *("--fleet-poll-interval", str(poll)),
    )
    notes = Notes()
    latencies: list[float] = []
    async with connect(params, notes) as client:
        await client.list_tools()
        await client.call_tool("web_search", {"text": "q"})
        with anyio.fail_after(60):
            while not await anyio.to_thread.run_sync(tool_is_known):
                await anyio.sleep(0.05)
        for _ in range(rounds):
            for action in ("force-open", "release"):
                # Right after a notification the gateway has just polled: without a random
                # pause every action would land at the same (worst) phase of the poll.
                if dephase:
                    await anyio.sleep(random.uniform(0, poll))
                started = time.perf_counter()
                await anyio.to_thread.run_sync(act, url, operator, action)
                await notes.wait_for(timeout=30)
                latencies.append(time.perf_counter() - started)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per path")
    parser.add_argument("--fleet", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--rounds", type=int, default=50, help="force-open/release rounds")
    parser.add_argument("--poll", type=float, default=0.2, help="gateway's fleet poll interval")
    parser.add_argument(
        "--dephase",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a random pause (0 to one poll interval) before each action",
    )
    parser.add_argument("--database-url", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    parser.add_argument("--bench-db", default="bp_bench_mcp")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))

    if args.calls:
        report_overhead(args.calls, tmp)
    if args.fleet:
        report_latency(args, tmp)


def report_overhead(calls_per_path: int, tmp: Path) -> None:
    timings = anyio.run(overhead, calls_per_path, tmp)
    call, check = breaker_share(20_000)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    direct, gated = timings["direct"], timings["gateway"]
    print(f"\n{calls_per_path} calls of echo per path, interleaved; {os.cpu_count()} cores; "
          f"load average after: {load}\n")  # fmt: skip
    rows = [
        ("direct (client -> upstream, stdio)", direct),
        ("through the gateway (two stdio hops)", gated),
        ("of which the breaker: one call's run", call),
        ("of which the breaker: offered-set check, 20 tools", check),
    ]
    print("| path | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    for label, values in rows:
        print(f"| {label} | {ms(pct(values, 0.5))} | {ms(pct(values, 0.99))} |")
    p50 = pct(gated, 0.5) - pct(direct, 0.5)
    p99 = pct(gated, 0.99) - pct(direct, 0.99)
    print(f"| **gateway overhead** (gateway minus direct) | {ms(p50)} | {ms(p99)} |")
    print(
        f"\nmean: direct {ms(statistics.mean(direct))} ms, gateway {ms(statistics.mean(gated))} ms"
    )


def report_latency(args: argparse.Namespace, tmp: Path) -> None:
    from bench.scratch import drop_database

    server = None
    try:
        server = setup_control_plane(args.database_url, args.redis_url, args.bench_db)
        from runs.models import AgentToken

        agent = AgentToken.issue(name="bench-gateway")[1]
        operator = AgentToken.issue(name="bench-ops", is_operator=True)[1]
        latencies = anyio.run(
            force_open_latency,
            server.url, agent, operator, args.rounds, args.poll, tmp, args.dephase,
        )  # fmt: skip
    finally:
        if server is not None:
            server.stop()
        from django.db import connections

        connections.close_all()
        drop_database(args.database_url, args.bench_db)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"\noperator action -> list_changed at the client: {len(latencies)} actions "
        f"(force-open, release), fleet poll every {args.poll:g} s, "
        f"{'random phase' if args.dephase else 'each right after a poll'}; load after: {load}"
    )
    p50, p99 = pct(latencies, 0.5), pct(latencies, 0.99)
    print(f"p50 {ms(p50)} ms, p99 {ms(p99)} ms, max {ms(max(latencies))} ms")


if __name__ == "__main__":
    main()
