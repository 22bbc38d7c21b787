"""langchain-mcp-adapters in front of the gateway, driven line by line by
scripts/mcp_client_matrix.py (as tests/mcp/ts/client.mjs is). Run by the mcp 1.x venv
(`make mcp1`): the adapters require mcp<2, the project pins mcp>=2.

    .venv-mcp1/bin/python tests/mcp/langchain_client.py '{"command", "args", "cwd"}' MODE

MODE `per-call`: `MultiServerMCPClient.get_tools()`, whose tools open a new MCP session, so
over stdio a new gateway process, for every call (the adapters' documented default).
MODE `session`: `load_mcp_tools(session)` on one `client.session(...)`, kept for the task.
Tools are listed once and kept, as `create_agent(model, tools)` keeps them; a call is made as
an agent's loop makes it (a ToolCall in, a ToolMessage out).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools


def say(answer: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


async def main() -> None:
    server, mode = json.loads(sys.argv[1]), sys.argv[2]
    connection = {"transport": "stdio", "command": server["command"], "args": server["args"],
                  "cwd": server["cwd"]}  # fmt: skip
    client = MultiServerMCPClient({"gateway": connection})
    async with contextlib.AsyncExitStack() as stack:
        if mode == "session":
            session = await stack.enter_async_context(client.session("gateway"))
            tools = await load_mcp_tools(session)
        else:
            tools = await client.get_tools()
        by_name = {tool.name: tool for tool in tools}
        say({"ready": True})
        loop = asyncio.get_running_loop()
        calls = 0
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            request = json.loads(line)
            if request["op"] == "tools":
                say({"tools": list(by_name)})
                continue
            calls += 1
            call = {"type": "tool_call", "id": f"call-{calls}", "name": request["name"],
                    "args": request["arguments"]}  # fmt: skip
            message = await by_name[request["name"]].ainvoke(call)
            content = message.content
            text = content if isinstance(content, str) else " ".join(
                block.get("text", "") if isinstance(block, dict) else str(block)
                for block in content
            )  # fmt: skip
            say({"isError": message.status == "error", "text": text})


if __name__ == "__main__":
    asyncio.run(main())
