"""An upstream whose tools fail without raising, on the `mcp` 2.x low-level `Server` (the
`MCPServer` refuses to send structured content that breaks a tool's own outputSchema; a server
written on the low-level API, or in another language, does send it).

    python -m scripts.testing.mcp_silent_upstream       # stdio

    weather        outputSchema {city, temperature_c}; a valid answer for "Lisbon", else
                   structuredContent with temperature_c a string (breaks the schema)
    search_empty   answers with no content at all
    search_error   answers `{"error": "rate limited"}` as text, with isError false
    search_ok      a real-looking answer
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["city", "temperature_c"],
    "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"}},
}
QUERY = {"type": "object", "properties": {"q": {"type": "string"}}}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="weather",
                description="Weather in a city",
                input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
                output_schema=WEATHER_SCHEMA,
            ),
            types.Tool(name="search_empty", description="Search", input_schema=QUERY),
            types.Tool(name="search_error", description="Search", input_schema=QUERY),
            types.Tool(name="search_ok", description="Search", input_schema=QUERY),
        ]
    )


def text(value: str) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=value)]


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "weather":
        city = str(arguments.get("city", ""))
        if city == "Lisbon":
            structured: dict[str, Any] = {"city": city, "temperature_c": 17.5}
        else:
            structured = {"city": city, "temperature_c": "cold"}  # breaks the schema
        return types.CallToolResult(
            content=text(json.dumps(structured)), structured_content=structured
        )
    if params.name == "search_empty":
        return types.CallToolResult(content=[])
    if params.name == "search_error":
        return types.CallToolResult(content=text('{"error": "rate limited"}'), is_error=False)
    query = str(arguments.get("q", ""))
    return types.CallToolResult(content=text(f"3 results for {query}: a, b, c"))


server: Server[Any] = Server("silent-upstream", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
