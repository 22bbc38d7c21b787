"""The client compatibility matrix: each MCP client an agent developer uses, driven through the
gateway (stdio) by a scripted model with no API key, while a tool breaks, opens and comes back.

    .venv/bin/python -m scripts.mcp_client_matrix [--cooldown 2] [--clients a,b] [--markdown]
        [--way remove|refuse]

Per client: does the model's next turn lose the tool; how many calls reach the open tool (are
refused) before the model stops calling it; does the tool come back once healthy, and how long
after it opened. The scripted model calls `web_search` each turn while its client lists it, and
stops for the rest of the task once a refusal tells it the tool is out (docs/mcp-clients.md).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from scripts.testing.mcp_servers import LIST_CHANGED, Flaky, gateway_stdio, write_config
from scripts.testing.processes import ROOT

TOOL = "web_search"
REFUSED_MARK = "did not run"  # in every refusal's text (breaker_panel.per_call.refusal)
THRESHOLD = 3
SETTLE = 0.05  # after the opening failure: the client may act on list_changed


class Driver:
    """What a scripted model needs from a client: the tools it sees this turn, and a call."""

    async def tools(self) -> list[str]:
        raise NotImplementedError

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """(is_error, text) of one tools/call."""
        raise NotImplementedError


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


class SessionDriver(Driver):
    """The `mcp` package's ClientSession; `relist`: "turn" (lists before every turn),
    "notified" (re-lists after list_changed) or "never" (lists once, as Claude Code does)."""

    def __init__(self, session: Any, relist: str) -> None:
        self.session = session
        self.relist = relist
        self.stale = True

    async def on_message(self, message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == LIST_CHANGED and self.relist == "notified":
            self.stale = True

    async def tools(self) -> list[str]:
        if self.relist == "turn" or self.stale:
            self.stale = False
            self._names = [tool.name for tool in (await self.session.list_tools()).tools]
        return self._names

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        result = await self.session.call_tool(name, arguments)
        return bool(result.is_error), _text(result)


@asynccontextmanager
async def mcp_session(config: Path, relist: str) -> AsyncIterator[Driver]:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    holder: list[SessionDriver] = []

    async def handler(message: Any) -> None:
        if holder:
            await holder[0].on_message(message)

    async with (
        stdio_client(gateway_stdio(config)) as (read, write),
        ClientSession(read, write, message_handler=handler) as session,
    ):
        await session.initialize()
        holder.append(SessionDriver(session, relist))
        yield holder[0]


class AgentsDriver(Driver):
    def __init__(self, server: Any) -> None:
        self.server = server

    async def tools(self) -> list[str]:
        return [tool.name for tool in await self.server.list_tools()]

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        result = await self.server.call_tool(name, arguments)
        return bool(result.is_error), _text(result)


@asynccontextmanager
async def agents_sdk(config: Path, cache_tools_list: bool) -> AsyncIterator[Driver]:
    from agents.mcp import MCPServerStdio

    params = gateway_stdio(config)
    server = MCPServerStdio(
        params={"command": params.command, "args": list(params.args), "cwd": str(params.cwd)},
        cache_tools_list=cache_tools_list,
        client_session_timeout_seconds=30,
    )
    await server.connect()
    try:
        yield AgentsDriver(server)
    finally:
        await server.cleanup()


class PydanticDriver(Driver):
    def __init__(self, toolset: Any) -> None:
        self.toolset = toolset

    async def tools(self) -> list[str]:
        return [tool.name for tool in await self.toolset.list_tools()]

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        from pydantic_ai import ModelRetry

        try:
            result = await self.toolset.direct_call_tool(name, arguments)
        except ModelRetry as exc:  # an isError result goes back to the model as a retry prompt
            return True, str(exc)
        return False, str(result)


@asynccontextmanager
async def pydantic_ai(config: Path) -> AsyncIterator[Driver]:
    """Pydantic AI's MCPToolset (needs `fastmcp-slim[client]`, not a project dependency)."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    params = gateway_stdio(config)
    transport = StdioTransport(params.command, list(params.args), cwd=str(params.cwd))
    # cache_tools=True: the default. init_timeout: the gateway answers `initialize` at once,
    # but its own start (importing mcp) takes over 5 s, fastmcp's default, on a loaded machine.
    async with MCPToolset(transport, init_timeout=60) as toolset:
        yield PydanticDriver(toolset)


TS_DIR = ROOT / "tests" / "mcp" / "ts"  # @modelcontextprotocol/sdk, from its package-lock.json


def ts_client_missing(package: str = "@modelcontextprotocol/sdk") -> str | None:
    """Why a TypeScript client from `package` cannot be driven here (None: it can)."""
    if shutil.which("node") is None:
        return "no node on PATH (Node 20 runs the TypeScript MCP clients)"
    if not (TS_DIR / "node_modules" / package).is_dir():
        return f"tests/mcp/ts/node_modules has no {package}: run `make mcp-ts` (npm ci)"
    return None


