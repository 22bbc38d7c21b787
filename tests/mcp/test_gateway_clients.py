"""Clients that never re-list: the refusal alone must stop the model, at no upstream cost; and
`tools/list` tells a 2026-07-28 client how long it may cache it (`ttlMs`). The client matrix
(scripts/mcp_client_matrix.py) is run for two rows and checked against docs/mcp-clients.md."""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import Client

from scripts.mcp_client_matrix import LABELS, QUICK, markdown, run_matrix
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
    # What docs/mcp-clients.md publishes for these rows is what was just measured (all but
    # the time column).
    published = DOC.read_text(encoding="utf-8")
    for line in markdown(list(rows.values())).splitlines()[2:]:
        label = next(LABELS[name] for name in QUICK if LABELS[name] in line)
        measured = line.rsplit("|", 2)[0]
        assert any(
            row.startswith(f"| {label} |") and row.rsplit("|", 2)[0] == measured
            for row in published.splitlines()
        ), f"docs/mcp-clients.md disagrees with the measured row: {measured}"


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
