"""The gateway over stdio, as a desktop client runs it, in front of a flaky stdio upstream."""

from __future__ import annotations

from pathlib import Path

import anyio

from scripts.testing.mcp_servers import (
    Flaky,
    Notes,
    connect,
    gateway_stdio,
    tool_names,
    write_config,
)


def text_of(result: object) -> str:
    return " ".join(block.text for block in result.content)  # type: ignore[attr-defined]


def test_five_failures_hide_the_tool_and_a_trial_brings_it_back(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            assert await tool_names(client) == ["web_search", "fetch_page", "echo"]
            flaky.set(web_search="fail")
            for _ in range(5):
                result = await client.call_tool("web_search", {"text": "q"})
                assert result.is_error and "503" in text_of(result)
            await notes.wait_for()
            assert await tool_names(client) == ["fetch_page", "echo"]

            # Refused at once with the notice; the upstream never sees it.
            before = flaky.calls("web_search")
            refused = await client.call_tool("web_search", {"text": "q"})
            assert refused.is_error and "web_search" in text_of(refused)
            assert "503" in text_of(refused)  # the notice names the last error
            assert flaky.calls("web_search") == before == 5
            assert (await client.call_tool("echo", {"text": "hi"})).is_error is False

            # After the cooldown the tool is offered again for its one trial call.
            flaky.set()
            await notes.wait_for()
            assert "web_search" in await tool_names(client)
            trial = await client.call_tool("web_search", {"text": "q"})
            assert not trial.is_error and text_of(trial) == "flaky:q"
            assert flaky.calls("web_search") == 6
            assert notes.count() == 2
            assert "web_search" in await tool_names(client)

    anyio.run(scenario)


def test_a_failed_trial_hides_the_tool_again(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            await tool_names(client)
            flaky.set(web_search="fail")
            for _ in range(5):
                await client.call_tool("web_search", {"text": "q"})
            await notes.wait_for()
            await notes.wait_for()  # offered again for its trial
            assert "web_search" in await tool_names(client)
            trial = await client.call_tool("web_search", {"text": "q"})
            assert trial.is_error
            await notes.wait_for()
            assert "web_search" not in await tool_names(client)
            assert flaky.calls("web_search") == 6

    anyio.run(scenario)


def test_semantic_errors_never_hide_a_tool(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            await tool_names(client)
            flaky.set(web_search="semantic")
            for _ in range(8):
                result = await client.call_tool("web_search", {"text": "zzz"})
                assert result.is_error and "no results" in text_of(result)
            assert "web_search" in await tool_names(client)
            assert notes.count() == 0
            assert flaky.calls("web_search") == 8

    anyio.run(scenario)


def test_protocol_errors_and_timeouts_count_as_retryable(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "gateway.json",
        {"search": flaky.stdio()},
        call_timeout=0.3,
        breaker={"threshold": 4, "cooldown": 60},
    )

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            await tool_names(client)
            flaky.set(web_search="raise")
            for _ in range(2):
                result = await client.call_tool("web_search", {"text": "q"})
                assert result.is_error and "crashed" in text_of(result)
            flaky.set(web_search="hang")
            for _ in range(2):
                result = await client.call_tool("web_search", {"text": "q"})
                assert result.is_error and "no answer" in text_of(result)
            await notes.wait_for()
            assert await tool_names(client) == ["fetch_page", "echo"]

    anyio.run(scenario)


def test_colliding_tool_names_are_prefixed_by_server(tmp_path: Path) -> None:
    one, two = Flaky(tmp_path / "one.json", "one"), Flaky(tmp_path / "two.json", "two")
    config = write_config(tmp_path / "gateway.json", {"one": one.stdio(), "two": two.stdio()})

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            names = await tool_names(client)
            assert sorted(names) == sorted(
                f"{server}__{tool}"
                for server in ("one", "two")
                for tool in ("web_search", "fetch_page", "echo")
            )
            result = await client.call_tool("two__echo", {"text": "x"})
            assert text_of(result) == "two:x"
            assert (one.calls(), two.calls()) == (0, 1)

    anyio.run(scenario)


def test_a_crashed_upstream_is_a_retryable_failure_and_is_reconnected(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gateway.json", {"search": flaky.stdio()}, breaker={"threshold": 100}
    )

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            await tool_names(client)
            flaky.set(web_search="exit")
            crashed = await client.call_tool("web_search", {"text": "q"})
            assert crashed.is_error
            flaky.set()
            with anyio.fail_after(30):  # until the gateway has started the upstream again
                while (await client.call_tool("echo", {"text": "back"})).is_error:
                    await anyio.sleep(0.05)
            assert text_of(await client.call_tool("web_search", {"text": "q"})) == "flaky:q"

    anyio.run(scenario)


def test_an_upstreams_own_list_change_reaches_the_client(flaky: Flaky, tmp_path: Path) -> None:
    config = write_config(tmp_path / "gateway.json", {"search": flaky.stdio()})

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            assert "new_tool" not in await tool_names(client)
            flaky.set(_extra="new_tool", echo="announce")
            assert not (await client.call_tool("echo", {"text": "x"})).is_error
            await notes.wait_for()
            assert "new_tool" in await tool_names(client)

    anyio.run(scenario)
