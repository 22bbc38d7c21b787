"""The classification table (FAILURE_TABLE, docs/mcp-gateway.md) against the real servers.

Each upstream is a real MCP server as people write them: `mcp` 2.x `MCPServer`, 1.x `FastMCP`
(in `.venv-mcp1`, built by `make mcp1`), the TypeScript SDK's `McpServer` (Node, packages from
tests/mcp/ts by `npm ci`) and a streamable HTTP server failing at the HTTP level. The gateway
runs with a threshold of 1: a call it counts as retryable takes its tool out of `tools/list`,
a semantic one leaves it listed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from breaker_panel.integrations.mcp import FAILURE_TABLE
from scripts.testing.mcp_servers import (
    PYTHON,
    Flaky,
    Notes,
    Process,
    connect,
    gateway_stdio,
    start_flaky_http,
    tool_names,
    write_config,
)
from scripts.testing.processes import ROOT

MCP1_PYTHON = ROOT / ".venv-mcp1/bin/python"
PY_SERVER = str(ROOT / "scripts/testing/mcp_python_upstream.py")
TS_DIR = ROOT / "tests/mcp/ts"
NODE = shutil.which("node")

# tool -> (arguments, counted as retryable?), per server, as seen on the real server.
PYTHON_2X = {
    "crash": ({"text": "x"}, True),  # exactly "Error executing tool crash"
    "connection_refused": ({"text": "x"}, True),  # the same words: 2.x hides the message
    "refuse": ({"text": "x"}, False),  # a ToolError: "...: no results for 'x'"
    "backend_down": ({"text": "x"}, True),  # a ToolError naming a 503
    "count": ({"n": "abc"}, False),  # argument validation
    "protocol": ({"text": "x"}, True),  # MCPError: a JSON-RPC error -32603
    "nested": ({"text": "x"}, True),  # "...: Error reading resource res://broken"
}
PYTHON_1X = {
    "crash": ({"text": "x"}, True),  # "...: 'x'", a KeyError's text
    "connection_refused": ({"text": "x"}, True),  # "...: [Errno 111] Connection refused"
    "refuse": ({"text": "x"}, False),
    "backend_down": ({"text": "x"}, True),
    "count": ({"n": "abc"}, False),
    # 1.x turns an McpError into "...: <message>" too: only its text can tell, and this one
    # says nothing of an outage.
    "protocol": ({"text": "x"}, False),
    "nested": ({"text": "x"}, False),  # "...: Error reading resource res://broken: disk on fire"
}
TYPESCRIPT = {
    "crash": ({"text": "x"}, True),  # "Cannot read properties of undefined (reading 'field')"
    "connection_refused": ({"text": "x"}, True),  # "connect ECONNREFUSED 127.0.0.1:9"
    "refuse": ({"text": "x"}, False),  # a thrown Error: its message as is
    "backend_down": ({"text": "x"}, True),
    "count": ({"n": "abc"}, False),  # "MCP error -32602: Input validation error: ..."
    "mcperror": ({"text": "x"}, True),  # "MCP error -32603: the index is being rebuilt"
}


def _check_server(tmp_path: Path, server: dict[str, Any], expected: dict[str, Any]) -> None:
    config = write_config(
        tmp_path / "gateway.json",
        {"up": server},
        connect_timeout=60,
        breaker={"threshold": 1, "cooldown": 600, "max_cooldown": 600},
    )

    async def scenario() -> None:
        async with connect(gateway_stdio(config), Notes()) as client:
            listed = await tool_names(client)
            assert set(expected) | {"echo", "exit_process"} <= set(listed), listed
            for tool, (arguments, _) in expected.items():
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, result)
            hidden = set(listed) - set(await tool_names(client))
            assert hidden == {tool for tool, (_, retryable) in expected.items() if retryable}

            # The process exits mid-call: retryable (the restart: test_gateway_stdio.py).
            died = await client.call_tool("exit_process", {"text": "x"})
            assert died.is_error and "closed" in died.content[0].text  # type: ignore[union-attr]
            assert "exit_process" not in await tool_names(client)

    anyio.run(scenario)


def test_mcp_2x_mcpserver(tmp_path: Path) -> None:
    _check_server(tmp_path, {"command": PYTHON, "args": [PY_SERVER]}, PYTHON_2X)


@pytest.mark.skipif(not MCP1_PYTHON.exists(), reason="no .venv-mcp1: `make mcp1` builds it")
def test_mcp_1x_fastmcp(tmp_path: Path) -> None:
    _check_server(tmp_path, {"command": str(MCP1_PYTHON), "args": [PY_SERVER]}, PYTHON_1X)


@pytest.mark.skipif(NODE is None, reason="no `node` on PATH: the TypeScript SDK server needs it")
@pytest.mark.skipif(
    not (TS_DIR / "node_modules/@modelcontextprotocol/sdk").exists(),
    reason="tests/mcp/ts has no node_modules: `make test` runs `npm ci` there",
)
def test_typescript_sdk_mcpserver(tmp_path: Path) -> None:
    server = {"command": str(NODE), "args": [str(TS_DIR / "server.mjs")], "cwd": str(TS_DIR)}
    _check_server(tmp_path, server, TYPESCRIPT)


def test_an_http_upstream_failing_at_the_http_level(
    flaky: Flaky, tmp_path: Path, processes: list[Process]
) -> None:
    upstream = start_flaky_http(flaky, processes, tmp_path)
    config = write_config(
        tmp_path / "gateway.json",
        {"search": {"url": upstream.url}},
        breaker={"threshold": 1, "cooldown": 600, "max_cooldown": 600},
    )

    async def scenario() -> None:
        async with connect(gateway_stdio(config), Notes()) as client:
            assert await tool_names(client) == ["web_search", "fetch_page", "echo"]
            flaky.set(web_search="http503", fetch_page="http429")
            for tool in ("web_search", "fetch_page"):
                assert (await client.call_tool(tool, {"text": "q"})).is_error
            assert await tool_names(client) == ["echo"]
            assert flaky.calls() == 2  # both reached the upstream, and were answered
            flaky.set(echo="drop")
            dropped = await client.call_tool("echo", {"text": "q"})
            assert dropped.is_error
            assert await tool_names(client) == []

    anyio.run(scenario)


def test_the_docs_carry_the_table() -> None:
    docs = (ROOT / "docs/mcp-gateway.md").read_text(encoding="utf-8")
    for row in FAILURE_TABLE:
        assert f"| {row.server} | {row.failure} | {row.received} | {row.counted} |" in docs, row