class LineDriver(Driver):
    """A client in another language, driven over its stdin/stdout one JSON line at a time
    (tests/mcp/ts/client.mjs)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        await self.process.stdin.drain()
        with anyio.fail_after(60):
            line = await self.process.stdout.readline()
        if not line:
            raise ConnectionError("the client process exited")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def tools(self) -> list[str]:
        return list((await self.ask({"op": "tools"}))["tools"])

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        answer = await self.ask({"op": "call", "name": name, "arguments": arguments})
        return bool(answer.get("isError")), str(answer.get("text", ""))


@asynccontextmanager
async def node_client(config: Path, script: str, package: str) -> AsyncIterator[Driver]:
    """A TypeScript MCP client (tests/mcp/ts/`script`, from `package`) in front of the gateway:
    client.mjs is the MCP SDK's `Client`, vercel_client.mjs the Vercel AI SDK's."""
    missing = ts_client_missing(package)
    if missing is not None:
        raise RuntimeError(missing)
    async with line_client(["node", str(TS_DIR / script)], config, TS_DIR) as driver:
        yield driver


MCP1_PYTHON = ROOT / ".venv-mcp1" / "bin" / "python"


def langchain_missing() -> str | None:
    """Why langchain-mcp-adapters cannot be driven here (None: it can). It needs mcp<2, so it
    runs in the mcp 1.x venv (`make mcp1`, requirements-mcp1.lock)."""
    if not MCP1_PYTHON.exists():
        return "no .venv-mcp1 (langchain-mcp-adapters needs mcp<2): run `make mcp1`"
    found = (MCP1_PYTHON.parent.parent / "lib").glob(
        "python3*/site-packages/langchain_mcp_adapters"
    )
    if not any(found):
        return ".venv-mcp1 has no langchain-mcp-adapters: rebuild it with `make mcp1`"
    return None


@asynccontextmanager
async def langchain(config: Path, mode: str) -> AsyncIterator[Driver]:
    """langchain-mcp-adapters (tests/mcp/langchain_client.py, in the mcp 1.x venv)."""
    missing = langchain_missing()
    if missing is not None:
        raise RuntimeError(missing)
    script = str(ROOT / "tests" / "mcp" / "langchain_client.py")
    async with line_client([str(MCP1_PYTHON), script], config, ROOT, mode) as driver:
        yield driver


@asynccontextmanager
async def line_client(
    argv: list[str], config: Path, cwd: Path, *extra: str
) -> AsyncIterator[Driver]:
    """A client process given the gateway's command as JSON, driven by LineDriver."""
    params = gateway_stdio(config)
    server = {"command": params.command, "args": list(params.args), "cwd": str(params.cwd)}
    process = await asyncio.create_subprocess_exec(
        *argv, json.dumps(server), *extra,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=cwd,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        with anyio.fail_after(60):
            ready = await process.stdout.readline()
        if not ready:
            raise ConnectionError("the TypeScript client exited before it connected")
        yield LineDriver(process)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        close = getattr(getattr(process, "_transport", None), "close", None)
        if callable(close):  # else asyncio warns when it is collected after the loop closed
            close()


CLIENTS: dict[str, Callable[[Path], Any]] = {
    "session-every-turn": lambda c: mcp_session(c, "turn"),
    "session-list-changed": lambda c: mcp_session(c, "notified"),
    "never-relists": lambda c: mcp_session(c, "never"),
    "agents-cache": lambda c: agents_sdk(c, True),
    "agents-no-cache": lambda c: agents_sdk(c, False),
    "pydantic-ai": pydantic_ai,
    "ts-client": lambda c: node_client(c, "client.mjs", "@modelcontextprotocol/sdk"),
    "vercel-ai": lambda c: node_client(c, "vercel_client.mjs", "@ai-sdk/mcp"),
    "langchain-per-call": lambda c: langchain(c, "per-call"),
    "langchain-session": lambda c: langchain(c, "session"),
}
NODE_PACKAGES = {"ts-client": "@modelcontextprotocol/sdk", "vercel-ai": "@ai-sdk/mcp"}
LABELS = {
    "session-every-turn": "`mcp` ClientSession, lists before every turn",
    "session-list-changed": "`mcp` ClientSession, re-lists on `list_changed`",
    "never-relists": "never re-lists (simulated: Claude Code, Codex today)",
    "agents-cache": "OpenAI Agents SDK `MCPServerStdio`, `cache_tools_list=True`",
    "agents-no-cache": "OpenAI Agents SDK `MCPServerStdio`, `cache_tools_list=False`",
    "pydantic-ai": "Pydantic AI `MCPToolset` (`cache_tools=True`; with `fastmcp-slim[client]`)",
    "ts-client": "TypeScript SDK `Client` (Node), tools kept from its `listChanged` handler",
    "vercel-ai": "Vercel AI SDK `createMCPClient`, `tools()` once per `generateText`",
    "langchain-per-call": "langchain-mcp-adapters `get_tools()` (a new session, so a new "
    "stdio gateway, per call)",
    "langchain-session": "langchain-mcp-adapters `load_mcp_tools(session)` (one session)",
}
QUICK = ("session-list-changed", "never-relists")


@dataclass
class Row:
    client: str
    next_turn_loses_tool: bool
    calls_refused_before_model_stops: int
    upstream_calls_while_open: int
    comes_back: bool
    back_after_s: float | None
    cooldown_s: float
    way: str = "remove"  # how the gateway takes the open tool away (docs/mcp-gateway.md)


class Model:
    """The scripted model: calls the tool each turn while it is listed, until a refusal says it
    is out for the task."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.gave_up = False
        self.refused = 0

    async def turn(self) -> tuple[bool, bool, str]:
        """(offered, called, outcome) of one turn; outcome is ok, error or refused."""
        offered = TOOL in await self.driver.tools()
        if not offered or self.gave_up:
            return offered, False, ""
        is_error, text = await self.driver.call(TOOL, {"text": "q"})
        if is_error and REFUSED_MARK in text:
            self.refused += 1
            self.gave_up = True  # the refusal says calling again will not work
            return offered, True, "refused"
        return offered, True, "error" if is_error else "ok"


async def measure(
    name: str, client: Callable[[Path], Any], cooldown: float, tmp: Path, way: str = "remove"
) -> Row:
    flaky = Flaky(tmp / f"{abs(hash(name))}.json")
    config = write_config(
        tmp / f"{abs(hash(name))}-gateway.json",
        {"search": flaky.stdio()},
        breaker={"threshold": THRESHOLD, "cooldown": cooldown, "check_interval": 0.05},
        way=way,
    )
    async with client(config) as driver:
        model = Model(driver)
        await model.turn()  # a first healthy turn: the client has listed its tools
        flaky.set(web_search="fail")
        for _ in range(THRESHOLD):
            await model.turn()
        opened = time.monotonic()
        upstream_at_open = flaky.calls(TOOL)
        await anyio.sleep(SETTLE)  # list_changed is sent before the last failure's answer
        offered, _, _ = await model.turn()
        for _ in range(5):  # later turns of the same task
            await model.turn()
        upstream_while_open = flaky.calls(TOOL) - upstream_at_open
        flaky.set()
        back_after = await _comes_back(driver, opened, cooldown)
    return Row(
        client=name,
        next_turn_loses_tool=not offered,
        calls_refused_before_model_stops=model.refused,
        upstream_calls_while_open=upstream_while_open,
        comes_back=back_after is not None,
        back_after_s=None if back_after is None else round(back_after, 2),
        cooldown_s=cooldown,
        way=way,
    )


async def _comes_back(driver: Driver, opened: float, cooldown: float) -> float | None:
    """A new task every 50 ms (a new scripted model): the first that calls the tool and succeeds."""
    deadline = opened + cooldown * 4 + 10
    while True:  # at least one new task, however slow the client's calls are
        _, _, outcome = await Model(driver).turn()
        if outcome == "ok":
            return time.monotonic() - opened
        if time.monotonic() >= deadline:
            return None
        await anyio.sleep(0.05)


def run_matrix(
    names: tuple[str, ...] | list[str], *, cooldown: float = 2.0, way: str = "remove"
) -> list[Row]:
    async def main() -> list[Row]:
        with tempfile.TemporaryDirectory() as tmp:
            return [await measure(n, CLIENTS[n], cooldown, Path(tmp), way) for n in names]

    return anyio.run(main)


def label(row: Row) -> str:
    name = LABELS.get(row.client, row.client)
    return name if row.way == "remove" else f"{name}; `way: {row.way}`"


def markdown(rows: list[Row]) -> str:
    lines = [
        "| client | next turn loses the tool | calls refused before the model stops "
        "| upstream calls while open | comes back | after (s; cooldown) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        back = f"{r.back_after_s} ({r.cooldown_s:g})" if r.comes_back else "no"
        lines.append(
            f"| {label(r)} | {'yes' if r.next_turn_loses_tool else 'no'} "
            f"| {r.calls_refused_before_model_stops} | {r.upstream_calls_while_open} "
            f"| {'yes' if r.comes_back else 'no'} | {back} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cooldown", type=float, default=2.0)
    parser.add_argument("--clients", help="comma-separated names (default: all)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--way", choices=("remove", "refuse"), default="remove")
    args = parser.parse_args(argv)
    names = args.clients.split(",") if args.clients else list(CLIENTS)
    if not args.clients and importlib.util.find_spec("fastmcp") is None:
        print(
            "skipping pydantic-ai: pip install 'fastmcp-slim[client]' to measure it",
            file=sys.stderr,
        )
        names.remove("pydantic-ai")
    for name in ("langchain-per-call", "langchain-session"):
        if not args.clients and langchain_missing() is not None:
            print(f"skipping {name}: {langchain_missing()}", file=sys.stderr)
            names.remove(name)
    for name, package in NODE_PACKAGES.items():
        missing = ts_client_missing(package)
        if not args.clients and missing is not None:
            print(f"skipping {name}: {missing}", file=sys.stderr)
            names.remove(name)
    rows = run_matrix(names, cooldown=args.cooldown, way=args.way)
    print(markdown(rows) if args.markdown else json.dumps([asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
