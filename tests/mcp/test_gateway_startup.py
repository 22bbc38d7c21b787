"""The gateway answers `initialize` at once and starts its upstreams meanwhile: `tools/list` and
a call wait for an upstream still starting; one that starts later is announced with
`list_changed`; one that cannot start is still named with its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from scripts.testing.mcp_servers import (
    Flaky,
    Notes,
    connect,
    gateway_stdio,
    tool_names,
    write_config,
)

GHOST_DOWN = (
    r"upstream ghost is not running \(cannot start it: No such file or directory: "
    r"'.*no-such-server'\)"
)


def text_of(result: Any) -> str:
    return " ".join(block.text for block in result.content)


def test_initialize_does_not_wait_for_a_slow_upstream_and_a_call_waits_for_it(
    flaky: Flaky, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"  # the slow upstream serves only once this file exists
    slow = Flaky(tmp_path / "slow.json", "slow")
    ghost = {"command": str(tmp_path / "no-such-server"), "args": []}
    servers = {"search": flaky.stdio(), "slow": slow.stdio(gate=gate), "ghost": ghost}
    # The old gateway answered initialize only once every upstream had started, or after
    # connect_timeout: 60 s, beyond the 30 s this test gives it.
    config = write_config(tmp_path / "gateway.json", servers, connect_timeout=60)

    async def open_gate_soon() -> None:
        await anyio.sleep(0.5)
        gate.touch()

    async def scenario() -> None:
        notes = Notes()
        with anyio.fail_after(30):
            async with connect(gateway_stdio(config), notes) as client:
                assert not gate.exists()  # initialized while the upstream cannot have started
                async with anyio.create_task_group() as group:
                    group.start_soon(open_gate_soon)
                    # Sent while it is starting: answered once it has, not "unknown tool".
                    answer = await client.call_tool("slow__echo", {"text": "hi"})
                assert not answer.is_error and text_of(answer) == "slow:hi"
                assert {"slow__echo", "search__echo"} <= set(await tool_names(client))
                with pytest.raises(MCPError, match=GHOST_DOWN):
                    await client.call_tool("ghost__lookup", {"q": "x"})
                # No list was answered before the upstreams had started: nothing to announce.
                assert notes.count() == 0

    anyio.run(scenario)
    assert slow.calls("echo") == 1


def test_an_upstream_that_starts_after_the_first_list_is_announced_with_list_changed(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    slow = Flaky(tmp_path / "slow.json", "slow")
    # 20 s: a start (a Python process importing mcp) takes seconds on a loaded machine.
    config = write_config(
        tmp_path / "gateway.json", {"slow": slow.stdio(gate=gate)}, connect_timeout=20
    )
    log = tmp_path / "gateway.err"

    async def scenario() -> None:
        notes = Notes()
        with anyio.fail_after(120):
            async with connect(gateway_stdio(config, stderr=log), notes) as client:
                # Answered before the slow upstream's start ran out of time (the old gateway
                # answered only after it had, and logged it first).
                assert "upstream slow" not in log.read_text()
                # tools/list waits for it up to connect_timeout, then answers without it.
                assert await tool_names(client) == []
                assert notes.count() == 0
                gate.touch()  # its next start succeeds: the client is told, and re-lists
                await notes.wait_for(timeout=60)
                assert await tool_names(client) == ["web_search", "fetch_page", "echo"]
                answer = await client.call_tool("echo", {"text": "late"})
                assert text_of(answer) == "slow:late"

    anyio.run(scenario)
