"""An upstream as people write Python MCP servers: `mcp` 2.x `MCPServer` or 1.x `FastMCP`.

    python scripts/testing/mcp_python_upstream.py      # stdio; runs under either mcp version

Each tool fails one way a real tool does, so a test can see what a client receives from the
server's own error handling (the gateway's classification table, docs/mcp-gateway.md).
"""

from __future__ import annotations

import importlib.metadata
import os

MAJOR = int(importlib.metadata.version("mcp").split(".")[0])

if MAJOR >= 2:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import INTERNAL_ERROR

    app = MCPServer("python-upstream")

    def protocol_error(message: str) -> Exception:
        return MCPError(INTERNAL_ERROR, message)
else:
    from mcp.server.fastmcp import Context, FastMCP  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
    from mcp.shared.exceptions import McpError  # type: ignore[attr-defined]
    from mcp.types import INTERNAL_ERROR, ErrorData

    app = FastMCP("python-upstream")  # type: ignore[assignment]

    def protocol_error(message: str) -> Exception:
        return McpError(ErrorData(code=INTERNAL_ERROR, message=message))


@app.tool()
def crash(text: str) -> str:
    """A bug: a plain exception (its text must not reach the client on 2.x)."""
    return {"a": 1}[text]  # type: ignore[return-value]


@app.tool()
def refuse(text: str) -> str:
    """A deliberate ToolError, written for the model."""
    raise ToolError(f"no results for {text!r}")


@app.tool()
def backend_down(text: str) -> str:
    """A deliberate ToolError saying the service behind the tool is failing."""
    raise ToolError("search backend answered 503 Service Unavailable")


@app.tool()
def connection_refused(text: str) -> str:
    """A crash of the kind an outage causes: the backend refuses the connection."""
    raise ConnectionRefusedError(111, "Connection refused")


@app.tool()
def count(n: int) -> str:
    """Takes a whole number: a string that is none fails argument validation."""
    return str(n)


@app.tool()
def protocol(text: str) -> str:
    """Raises the SDK's protocol error, which becomes a JSON-RPC error."""
    raise protocol_error("the index is being rebuilt")


@app.resource("res://broken")
def broken() -> str:
    raise RuntimeError("disk on fire")


@app.tool()
async def nested(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Reads a resource that crashes: a nested crash."""
    await ctx.read_resource("res://broken")
    return "unreachable"


@app.tool()
def exit_process(text: str) -> str:
    """The server process dies mid-call."""
    os._exit(1)


@app.tool()
def echo(text: str) -> str:
    return f"python:{text}"


if __name__ == "__main__":
    app.run()
