"""guard_session() around a real `mcp` client talking to the flaky server (in process)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from breaker_panel import ControlPlane, ToolBreaker, WorkerBreakers
from breaker_panel.integrations.mcp import guard_session
from scripts.testing.mcp_servers import Flaky
from scripts.testing.mcp_upstream import build_server


def names(listing: object) -> list[str]:
    return [tool.name for tool in listing.tools]  # type: ignore[attr-defined]


def test_five_outages_take_the_tool_out_and_a_call_to_it_is_refused(flaky: Flaky) -> None:
    async def scenario() -> None:
        breaker = ToolBreaker()
        async with Client(build_server(flaky.state, "flaky")) as client:
            session = guard_session(client, breaker)
            flaky.set(web_search="fail")
            for _ in range(5):
                assert (await session.call_tool("web_search", {"text": "q"})).is_error
            assert names(await session.list_tools()) == ["fetch_page", "echo"]
            refused = await session.call_tool("web_search", {"text": "q"})
            assert refused.is_error and "web_search" in refused.content[0].text
            assert flaky.calls("web_search") == 5
            assert session.protocol_version  # everything else passes through

    anyio.run(scenario)


def test_semantic_errors_do_not_count_and_protocol_errors_do(flaky: Flaky) -> None:
    async def scenario() -> None:
        worker = WorkerBreakers()
        run = worker.start_run()
        async with Client(build_server(flaky.state, "flaky")) as client:
            session = guard_session(client.session, run)  # the ClientSession itself works too
            flaky.set(web_search="semantic")
            for _ in range(6):
                await session.call_tool("web_search", {"text": "zzz"})
            assert "web_search" in names(await session.list_tools())
            assert worker.consecutive("web_search") == 0
            flaky.set(web_search="raise")
            for _ in range(5):
                with pytest.raises(MCPError):
                    await session.call_tool("web_search", {"text": "q"})
            assert worker.is_open("web_search")
            assert "web_search" not in names(await session.list_tools())

    anyio.run(scenario)


def test_custom_patterns_decide_what_an_error_result_means(tmp_path: Path, flaky: Flaky) -> None:
    async def scenario() -> None:
        breaker = ToolBreaker()
        async with Client(build_server(flaky.state, "flaky")) as client:
            session = guard_session(client, breaker, retryable_patterns=[r"no results"])
            flaky.set(web_search="semantic")
            for _ in range(5):
                await session.call_tool("web_search", {"text": "q"})
            assert breaker.is_open("web_search")

    anyio.run(scenario)


def test_with_the_worker_breakers_each_call_is_a_run_and_the_tool_comes_back(
    flaky: Flaky,
) -> None:
    now = [0.0]
    worker = WorkerBreakers(cooldown=30, clock=lambda: now[0])

    async def scenario() -> None:
        async with Client(build_server(flaky.state, "flaky")) as client:
            session = guard_session(client, worker)
            flaky.set(web_search="fail")
            for _ in range(5):
                await session.call_tool("web_search", {"text": "q"})
            assert "web_search" not in names(await session.list_tools())
            assert (await session.call_tool("web_search", {"text": "q"})).is_error
            assert flaky.calls("web_search") == 5

            now[0] += 30  # the cooldown has passed: offered again for its one trial call
            flaky.set()
            assert "web_search" in names(await session.list_tools())
            assert not (await session.call_tool("web_search", {"text": "q"})).is_error
            assert worker.state("web_search") == "closed"

    anyio.run(scenario)


def test_with_a_control_plane_each_call_is_reported_as_a_run(flaky: Flaky) -> None:
    plane = ControlPlane("http://127.0.0.1:9", token="t", worker_id="w", start=False)

    async def scenario() -> None:
        async with Client(build_server(flaky.state, "flaky")) as client:
            session = guard_session(client, plane, agent="desk")
            flaky.set(web_search="fail")
            for _ in range(6):
                await session.call_tool("web_search", {"text": "q"})
            assert flaky.calls("web_search") == 5

    anyio.run(scenario)
    events = plane.buffered()
    calls = [e for e in events if e["type"] == "tool.call"]
    assert [e["outcome"] for e in calls] == ["retryable"] * 5 + ["blocked"]
    started = [e for e in events if e["type"] == "run.started"]
    assert len(started) == 6 and {e["agent"] for e in started} == {"desk"}
    assert sum(e["type"] == "run.finished" for e in events) == 6
    plane.close(timeout=0.1)


def test_refuse_keeps_the_tool_listed_and_answers_its_calls_with_the_notice(
    flaky: Flaky,
) -> None:
    async def scenario() -> None:
        breaker = ToolBreaker()
        async with Client(build_server(flaky.state, "flaky")) as client:
            listed = names(await client.list_tools())
            session = guard_session(client, breaker, way="restrict")  # MCP: refuse
            assert session.way == "refuse"
            flaky.set(web_search="fail")
            for _ in range(5):
                assert (await session.call_tool("web_search", {"text": "q"})).is_error
            assert breaker.is_open("web_search")
            assert names(await session.list_tools()) == listed  # the tools array stays
            refused = await session.call_tool("web_search", {"text": "q"})
            assert refused.is_error and refused.content[0].text == breaker.notice()
            assert flaky.calls("web_search") == 5  # never reached the server

    anyio.run(scenario)
