"""The gateway over streamable HTTP, in front of a streamable HTTP upstream: a handshake-era
client hears `list_changed` on its session, a 2026-07-28 client on `subscriptions/listen`."""

from __future__ import annotations

from pathlib import Path

import anyio

from scripts.testing.mcp_servers import (
    Flaky,
    Notes,
    Process,
    connect,
    start_flaky_http,
    start_gateway_http,
    tool_names,
    write_config,
)


def test_an_http_client_loses_the_tool_and_is_told(
    flaky: Flaky, tmp_path: Path, processes: list[Process]
) -> None:
    upstream = start_flaky_http(flaky, processes, tmp_path)
    config = write_config(tmp_path / "gateway.json", {"search": {"url": upstream.url}})
    gateway = start_gateway_http(config, processes, tmp_path)

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway.url, notes) as client:
            assert await tool_names(client) == ["web_search", "fetch_page", "echo"]
            flaky.set(web_search="fail")
            for _ in range(5):
                assert (await client.call_tool("web_search", {"text": "q"})).is_error
            await notes.wait_for()
            assert await tool_names(client) == ["fetch_page", "echo"]
            refused = await client.call_tool("web_search", {"text": "q"})
            assert refused.is_error
            assert flaky.calls("web_search") == 5

    anyio.run(scenario)


def test_a_modern_client_hears_the_change_on_its_listen_stream(
    flaky: Flaky, tmp_path: Path, processes: list[Process]
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    gateway = start_gateway_http(config, processes, tmp_path)

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway.url, notes, mode="auto") as client:
            assert client.protocol_version >= "2026-07-28"
            assert "web_search" in await tool_names(client)
            async with client.listen(tools_list_changed=True) as events:
                flaky.set(web_search="fail")
                for _ in range(5):
                    assert (await client.call_tool("web_search", {"text": "q"})).is_error
                with anyio.fail_after(20):
                    async for _event in events:
                        break
            assert "web_search" not in await tool_names(client)

    anyio.run(scenario)
