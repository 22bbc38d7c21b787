"""Result checks in the gateway, against a real upstream built on the `mcp` 2.x low-level
`Server` (scripts/testing/mcp_silent_upstream.py): answers that do not raise and are still
failures count as `degraded`, and five in a row take the tool away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from breaker_panel.mcp_gateway.config import ConfigError, GatewayConfig
from scripts.testing.mcp_servers import PYTHON, Notes, connect, gateway_stdio, write_config
from scripts.testing.processes import ROOT

SILENT = {
    "command": PYTHON,
    "args": ["-m", "scripts.testing.mcp_silent_upstream"],
    "cwd": str(ROOT),
}
# A long cooldown: the tests look at the open breaker, not at its recovery.
BREAKER = {"cooldown": 600, "max_cooldown": 600}


def text_of(result: Any) -> str:
    return " ".join(block.text for block in result.content)


def config(tmp_path: Path, **options: Any) -> Path:
    return write_config(tmp_path / "gateway.json", {"silent": SILENT}, breaker=BREAKER, **options)


async def names(client: Any) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


def test_empty_content_passes_through_counts_degraded_and_five_open_the_tool(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config(tmp_path)), notes) as client:
            assert "search_empty" in await names(client)
            for _ in range(5):
                result = await client.call_tool("search_empty", {"q": "flights to Oslo"})
                assert not result.is_error and result.content == []  # unchanged
            await notes.wait_for()
            assert "search_empty" not in await names(client)
            refused = await client.call_tool("search_empty", {"q": "again"})
            assert refused.is_error
            assert "search_empty: it returns empty results for every query" in text_of(refused)
            ok = await client.call_tool("search_ok", {"q": "x"})
            assert text_of(ok) == "3 results for x: a, b, c"

    anyio.run(scenario)


def test_an_error_in_a_successful_body_counts_degraded(tmp_path: Path) -> None:
    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config(tmp_path)), notes) as client:
            await names(client)
            for _ in range(5):
                result = await client.call_tool("search_error", {"q": "a"})
                assert not result.is_error and text_of(result) == '{"error": "rate limited"}'
            await notes.wait_for()
            refused = await client.call_tool("search_error", {"q": "b"})
            assert refused.is_error
            assert "answers with an error instead of results (rate limited)" in text_of(refused)

    anyio.run(scenario)


def test_structured_content_that_breaks_the_schema_is_a_clear_error_and_degraded(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config(tmp_path)), notes) as client:
            await names(client)
            good = await client.call_tool("weather", {"city": "Lisbon"})
            assert not good.is_error
            assert good.structured_content == {"city": "Lisbon", "temperature_c": 17.5}
            for _ in range(5):
                bad = await client.call_tool("weather", {"city": "Oslo"})
                assert bad.is_error and bad.structured_content is None
                said = text_of(bad)
                assert said.startswith("weather failed: silent returns structured content")
                assert "breaks its output schema" in said and "temperature_c" in said
            await notes.wait_for()
            assert "weather" not in await names(client)

    anyio.run(scenario)


def test_the_schema_check_works_on_the_sdk_path_too(tmp_path: Path) -> None:
    """--no-passthrough: the mcp client itself refuses the result; the gateway counts that."""

    async def scenario() -> None:
        notes = Notes()
        async with connect(gateway_stdio(config(tmp_path), "--no-passthrough"), notes) as client:
            await names(client)
            for _ in range(5):
                bad = await client.call_tool("weather", {"city": "Oslo"})
                assert bad.is_error and "breaks its output schema" in text_of(bad)
            await notes.wait_for()
            refused = await client.call_tool("weather", {"city": "Lisbon"})
            assert refused.is_error and "breaks its output schema" in text_of(refused)

    anyio.run(scenario)


def test_config_turns_checks_off_per_tool_and_adds_user_rules(tmp_path: Path) -> None:
    checks = {
        "tools": {
            "search_empty": {"empty_is_healthy": True},
            "search_error": False,
            "search_ok": {
                "rules": [{"pattern": r"results for cached\b", "reason": "serves a cached page"}]
            },
            "weather": {"rules": [{"pointer": "/temperature_c", "equals": 17.5}]},
        }
    }

    async def scenario() -> None:
        notes = Notes()
        path = config(tmp_path, checks=checks)
        async with connect(gateway_stdio(path), notes) as client:
            await names(client)
            for _ in range(6):
                await client.call_tool("search_empty", {"q": "a"})
                await client.call_tool("search_error", {"q": "a"})
                assert not (await client.call_tool("search_ok", {"q": "fresh"})).is_error
            assert {"search_empty", "search_error", "search_ok"} <= set(await names(client))
            for _ in range(5):
                await client.call_tool("search_ok", {"q": "cached"})
            await notes.wait_for()
            refused = await client.call_tool("search_ok", {"q": "fresh"})
            assert "serves a cached page" in text_of(refused)
            for _ in range(5):
                await client.call_tool("weather", {"city": "Lisbon"})
            await notes.wait_for()
            refused = await client.call_tool("weather", {"city": "Lisbon"})
            assert "its answer has /temperature_c = 17.5" in text_of(refused)

    anyio.run(scenario)


@pytest.mark.parametrize(
    ("checks", "said"),
    [
        ([], "checks must be a JSON object"),
        ({"tools": {"t": {"colour": 1}}}, "checks.tools.t: unknown field 'colour'"),
        ({"tools": {"t": {"stale_after": 1}}}, "checks.tools.t.stale_after"),
        ({"tools": {"t": {"no_results": "none"}}}, "checks.tools.t.no_results must be a list"),
        ({"tools": {"t": {"error_patterns": ["("]}}}, "not a regular expression"),
        ({"tools": {"t": {"rules": [{"pattern": "(", "reason": "x"}]}}}, "rules[0].pattern"),
        ({"tools": {"t": {"rules": [{"pointer": "a", "equals": 1}]}}}, "rules[0].pointer"),
        ({"tools": {"t": {"rules": [{"pointer": "/a"}]}}}, "exactly one of equals"),
        ({"tools": {"t": {"rules": [{"pointer": "/a", "empty": 1}]}}}, "rules[0].empty must"),
        ({"default": {"empty_pointers": ["x"]}}, "checks.default"),
    ],
)
def test_a_bad_checks_block_is_a_config_error_naming_the_field(checks: Any, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GatewayConfig.from_dict({"servers": {"s": {"command": "x"}}, "checks": checks})
    assert said in str(caught.value)
