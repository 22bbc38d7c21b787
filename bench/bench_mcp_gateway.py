"""What the MCP gateway adds per call, and how fast an operator's force-open reaches a client.

One command (PostgreSQL and Redis on this machine for the second part; nothing to start):

    scripts/own_services.py -- .venv/bin/python bench/bench_mcp_gateway.py     # both parts
    .venv/bin/python bench/bench_mcp_gateway.py --calls 3000 --no-fleet

1. Overhead: real `mcp` clients call `echo` on the flaky upstream (scripts/testing/mcp_upstream.py)
   over stdio: directly, through the gateway (stdio in, stdio out, the tools/call passthrough)
   and through a gateway with `--no-passthrough` (the SDK's models on both hops). Calls
   alternate between the three, so all see the same load; overhead is a path's p50/p99 minus
   the direct one's. Timed in-process: the gateway's own work per passthrough call (from the
   client's line read to the upstream's write, and from the upstream's reply to the client's
   write), the SDK transport's envelope parse and dump the relay still pays, and the breaker.
2. Force-open latency (`--fleet`): a scratch database, gunicorn serving the control plane, two
   gateways joined to it, one on the fleet push (long-poll, the default) and one polling every
   `--poll` s; each round an operator force-opens a tool through the API and both clients wait
   for `notifications/tools/list_changed`, then it is released and they wait again. Timed from
   just before the POST to each client's notification. A third client, on its own pushed gateway,
   never re-lists (as Claude Code does): it calls the tool every 10 ms after the POST until one
   call is refused: force-open -> refusal.
3. `--cpu-load N`: part 1 again beside N busy processes (a CPU-bound load on the same cores);
   each part also gives the spread of the gateway's p50 overhead over five slices of its calls.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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


PATHS = ("direct", "gateway", "sdk path")


async def overhead(calls: int, tmp: Path) -> tuple[dict[str, list[float]], list[list[float]]]:
    from mcp import StdioServerParameters

    from breaker_panel.mcp_gateway.gateway import TIMINGS_ENV

    direct_up = Flaky(tmp / "direct.json")
    timings_file = tmp / "gateway-timings.txt"
    clients: dict[str, Any] = {"direct": StdioServerParameters(**direct_up.stdio())}
    for path, extra in (("gateway", ()), ("sdk path", ("--no-passthrough",))):
        upstream = Flaky(tmp / f"{path.replace(' ', '-')}.json")
        config = write_config(
            tmp / f"{path.replace(' ', '-')}-gw.json", {"search": upstream.stdio()}
        )
        params = gateway_stdio(config, *extra)
        params.env = {"PATH": os.environ.get("PATH", "")}
        if path == "gateway":
            params.env[TIMINGS_ENV] = str(timings_file)
        clients[path] = params
    timings: dict[str, list[float]] = {path: [] for path in PATHS}
    async with (
        connect(clients["direct"], Notes()) as direct,
        connect(clients["gateway"], Notes()) as gated,
        connect(clients["sdk path"], Notes()) as sdk,
    ):
        sessions = {"direct": direct, "gateway": gated, "sdk path": sdk}
        for client in sessions.values():  # warm up every path
            for _ in range(50):
                await client.call_tool("echo", {"text": "warm"})
        order = list(PATHS)
        for _ in range(calls):
            random.shuffle(order)  # no path always goes first (or right after another)
            for path in order:
                started = time.perf_counter()
                result = await sessions[path].call_tool("echo", {"text": "x"})
                timings[path].append(time.perf_counter() - started)
                assert not result.is_error
    # The gateway writes its own timings when its client goes; the warm-up calls come first.
    own = [[float(v) for v in line.split()] for line in timings_file.read_text().splitlines()]
    return timings, own[50:]


def envelope_share(rounds: int) -> list[float]:
    """What the relay still pays the SDK transport per call: dump the request, parse the reply."""
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCRequest, jsonrpc_message_adapter

    reply = json.dumps(
        {"jsonrpc": "2.0", "id": "bp-1", "result": {"content": [{"type": "text", "text": "x"}]}}
    )
    params = {"name": "echo", "arguments": {"text": "x"}}
    costs = []
    for i in range(rounds):
        started = time.perf_counter()
        request = JSONRPCRequest.model_construct(
            jsonrpc="2.0", id=f"bp-{i}", method="tools/call", params=params
        )
        SessionMessage(request).message.model_dump_json(by_alias=True, exclude_unset=True)
        jsonrpc_message_adapter.validate_json(reply, by_name=False)
        costs.append(time.perf_counter() - started)
    return costs


def breaker_share(rounds: int) -> tuple[list[float], list[float]]:
    from breaker_panel import WorkerBreakers
    from breaker_panel.per_call import LocalBreakers

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
    from bench.support.scratch import recreate_database, with_database

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
    url: str, agent: str, operator: str, rounds: int, poll: float, tmp: Path
) -> dict[str, list[float]]:
    """Both gateways hear every action: one by the fleet push, one by polling."""
    modes = {"push": ("--fleet-wait", "20"), "poll": ("--fleet-wait", "0")}
    params = {}
    never_up = Flaky(tmp / "fleet-never.json")
    params["never"] = gateway_stdio(
        write_config(tmp / "fleet-never-gw.json", {"search": never_up.stdio()}),
        *("--control-plane", url, "--token", agent, "--worker-id", "bench-gateway-never"),
        *("--fleet-poll-interval", str(poll)),
    )
    for mode, extra in modes.items():
        upstream = Flaky(tmp / f"fleet-{mode}.json")
        config = write_config(tmp / f"fleet-{mode}-gw.json", {"search": upstream.stdio()})
        params[mode] = gateway_stdio(
            config,
            *("--control-plane", url, "--token", agent, "--worker-id", f"bench-gateway-{mode}"),
            *("--fleet-poll-interval", str(poll), *extra),
        )
    notes = {mode: Notes() for mode in modes}
    latencies: dict[str, list[float]] = {mode: [] for mode in (*modes, "refusal")}
    async with (
        connect(params["push"], notes["push"]) as push,
        connect(params["poll"], notes["poll"]) as polled,
        connect(params["never"], Notes()) as never,
    ):
        for client in (push, polled, never):
            await client.list_tools()
            await client.call_tool("web_search", {"text": "q"})
        with anyio.fail_after(60):
            while not await anyio.to_thread.run_sync(tool_is_known):
                await anyio.sleep(0.05)
        for _ in range(rounds):
            for action in ("force-open", "release"):
                # A random pause: without it every action would land at the same phase of the
                # polling gateway's interval.
                await anyio.sleep(random.uniform(0, poll))
                started = time.perf_counter()
                await anyio.to_thread.run_sync(act, url, operator, action)

                async def heard(mode: str, started: float = started) -> None:
                    await notes[mode].wait_for(timeout=30)
                    latencies[mode].append(time.perf_counter() - started)

                async def refused(started: float = started) -> None:
                    # The client listed once and never again: only a refusal tells it.
                    with anyio.fail_after(30):
                        while not (await never.call_tool("web_search", {"text": "q"})).is_error:
                            await anyio.sleep(0.01)
                    latencies["refusal"].append(time.perf_counter() - started)

                async with anyio.create_task_group() as group:
                    for mode in modes:
                        group.start_soon(heard, mode)
                    if action == "force-open":
                        group.start_soon(refused)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per path")
    parser.add_argument("--fleet", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--rounds", type=int, default=50, help="force-open/release rounds")
    parser.add_argument(
        "--poll", type=float, default=1.0, help="the polling gateway's fleet poll interval"
    )
    parser.add_argument("--database-url", default=os.environ.get(
        "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    parser.add_argument("--bench-db", default="bp_bench_mcp")
    parser.add_argument(
        "--cpu-load", type=int, default=0, help="also measure part 1 beside N busy processes"
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))

    if args.calls:
        report_overhead(args.calls, tmp)
        if args.cpu_load:
            with busy(args.cpu_load):
                print(f"\n## beside a CPU-bound load: {args.cpu_load} busy processes")
                report_overhead(args.calls, tmp / "loaded")
    if args.fleet:
        report_latency(args, tmp)


def _spin(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


class busy:
    """N processes burning CPU for as long as the block runs."""

    def __init__(self, n: int) -> None:
        self.stop = multiprocessing.Event()
        self.procs = [multiprocessing.Process(target=_spin, args=(self.stop,)) for _ in range(n)]

    def __enter__(self) -> busy:
        for proc in self.procs:
            proc.start()
        time.sleep(2)  # let the load average feel it
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for proc in self.procs:
            proc.join(10)


def spread(values: list[float], direct: list[float], slices: int = 5) -> str:
    """min..max of the p50 overhead over `slices` consecutive slices of the calls."""
    size = len(values) // slices
    cuts = [
        pct(values[i * size : (i + 1) * size], 0.5) - pct(direct[i * size : (i + 1) * size], 0.5)
        for i in range(slices)
    ]
    return f"{ms(min(cuts))} .. {ms(max(cuts))}"


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def report_overhead(calls_per_path: int, tmp: Path) -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    before = load()
    timings, own = anyio.run(overhead, calls_per_path, tmp)
    call, check = breaker_share(20_000)
    envelope = envelope_share(20_000)
    direct = timings["direct"]
    print(f"\n{calls_per_path} calls of echo per path, interleaved; {os.cpu_count()} cores; "
          f"load average before: {before}; after: {load()}\n")  # fmt: skip
    print("| path | p50 ms | p99 ms | p50 minus direct | p99 minus direct | p50 / direct "
          "| p50 minus direct, 5 slices |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    labels = {
        "direct": "direct (client -> upstream, stdio)",
        "gateway": "through the gateway, passthrough (two stdio hops)",
        "sdk path": "through the gateway, `--no-passthrough` (SDK models)",
    }
    for path in PATHS:
        values = timings[path]
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        extra = (
            f"{ms(p50 - pct(direct, 0.5))} | {ms(p99 - pct(direct, 0.99))} | "
            f"{p50 / pct(direct, 0.5):.2f}x | {spread(values, direct)}"
            if path != "direct"
            else "| | |"
        )
        print(f"| {labels[path]} | {ms(p50)} | {ms(p99)} | {extra} |")
    print("\nTimed in-process (ms):\n")
    print("| share | p50 ms | p99 ms |")
    print("|---|---:|---:|")
    rows = [
        ("the gateway's own wall time per passthrough call", [row[0] for row in own]),
        ("of which: its two pipe writes (upstream, client)", [row[2] for row in own]),
        ("its event loop's CPU time per passthrough call (all of it)", [row[1] for row in own]),
        ("the SDK transport's envelope, dump + parse (in the CPU row only)", envelope),
        ("the breaker: one call's run, begin + finish (in both)", call),
        ("the breaker: offered-set check, 20 tools (in both)", check),
    ]
    for label, values in rows:
        print(f"| {label} | {ms(pct(values, 0.5))} | {ms(pct(values, 0.99))} |")
    means = ", ".join(f"{path} {ms(statistics.mean(timings[path]))}" for path in PATHS)
    print(f"\nmeans (ms): {means}; own-work samples: {len(own)}")


def report_latency(args: argparse.Namespace, tmp: Path) -> None:
    from bench.support.scratch import drop_database

    server = None
    before = load()
    try:
        server = setup_control_plane(args.database_url, args.redis_url, args.bench_db)
        from runs.models import AgentToken

        agent = AgentToken.issue(name="bench-gateway")[1]
        operator = AgentToken.issue(name="bench-ops", is_operator=True)[1]
        latencies = anyio.run(
            force_open_latency, server.url, agent, operator, args.rounds, args.poll, tmp
        )
    finally:
        if server is not None:
            server.stop()
        from django.db import connections

        connections.close_all()
        drop_database(args.database_url, args.bench_db)
    print(
        f"\noperator action -> list_changed at the client: {args.rounds * 2} actions "
        f"(force-open, release), random phase; load average before: {before}; after: {load()}\n"
    )
    print("| fleet sync | actions | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for mode, label in (
        ("push", "push (long-poll)"),
        ("poll", f"poll every {args.poll:g} s"),
        ("refusal", "force-open -> refusal, a client that never re-lists (push)"),
    ):
        values = latencies[mode]
        print(
            f"| {label} | {len(values)} | {ms(pct(values, 0.5))} | {ms(pct(values, 0.99))} "
            f"| {ms(max(values))} |"
        )


if __name__ == "__main__":
    main()
