"""How long an MCP client waits for the gateway's `initialize` answer when an upstream is slow.

    .venv/bin/python bench/bench_mcp_gateway_start.py [--rounds 5] [--delay 3] [--before DIR]

The gateway (stdio) fronts two upstreams (scripts/testing/mcp_upstream.py): one that serves at
once and one that sleeps `--delay` s before it serves. Per round, timed from just before the
client spawns the gateway: the `initialize` answer (the `mcp` package's `Client` entered), then
the first `tools/list` holding both upstreams' tools. Then Pydantic AI's `MCPToolset` with its
default `init_timeout`: entered or timed out, and how long it took. `--before DIR` runs the same
rounds (alternating) with the gateway imported from DIR (`git archive main sdk/python/src | tar
-x -C DIR`), to compare with the code before a change.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp import StdioServerParameters  # noqa: E402

from scripts.testing.mcp_servers import PYTHON, Flaky, Notes, connect, write_config  # noqa: E402


def gateway(config: Path, src: str | None) -> StdioServerParameters:
    env = {"PYTHONPATH": src} if src else None
    args = ["-m", "breaker_panel.mcp_gateway", "--config", str(config)]
    return StdioServerParameters(command=PYTHON, args=args, cwd=str(ROOT), env=env)


async def mcp_round(config: Path, src: str | None) -> tuple[float, float]:
    """(s to the initialize answer, s to the first full tools/list), from the spawn."""
    start = time.perf_counter()
    async with connect(gateway(config, src), Notes()) as client:
        initialized = time.perf_counter() - start
        names = [tool.name for tool in (await client.list_tools()).tools]
        listed = time.perf_counter() - start
        assert "slow__echo" in names and "quick__echo" in names, names
    return initialized, listed


async def pydantic_round(config: Path, src: str | None) -> tuple[bool, float, str]:
    """Pydantic AI's MCPToolset with its default init_timeout: (entered, s, why not)."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    params = gateway(config, src)
    env = dict(os.environ) | (params.env or {})
    transport = StdioTransport(params.command, list(params.args), env=env, cwd=str(params.cwd))
    start = time.perf_counter()
    try:
        async with MCPToolset(transport) as toolset:
            elapsed = time.perf_counter() - start
            await toolset.list_tools()
            return True, elapsed, ""
    except Exception as exc:  # noqa: BLE001 - the outcome is what is measured
        return False, time.perf_counter() - start, f"{type(exc).__name__}: {exc}"[:160]


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s, min {min(values):.2f}, max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--before", help="a directory holding the gateway's code before")
    parser.add_argument("--no-pydantic", action="store_true")
    args = parser.parse_args()
    variants: dict[str, str | None] = {"after": None}
    if args.before:
        variants = {"before": str(Path(args.before).resolve()), **variants}
    with tempfile.TemporaryDirectory() as tmp:
        quick, slow = Flaky(Path(tmp) / "quick.json", "quick"), Flaky(Path(tmp) / "slow.json")
        servers = {"quick": quick.stdio(), "slow": slow.stdio(delay=args.delay)}
        config = write_config(Path(tmp) / "gateway.json", servers)
        results: dict[str, dict[str, list[Any]]] = {
            name: {"init": [], "list": [], "pydantic": []} for name in variants
        }
        print(f"load average at start: {os.getloadavg()}")
        for round_ in range(args.rounds):
            for name, src in variants.items():
                initialized, listed = anyio.run(mcp_round, config, src)
                results[name]["init"].append(initialized)
                results[name]["list"].append(listed)
                line = f"round {round_} {name}: initialize {initialized:.2f} s, list {listed:.2f} s"
                if not args.no_pydantic:
                    outcome = anyio.run(pydantic_round, config, src)
                    results[name]["pydantic"].append(outcome)
                    line += f"; pydantic-ai default init_timeout: {outcome}"
                print(line, flush=True)
        print(f"load average at end: {os.getloadavg()}")
        for name, result in results.items():
            print(f"{name}: initialize {summary(result['init'])}")
            print(f"{name}: first full tools/list {summary(result['list'])}")
            if result["pydantic"]:
                ok = sum(1 for entered, _, _ in result["pydantic"] if entered)
                times = [elapsed for _, elapsed, _ in result["pydantic"]]
                print(f"{name}: pydantic-ai entered {ok}/{len(times)}, {summary(times)}")


if __name__ == "__main__":
    main()
