"""A local MCP server whose tools fail on command, for the gateway tests and benchmark.

    python -m scripts.testing.mcp_upstream --state STATE.json [--http PORT] [--name NAME]
        [--delay SECONDS] [--gate PATH]

--delay and --gate make a slow starter: it serves (reads its stdin) only after the delay and
once the gate file exists.

Each `tools/call` reads the tool's mode from STATE.json (`{"web_search": "fail"}`; a missing
tool or file means "ok") and appends one line to STATE.json.calls, so a test can tell whether a
call reached this server. Modes: ok, fail (isError "503 Service Unavailable"), semantic (isError
"no results"), raise (a JSON-RPC error), hang (never answers), exit (the process dies), announce
(answer, after telling the client its tool list changed), malformed (over stdio: a reply whose
result is no CallToolResult, written past the SDK, which would refuse to send it); over HTTP
also http503 and http429 (that status to the POST, no JSON-RPC body) and drop (the process dies
before answering, so the connection drops).
big (a 10 MB text result), garbage (a line that is no JSON-RPC, then the answer).
`"_extra": "a,b"` lists more tools; `"_list": "hang"` makes
tools/list never answer (a server alive but stuck).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

TOOLS = ("web_search", "fetch_page", "echo")
# The stdio wire, shared with the SDK's transport so a raw line can go out between its messages.
WIRE = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", write_through=True)


def build_server(state: Path, name: str) -> Server[Any]:
    calls = state.with_name(state.name + ".calls")

    def mode(tool: str, default: str = "ok") -> str:
        try:
            return str(json.loads(state.read_text()).get(tool, default))
        except FileNotFoundError:
            return default

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        if mode("_list") == "hang":
            await anyio.sleep_forever()
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return types.ListToolsResult(
            tools=[
                types.Tool(name=tool, description=f"{tool} from {name}", input_schema=schema)
                for tool in (*TOOLS, *filter(None, mode("_extra", "").split(",")))
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        with calls.open("a") as log:
            log.write(params.name + "\n")
        current = mode(params.name)
        text = str((params.arguments or {}).get("text", ""))
        if current == "fail":
            return _error("upstream said: 503 Service Unavailable")
        if current == "semantic":
            return _error(f"no results for {text!r}")
        if current == "raise":
            raise MCPError(types.INTERNAL_ERROR, "the search backend crashed")
        if current == "hang":
            await anyio.sleep_forever()
        if current == "exit":
            os._exit(1)
        if current == "malformed":
            reply = {"jsonrpc": "2.0", "id": ctx.request_id, "result": {"content": "no list"}}
            WIRE.write(json.dumps(reply) + "\n")
            WIRE.flush()
            await anyio.sleep_forever()  # the reply is out: the SDK must not send its own
        if current == "garbage":
            WIRE.write("this line is no JSON-RPC {\n")
            WIRE.flush()
        if current == "big":
            text = "x" * (10 * 1024 * 1024)
        if current == "announce":
            await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{name}:{text}")])

    return Server(name, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _http_failures(app: Any, state: Path) -> Any:
    """The ASGI app, with a tools/call to a tool in mode http503, http429 or drop failing at the
    HTTP level, as a proxy or a crashed worker in front of a real server would."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(body)
            tool = request["params"]["name"] if request.get("method") == "tools/call" else ""
            mode = json.loads(state.read_text()).get(tool, "ok") if tool else "ok"
        except (ValueError, KeyError, TypeError, OSError):
            mode = "ok"
        if mode in ("http503", "http429"):
            with state.with_name(state.name + ".calls").open("a") as log:
                log.write(tool + "\n")
            status = int(mode[4:])
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b"try later"})
            return
        if mode == "drop":
            os._exit(1)
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--name", default="flaky")
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this port")
    parser.add_argument("--delay", type=float, default=0.0, help="sleep this long, then serve")
    parser.add_argument("--gate", type=Path, help="serve once this file exists (a slow start)")
    args = parser.parse_args()
    server = build_server(args.state, args.name)
    parent = os.getppid()
    time.sleep(args.delay)
    while args.gate is not None and not args.gate.exists():
        if os.getppid() != parent or parent == 1:  # its gateway is gone: never serve
            sys.exit(0)
        time.sleep(0.02)
    if args.http:
        import uvicorn

        app = _http_failures(server.streamable_http_app(), args.state)
        uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")
        return

    async def serve() -> None:
        stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8"))
        async with stdio_server(stdin, anyio.wrap_file(WIRE)) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
