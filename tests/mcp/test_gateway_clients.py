"""Clients that never re-list: the refusal alone must stop the model, at no upstream cost; and
`tools/list` tells a 2026-07-28 client how long it may cache it (`ttlMs`). The client matrix
(scripts/mcp_client_matrix.py) is run for two rows and checked against docs/mcp-clients.md."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from scripts.mcp_client_matrix import (
    LABELS,
    QUICK,
    Row,
    label,
    langchain_missing,
    markdown,
    run_matrix,
    ts_client_missing,
)
from scripts.testing.mcp_servers import Flaky, gateway_stdio, write_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp-clients.md"


def test_the_matrix_rows_hold_for_a_relisting_and_a_never_relisting_client() -> None:
    rows = {row.client: row for row in run_matrix(QUICK, cooldown=0.5)}
    relists, never = rows["session-list-changed"], rows["never-relists"]
    assert relists.next_turn_loses_tool and relists.calls_refused_before_model_stops == 0
    # The client keeps the tool: one refused call, and the model stops calling it.
    assert not never.next_turn_loses_tool and never.calls_refused_before_model_stops == 1
    assert relists.upstream_calls_while_open == never.upstream_calls_while_open == 0
    assert relists.comes_back and never.comes_back
    assert_published(list(rows.values()))


def test_under_refuse_no_client_loses_the_tool_and_one_refusal_stops_the_model() -> None:
    """`way: refuse` keeps the list unchanged: a re-listing client behaves like one that never
    re-lists (one refused call, no upstream call), and the tool still comes back."""
    names = ["session-every-turn", *QUICK]
    rows = run_matrix(names, cooldown=0.5, way="refuse")
    for row in rows:
        assert not row.next_turn_loses_tool and row.calls_refused_before_model_stops == 1
        assert row.upstream_calls_while_open == 0 and row.comes_back
    assert_published(rows)


def assert_published(rows: list[Row]) -> None:
    """What docs/mcp-clients.md publishes for these rows is what was just measured (all but
    the time column)."""
    published = DOC.read_text(encoding="utf-8").splitlines()
    for row, line in zip(rows, markdown(rows).splitlines()[2:], strict=True):
        measured = line.rsplit("|", 2)[0]
        assert any(
            doc.startswith(f"| {label(row)} |") and doc.rsplit("|", 2)[0] == measured
            for doc in published
        ), f"docs/mcp-clients.md disagrees with the measured row: {measured}"


def test_a_client_that_keeps_its_first_list_is_stopped_by_the_refusal() -> None:
    """Pydantic AI's MCPToolset (fastmcp's client) and the Vercel AI SDK's MCP client."""
    names = ["pydantic-ai"]
    if ts_client_missing("@ai-sdk/mcp") is None:
        names.append("vercel-ai")
    rows = run_matrix(names, cooldown=0.5)
    for row in rows:
        assert not row.next_turn_loses_tool and row.calls_refused_before_model_stops == 1
        assert row.upstream_calls_while_open == 0 and row.comes_back
    assert_published(rows)
    if len(rows) == 1:
        pytest.skip(f"vercel-ai not measured: {ts_client_missing('@ai-sdk/mcp')}")


def test_the_typescript_sdk_client_stops_calling_the_open_tool() -> None:
    missing = ts_client_missing()
    if missing is not None:
        pytest.skip(missing)
    (row,) = run_matrix(["ts-client"], cooldown=0.5)
    # Its listChanged handler refreshes after a 300 ms debounce: a turn sooner than that still
    # sees the tool and is refused once; either way the model stops at no upstream cost.
    assert row.calls_refused_before_model_stops == (0 if row.next_turn_loses_tool else 1)
    assert row.upstream_calls_while_open == 0 and row.comes_back
    assert f"| {LABELS['ts-client']} |" in DOC.read_text(encoding="utf-8")


@pytest.mark.timeout(900)  # per-call: every call starts a gateway process
def test_langchain_adapters_open_a_gateway_per_call_unless_given_one_session() -> None:
    missing = langchain_missing()
    if missing is not None:
        pytest.skip(missing)
    session, per_call = run_matrix(["langchain-session", "langchain-per-call"], cooldown=0.5)
    assert not session.next_turn_loses_tool and session.calls_refused_before_model_stops == 1
    assert session.upstream_calls_while_open == 0 and session.comes_back
    # A new stdio gateway per call: no streak ever builds, every call reaches the upstream.
    assert per_call.calls_refused_before_model_stops == 0
    assert per_call.upstream_calls_while_open == 6 and per_call.comes_back
    assert_published([session, per_call])


def test_a_refusal_says_the_tool_is_out_what_to_do_and_not_to_retry(tmp_path: Path) -> None:
    flaky = Flaky(tmp_path / "flaky.json")
    config = write_config(
        tmp_path / "gateway.json",
        {"search": flaky.stdio()},
        list_ttl=120,
        breaker={"threshold": 2, "cooldown": 30},
    )

    async def scenario() -> None:
        async with Client(gateway_stdio(config), cache=None) as client:  # 2026-07-28
            listed = await client.list_tools()
            assert listed.ttl_ms == 120_000  # nothing open: the configured most
            flaky.set(web_search="fail")
            for _ in range(2):
                assert (await client.call_tool("web_search", {"text": "q"})).is_error
            listed = await client.list_tools()
            assert "web_search" not in [tool.name for tool in listed.tools]
            # Until the cooldown ends, when web_search may be offered again.
            assert 0 < listed.ttl_ms <= 30_000
            refused = await client.call_tool("web_search", {"text": "q"})
            text = refused.content[0].text  # type: ignore[union-attr]
            assert refused.is_error
            assert "OUT for the rest of this task" in text and "did not run" in text
            assert "Calling web_search again will not work" in text
            assert "Use another tool instead (echo, fetch_page)" in text
            assert "503" in text  # why, in the breaker's own words
            assert flaky.calls("web_search") == 2  # the refusal cost no upstream call

    anyio.run(scenario)
