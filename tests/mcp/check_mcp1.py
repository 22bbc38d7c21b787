"""guard_session against mcp 1.x (run by an interpreter that has it; see test_mcp_1x.py).

A FastMCP server in memory, a 1.x ClientSession, the `isError` spelling; and the gateway's
clear refusal of 1.x.
"""

from __future__ import annotations

import importlib.metadata as m

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from breaker_panel import ToolBreaker
from breaker_panel.integrations.mcp import guard_session

app = FastMCP("flaky1")
calls = []
mode = {"web_search": "fail"}


@app.tool()
def web_search(text: str) -> str:
    calls.append(text)
    if mode["web_search"] == "fail":
        raise RuntimeError("503 Service Unavailable")
    if mode["web_search"] == "semantic":
        raise ValueError("no results")
    return "ok:" + text


async def main() -> None:
    async with create_connected_server_and_client_session(app._mcp_server) as session:
        breaker = ToolBreaker()
        s = guard_session(session, breaker)
        for _ in range(5):
            r = await s.call_tool("web_search", {"text": "q"})
            assert r.isError, r
        listed = [t.name for t in (await s.list_tools()).tools]
        assert listed == [], listed
        refused = await s.call_tool("web_search", {"text": "q"})
        assert refused.isError and "web_search" in refused.content[0].text
        assert len(calls) == 5
        print(
            "mcp",
            m.version("mcp"),
            "ok: 5 failures hid the tool; refusal:",
            type(refused).__name__,
            refused.isError,
        )
        b2 = ToolBreaker()
        s2 = guard_session(session, b2)
        mode["web_search"] = "semantic"
        for _ in range(6):
            await s2.call_tool("web_search", {"text": "q"})
        assert not b2.is_open("web_search")
        print("semantic isError does not open it")
    try:
        import breaker_panel.mcp_gateway.gateway  # noqa: F401
    except ImportError as exc:
        print("gateway refused:", exc)


anyio.run(main)
