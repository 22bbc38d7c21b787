"""The stdio fast path for `tools/call` (passthrough.py): calls relayed as plain JSON-RPC still
reach the breaker, open tools are refused unsent, upstream errors and malformed replies count
as failures, and calls over a streamable HTTP upstream take the same path."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from breaker_panel.mcp_gateway.gateway import TIMINGS_ENV
from breaker_panel.mcp_gateway.passthrough import malformed
from scripts.testing.mcp_servers import (
    Flaky,
    Notes,
    Process,
    connect,
    gateway_stdio,
    start_flaky_http,
    tool_names,
    write_config,
)


def text_of(result: object) -> str:
    return " ".join(block.text for block in result.content)  # type: ignore[attr-defined]


def fast_calls(path: Path) -> int:
    """Calls the gateway relayed on its fast path (it writes one line each when it exits)."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def gateway_with_timings(config: Path, timings: Path, *extra: str):  # type: ignore[no-untyped-def]
    params = gateway_stdio(config, *extra)
    params.env = {"PATH": os.environ.get("PATH", ""), TIMINGS_ENV: str(timings)}
    return params


def test_calls_take_the_fast_path_and_the_breaker_sees_their_outcomes(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    timings = tmp_path / "timings.txt"

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_with_timings(config, timings), notes) as client:
            assert await tool_names(client) == ["web_search", "fetch_page", "echo"]
            ok = await client.call_tool("echo", {"text": "ü"})
            assert not ok.is_error and text_of(ok) == "flaky:ü"
            flaky.set(web_search="semantic")
            for _ in range(6):  # semantic: the tool's answer, never an outage
                assert (await client.call_tool("web_search", {"text": "q"})).is_error
            assert "web_search" in await tool_names(client)
            flaky.set(web_search="fail")
            for _ in range(5):
                result = await client.call_tool("web_search", {"text": "q"})
                assert result.is_error and "503" in text_of(result)
            await notes.wait_for()
            assert await tool_names(client) == ["fetch_page", "echo"]
            reached = flaky.calls("web_search")
            refused = await client.call_tool("web_search", {"text": "q"})
            assert refused.is_error and "web_search" in text_of(refused)
            assert flaky.calls("web_search") == reached  # never reached the upstream

    anyio.run(scenario)
    assert fast_calls(timings) == 12  # every relayed call; the refusal is not relayed


def test_upstream_errors_and_malformed_replies_are_retryable_failures(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()}, call_timeout=15)
    timings = tmp_path / "timings.txt"

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_with_timings(config, timings), notes) as client:
            await tool_names(client)
            flaky.set(web_search="raise")
            for _ in range(2):  # a JSON-RPC error: answered as an isError result
                result = await client.call_tool("web_search", {"text": "q"})
                assert result.is_error and "the search backend crashed" in text_of(result)
            flaky.set(web_search="malformed")
            for _ in range(3):
                result = await client.call_tool("web_search", {"text": "q"})
                assert result.is_error and "malformed result" in text_of(result)
            await notes.wait_for()  # 2 + 3 consecutive retryable failures: open
            assert "web_search" not in await tool_names(client)
            # The link is still good after a bad reply.
            assert not (await client.call_tool("echo", {"text": "x"})).is_error
            with pytest.raises(MCPError, match="unknown tool"):
                await client.call_tool("no_such_tool", {})

    anyio.run(scenario)
    assert fast_calls(timings) == 6


def test_a_cancelled_call_is_not_answered_and_records_nothing(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            await tool_names(client)
            flaky.set(web_search="hang")
            for _ in range(6):  # more than the threshold: a cancelled call is no failure
                with anyio.move_on_after(0.2):
                    await client.call_tool("web_search", {"text": "q"})
            flaky.set(web_search="ok")
            result = await client.call_tool("web_search", {"text": "q"})
            assert not result.is_error
            assert "web_search" in await tool_names(client)
            assert notes.count() == 0

    anyio.run(scenario)


def test_a_streamable_http_upstream_takes_the_fast_path_too(
    flaky: Flaky, tmp_path: Path, processes: list[Process]
) -> None:
    upstream = start_flaky_http(flaky, processes, tmp_path)
    config = write_config(tmp_path / "gateway.json", {"search": {"url": upstream.url}})
    timings = tmp_path / "timings.txt"

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_with_timings(config, timings), notes) as client:
            assert not (await client.call_tool("echo", {"text": "x"})).is_error
            flaky.set(web_search="fail")
            for _ in range(5):
                assert (await client.call_tool("web_search", {"text": "q"})).is_error
            await notes.wait_for()
            assert await tool_names(client) == ["fetch_page", "echo"]
            assert (await client.call_tool("web_search", {"text": "q"})).is_error
            assert flaky.calls("web_search") == 5

    anyio.run(scenario)
    assert fast_calls(timings) == 6


def test_the_sdk_path_is_still_there_for_comparison(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    timings = tmp_path / "timings.txt"

    async def scenario() -> None:
        async with connect(gateway_with_timings(config, timings, "--no-passthrough"), Notes()) as c:
            assert not (await c.call_tool("echo", {"text": "x"})).is_error
            flaky.set(echo="malformed")
            result = await c.call_tool("echo", {"text": "x"})
            assert result.is_error and "failed" in text_of(result)

    anyio.run(scenario)
    assert fast_calls(timings) == 0


def test_what_counts_as_malformed() -> None:
    assert malformed({"content": [{"type": "text", "text": "a"}], "isError": False}) is None
    assert malformed({"content": [], "structuredContent": {"a": 1}}) is None
    assert malformed([]) is not None
    assert malformed({"isError": True}) is not None
    assert malformed({"content": [{"text": "no type"}]}) is not None
    assert malformed({"content": [], "isError": "yes"}) is not None


def test_a_client_that_never_listed_still_hears_the_change(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            flaky.set(web_search="fail")  # the names came from elsewhere (a cached list, say)
            for _ in range(5):
                assert (await client.call_tool("web_search", {"text": "q"})).is_error
            await notes.wait_for()
            assert notes.count() == 1

    anyio.run(scenario)


def test_a_2026_client_on_stdio_takes_the_sdk_path_and_hears_the_change(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})
    timings = tmp_path / "timings.txt"

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_with_timings(config, timings), notes, mode="auto") as client:
            assert client.protocol_version >= "2026-07-28"
            assert not (await client.call_tool("echo", {"text": "x"})).is_error
            async with client.listen(tools_list_changed=True) as events:
                flaky.set(web_search="fail")
                for _ in range(5):
                    assert (await client.call_tool("web_search", {"text": "q"})).is_error
                with anyio.fail_after(20):
                    async for _event in events:
                        break
            assert "web_search" not in await tool_names(client)

    anyio.run(scenario)
    assert fast_calls(timings) == 0  # the front took no call (and so never notified)
