"""The config's `way`: under `refuse` an open tool stays in tools/list, byte for byte, no
list_changed is sent for it, and its calls are answered with the notice without reaching the
upstream; `remove` (the default) is what the other gateway tests hold. Real gateway and
upstream processes, a real MCP client."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from mcp import Client

from scripts.testing.mcp_servers import (
    Flaky,
    Notes,
    connect,
    gateway_stdio,
    tool_names,
    write_config,
)

# Long enough that the refusals below come while the tool is open on a loaded machine.
COOLDOWN = 2.0


def text_of(result: object) -> str:
    return " ".join(block.text for block in result.content)  # type: ignore[attr-defined]


async def listed_json(client: Client) -> dict[str, str]:
    """Each listed tool as the JSON the client received it as."""
    tools = (await client.list_tools()).tools
    return {
        tool.name: json.dumps(tool.model_dump(mode="json", by_alias=True, exclude_none=True))
        for tool in tools
    }


async def open_tool(client: Client, name: str) -> None:
    for _ in range(5):
        result = await client.call_tool(name, {"text": "q"})
        assert result.is_error and "503" in text_of(result)


def test_under_refuse_an_open_tool_stays_listed_unchanged_and_its_calls_are_refused(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gateway.json",
        {"search": flaky.stdio()},
        way="refuse",
        breaker={"cooldown": COOLDOWN},
    )

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config), notes) as client:
            before = await listed_json(client)
            assert list(before) == ["web_search", "fetch_page", "echo"]
            flaky.set(web_search="fail")
            await open_tool(client, "web_search")

            # Refused at once with the notice (the refusal path: reported blocked); the
            # upstream never sees it.
            started = anyio.current_time()
            refused = await client.call_tool("web_search", {"text": "q"})
            assert anyio.current_time() - started < COOLDOWN
            assert refused.is_error and "web_search is OUT" in text_of(refused)
            assert "503" in text_of(refused)  # the notice names the last error
            assert flaky.calls("web_search") == 5

            # The tools array a client sends its model is the same bytes; nobody was told.
            assert await listed_json(client) == before
            assert notes.count() == 0

            # After the cooldown the next call is the trial: it reaches the upstream, once.
            flaky.set()
            with anyio.fail_after(20):
                while (trial := await client.call_tool("web_search", {"text": "q"})).is_error:
                    assert "web_search is OUT" in text_of(trial)
                    await anyio.sleep(0.1)
            assert text_of(trial) == "flaky:q"
            assert flaky.calls("web_search") == 6
            assert text_of(await client.call_tool("web_search", {"text": "r"})) == "flaky:r"
            assert await listed_json(client) == before
            assert notes.count() == 0

    anyio.run(scenario)


def test_a_servers_way_overrides_the_configs_and_restrict_is_served_as_refuse(
    tmp_path: Path,
) -> None:
    one, two = Flaky(tmp_path / "one.json", "one"), Flaky(tmp_path / "two.json", "two")
    stderr = tmp_path / "gateway.err"
    config = write_config(
        tmp_path / "gateway.json",
        {"one": one.stdio(), "two": {**two.stdio(), "way": "remove"}},
        way="restrict",
        breaker={"cooldown": 60},
    )

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config, stderr=stderr), notes) as client:
            before = await listed_json(client)
            one.set(web_search="fail")
            two.set(web_search="fail")

            await open_tool(client, "two__web_search")  # remove: it leaves, clients are told
            await notes.wait_for()
            assert "two__web_search" not in await tool_names(client)

            await open_tool(client, "one__web_search")  # restrict, so refuse: it stays
            refused = await client.call_tool("one__web_search", {"text": "q"})
            assert refused.is_error and "one__web_search is OUT" in text_of(refused)
            assert one.calls("web_search") == 5
            after = await listed_json(client)
            assert after == {k: v for k, v in before.items() if k != "two__web_search"}
            assert notes.count() == 1

    anyio.run(scenario)
    log = stderr.read_text()
    assert log.count("way restrict (servers: one) is served as refuse") == 1, log


def test_under_refuse_a_half_open_tool_nobody_calls_is_still_probed(
    flaky: Flaky, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "gateway.json",
        {"search": flaky.stdio() | {"probes": {"web_search": {"arguments": {"text": "probe"}}}}},
        way="refuse",
        probe_after=0.3,
        breaker={"threshold": 2, "cooldown": 0.5, "check_interval": 0.05},
    )
    log = tmp_path / "gateway.err"

    async def logged(line: str) -> None:
        with anyio.fail_after(30):
            while line not in log.read_text():
                await anyio.sleep(0.02)

    async def scenario() -> None:
        notes = Notes()
        gateway = gateway_stdio(config, "--log-level", "INFO", stderr=log)
        async with connect(gateway, notes) as client:
            before = await listed_json(client)
            flaky.set(web_search="fail")
            for _ in range(2):
                assert (await client.call_tool("web_search", {"text": "q"})).is_error
            # Nobody calls: the probe is the trial, and fails.
            await logged("probe of web_search (no client call came): failed")
            assert flaky.calls("web_search") == 3
            flaky.set()
            # After the longer cooldown the next probe passes.
            await logged("probe of web_search (no client call came): ok")
            assert flaky.calls("web_search") == 4
            answer = await client.call_tool("web_search", {"text": "back"})
            assert text_of(answer) == "flaky:back"
            assert await listed_json(client) == before
            assert notes.count() == 0

    anyio.run(scenario)
    assert log.read_text().count("probe of web_search (no client call came): failed") == 1
